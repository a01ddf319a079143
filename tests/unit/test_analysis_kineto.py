"""Kineto (PyTorch-profiler) reader on hand-built traces and on the workload's real traces,
plus HTA equivalence of the temporal split (HolisticTraceAnalysis is a test-only dependency)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.metrics import Metrics
from orchestrator.errors import UserError
from tests.fixtures.kineto_builder import BWD_TID, MAIN_TID, KinetoBuilder, training_trace

pytestmark = pytest.mark.filterwarnings("ignore::Warning")  # pandas deprecations inside HTA

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
VARIANTS = ["baseline", "workers4", "offload", "lora", "fp32"]


def small_trace() -> KinetoBuilder:
    b = KinetoBuilder(rank=5)
    b.gpu("kernel", "ampere_sgemm_128x64_tn", 100, 50, stream=7)  # [100, 150)
    b.gpu("kernel", "sm90_xmma_gemm_bf16bf16", 120, 60, stream=13)  # overlaps: [100, 180)
    b.gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 200, 20, bytes=2000)  # [200, 220)
    b.gpu("gpu_memset", "Memset (Device)", 220, 5, bytes=64)  # touches: [200, 225)
    b.gpu("kernel", "ncclDevKernel_AllReduce", 300, 10, stream=20)  # [300, 310)
    b.gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 310, 10, bytes=1000)  # [300, 320)
    b.cpu("user_annotation", "step_1", 90, 150)
    b.cpu("user_annotation", "step_2", 240, 90)
    b.cpu("user_annotation", "forward", 95, 50)
    b.cpu("user_annotation", "enumerate(DataLoader)#_Iter.__next__", 50, 40)
    b.cpu("cpu_op", "aten::linear", 95, 40, tid=MAIN_TID)
    b.cpu("cpu_op", "aten::mm", 100, 20, tid=MAIN_TID)  # nested: counts once
    b.cpu("cpu_op", "aten::add", 200, 10, tid=MAIN_TID)
    b.cpu("cpu_op", "autograd::engine", 150, 30, tid=BWD_TID)
    b.cpu("cuda_runtime", "cudaDeviceSynchronize", 230, 70)
    b.memory(10, 1000)
    b.memory(20, 3000)
    b.memory(30, 500)
    return b


def test_small_trace_metrics(tmp_path: Path) -> None:
    m = analyze_paths([small_trace().write(tmp_path / "t.json")])
    r = m.ranks[0]
    assert r.rank == 5 and m.sources[0].rank_rule == "distributedInfo.rank"
    assert (r.span_start_ns, r.span_end_ns) == (100_000, 320_000)
    assert r.busy_ns == (80 + 25 + 20) * 1000
    assert r.idle_gaps.count == 2 and r.idle_gaps.total_ns == (20 + 75) * 1000
    a = r.activity
    assert (a.kernel_count, a.memcpy_count, a.memset_count) == (3, 2, 1)
    assert (a.kernel_ns, a.memcpy_ns, a.memset_ns) == (120_000, 30_000, 5_000)
    by = {c.direction: c for c in r.copies}
    assert by["HtoD"].bytes == 2000 and by["DtoH"].bytes == 1000
    assert by["HtoD"].bandwidth_gb_s == pytest.approx(2000 / 20_000)
    # HTA temporal (one ProfilerStep name or fewer: no last-step filter)
    assert r.temporal.compute_ns == 80_000  # sgemm + xmma, nccl/memory are not compute
    assert r.temporal.non_compute_ns == 45_000
    assert r.temporal.idle_ns == r.idle_ns
    assert r.steps is not None and r.steps.durations_ns == [150_000, 90_000]
    assert r.data_wait_ns == 40_000
    threads = {t.name: t for t in r.threads}
    assert threads["pt_main_thread"].cpu_op_ns == 50_000
    assert threads["pt_autograd_0"].cpu_op_ns == 30_000
    assert r.sync.calls == 1 and r.sync.total_ns == 70_000
    assert r.peak_gpu_memory_bytes == 3000
    assert r.fp32_gemm_pct == pytest.approx(100 * 50 / 120)
    assert r.device_name == "NVIDIA GH200 480GB"
    assert r.unified_memory.cpu_page_faults is None  # Kineto does not trace UM


def test_gzip_and_plain_agree_and_rank_from_name(tmp_path: Path) -> None:
    b = small_trace()
    b.rank = None
    plain = analyze_paths([b.write(tmp_path / "run_rank2.json")])
    gz = analyze_paths([b.write(tmp_path / "run.7.json.gz")])
    assert plain.ranks[0].rank == 2 and gz.ranks[0].rank == 7
    assert plain.sources[0].rank_rule == "file name"
    assert plain.ranks[0].busy_ns == gz.ranks[0].busy_ns


def test_directory_dispatch_skips_non_traces(tmp_path: Path) -> None:
    training_trace(rank=0).write(tmp_path / "a.pt.trace.json.gz")
    training_trace(rank=1).write(tmp_path / "b.pt.trace.json")
    (tmp_path / "metrics.json").write_text(json.dumps({"step_ms": 1}))
    m = analyze_paths([tmp_path])
    assert [r.rank for r in m.ranks] == [0, 1]
    assert m.aggregate.ranks == 2


def test_bad_trace_is_user_error(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(UserError, match=r"bad\.json"):
        analyze_paths([p])
    q = tmp_path / "nothing.json.gz"
    with gzip.open(q, "wt") as fh:
        fh.write('{"foo": 1}')
    with pytest.raises(UserError, match="traceEvents"):
        analyze_paths([q])


# ---- HTA equivalence -------------------------------------------------------------------------
def hta_temporal(files: dict[int, Path]) -> dict[int, tuple[float, float, float]]:
    hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis not installed")
    logging.disable(logging.WARNING)
    try:
        ta = hta.TraceAnalysis(
            trace_files={k: str(v.resolve()) for k, v in files.items()},
            trace_dir=str(next(iter(files.values())).resolve().parent),
        )
        df = ta.get_temporal_breakdown(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    return {
        int(row["rank"]): (
            float(row["idle_time_pctg"]),
            float(row["compute_time_pctg"]),
            float(row["non_compute_time_pctg"]),
        )
        for _, row in df.iterrows()
    }


def assert_close(m: Metrics, expected: dict[int, tuple[float, float, float]]) -> None:
    got = {r.rank: r.temporal for r in m.ranks}
    assert set(got) == set(expected)
    for rank, (idle, comp, non) in expected.items():
        t = got[rank]
        assert abs(t.idle_pct - idle) <= 0.5, (rank, t, expected[rank])
        assert abs(t.compute_pct - comp) <= 0.5, (rank, t, expected[rank])
        assert abs(t.non_compute_pct - non) <= 0.5, (rank, t, expected[rank])


@pytest.mark.parametrize("fractional", [True, False])
def test_hta_equivalence_on_fixtures(tmp_path: Path, fractional: bool) -> None:
    files = {}
    for rank in (0, 1):
        files[rank] = training_trace(rank=rank, fractional=fractional, seed=3).write(
            tmp_path / f"rank{rank}.json"
        )
    expected = hta_temporal(files)
    m = analyze_paths(list(files.values()))
    assert_close(m, expected)
    assert all("last ProfilerStep" in r.temporal.basis for r in m.ranks)


def test_hta_equivalence_single_step(tmp_path: Path) -> None:
    f = small_trace().write(tmp_path / "rank5.json")
    expected = hta_temporal({5: f})
    assert_close(analyze_paths([f]), expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_workload_traces_against_hta(variant: str) -> None:
    f = TRACES / variant / "sft_rank0.pt.trace.json.gz"
    if not f.exists():
        pytest.skip(f"{f} absent: recorded by bench/gpu_variants.sh on a GPU")
    m = analyze_paths([f])
    assert_close(m, hta_temporal({0: f}))
    r = m.ranks[0]
    assert r.activity.kernel_count > 100 and 0 < r.busy_pct <= 100
    assert r.steps is not None and r.steps.count >= 2
    assert {t.name for t in r.threads} & {"pt_main_thread", "pt_autograd_0"} or r.threads


def test_real_workload_variants_differ_as_expected() -> None:
    need = [TRACES / v / "sft_rank0.pt.trace.json.gz" for v in VARIANTS]
    if not all(p.exists() for p in need):
        pytest.skip("workload traces absent")
    m = {v: analyze_paths([p]).ranks[0] for v, p in zip(VARIANTS, need, strict=True)}
    # more data-loader workers: fewer idle GPU time
    assert m["workers4"].idle_pct < m["baseline"].idle_pct

    # activation offloading: far more host<->device bytes
    def hd(r):
        return sum(c.bytes for c in r.copies if c.direction in ("HtoD", "DtoH"))

    assert hd(m["offload"]) > 100 * hd(m["baseline"])
    # fp32: fp32 GEMMs appear
    assert m["fp32"].fp32_gemm_pct > m["baseline"].fp32_gemm_pct
