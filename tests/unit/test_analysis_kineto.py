"""Kineto (PyTorch-profiler) reader on hand-built traces and on the workload's real traces,
plus HTA equivalence of the temporal split (HolisticTraceAnalysis is a test-only dependency)."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import orjson
import pytest

from orchestrator.analysis import analyze_paths, compare, headline
from orchestrator.analysis.families import kernel_classes
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.readers import kineto
from orchestrator.analysis.timeline import step_names
from orchestrator.core.errors import UserError
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
    b.cpu("user_annotation", "enumerate(DataLoader)#_Iter.__next__", 50, 40)  # before the span
    b.cpu("user_annotation", "data", 230, 100)  # [230, 330): runs past the span's end (320)
    b.cpu("user_annotation", "enumerate(DataLoader)#_Iter.__next__", 235, 25)  # nested
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
    assert r.data_wait_ns == 90_000  # union [230, 330) clipped to the span's end at 320
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
    # one process; its main thread (tid == pid) runs the step, a second thread (autograd's
    # worker) runs backward ops
    assert len({t.pid for t in r.threads}) == 1
    mains = [t for t in r.threads if t.tid == t.pid]
    assert len(mains) == 1 and mains[0].cpu_op_ns > 0
    assert (r.main_thread, r.main_thread_rule) == (mains[0].name, "tid == pid")
    assert any(t.tid != t.pid and t.cpu_op_ns > 0 for t in r.threads)
    assert r.main_thread_wait_ns is None  # Kineto records no OS-runtime waits


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_data_wait_is_one_step_of_data_loading(variant: str) -> None:
    """The trace window holds steps 10 and 11; the GPU span starts with step 10's batch copy
    (at the end of its `data` range), so the data-wait ranges inside the span are step 11's
    `data` range, with `enumerate(DataLoader)...` nested in it counted once: the workload's own
    data time of step 11 (metrics.json), not the 2x of summing both names."""
    d = TRACES / variant
    if not (d / "metrics.json").exists():
        pytest.skip("workload traces absent")
    meta = json.loads((d / "metrics.json").read_text())
    first, stop = meta["config"]["profile_steps"]
    data_s = meta["data_times_s"]
    r = analyze_paths([d]).ranks[0]
    last = data_s[stop - 1]
    assert 0.98 * last - 1e-4 <= r.data_wait_ns / 1e9 <= data_s[first] + last
    assert r.data_wait_ns <= r.span_ns
    summed = sum(x.total_ns for x in r.nvtx if step_names.is_data_wait(x.name))
    assert summed > r.data_wait_ns


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_sync_wall_time_is_a_union_inside_the_span(variant: str) -> None:
    d = TRACES / variant
    if not d.exists():
        pytest.skip("workload traces absent")
    r = analyze_paths([d]).ranks[0]
    assert r.sync.calls > 0
    assert 0 < r.sync.wall_ns <= min(r.sync.total_ns, r.span_ns)


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


# ---- GEMM precision on real kernel names ------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "precision"),
    [
        # H100, torch 2.11 + cuBLAS 13 (tests/data/traces/*): fp32 GEMMs on CUDA-core FFMA ...
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma"
            "_aligna4_alignc4_execute_kernel__5x_cublas",
            "fp32",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>"
            "(cutlass_80_simt_sgemm_256x128_8x4_nt_align1::Params)",
            "fp32",
        ),
        # ... and bf16 GEMMs as cuBLASLt's Hopper nvjet kernels (wgmma)
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "tensor-core"),
        ("nvjet_sm90_tst_64x32_64x16_2x1_v_bz_splitK_NTT", "tensor-core"),
        ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN", "tensor-core"),
        ("nvjet_hsh_192x192_64x3_1x2_h_bz_coopB_NNN", "tensor-core"),
        # attention is not counted as GEMM, even with cutlass in its name
        (
            "fmha_cutlassB_f32_aligned_128x64_k128_sm80(PyTorchMemEffAttention::"
            "AttentionBackwardKernel<cutlass::arch::Sm80, float, true, false, false, 128, 64,"
            " 128, false>::Params)",
            None,
        ),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128", None),
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>", None),
        # other cuBLAS / cutlass families
        ("ampere_sgemm_128x64_tn", "fp32"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "tensor-core"),
        ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", "tensor-core"),
        ("ampere_tf32_s1688gemm_tf32_128x128_16x3_nn", "tensor-core"),
        ("volta_s884gemm_fp16_128x128_ldg8_f2f_nn", "tensor-core"),
        ("cutlass_80_simt_hgemm_128x128_8x2_nn_align1", None),  # SIMT half: neither
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None),
    ],
)
def test_gemm_precision_of_kernel_names(name: str, precision: str | None) -> None:
    assert kernel_classes.gemm_precision(name) == precision


@pytest.mark.parametrize(
    ("name", "precision"),
    [
        # PyTorch's memory-efficient attention in fp32 (what SDPA runs for fp32 inputs)
        (
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
            "float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
            "fp32",
        ),
        ("fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(PyTorchMemEffAttention::", "fp32"),
        # ... its 16-bit kernels, flash's and cuDNN's
        (
            "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
            "cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
            "low",
        ),
        (
            "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128,"
            " 128, 4, false, false, cutlass::half_t>, false, true, false>(Flash_fwd_params)",
            "low",
        ),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x64x64", "low"),
        # a name that tells no type is not claimed; GEMMs and the rest are not attention
        ("attention_fwd_kernel", None),
        ("ampere_sgemm_128x64_tn", None),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", None),
    ],
)
def test_attention_precision_of_kernel_names(name: str, precision: str | None) -> None:
    assert kernel_classes.attention_precision(name) == precision


def test_gemm_precision_shares_on_real_traces() -> None:
    """fp32 run: the FFMA and SIMT GEMMs are most of the kernel time; bf16 runs: the nvjet
    GEMMs are tensor-core time and nothing is fp32."""
    need = {v: TRACES / v / "sft_rank0.pt.trace.json.gz" for v in VARIANTS}
    if not all(p.exists() for p in need.values()):
        pytest.skip("workload traces absent")
    for variant, path in need.items():
        r = analyze_paths([path]).ranks[0]
        gemm_names = [
            k.name for k in r.top_kernels if "gemm" in k.name.lower() or "nvjet" in k.name
        ]
        assert gemm_names and all(kernel_classes.gemm_precision(n) for n in gemm_names), variant
        if variant == "fp32":
            top4 = sum(k.share_pct for k in r.top_kernels[:4])  # the four fp32 GEMMs
            assert r.fp32_gemm_pct == pytest.approx(top4) and r.fp32_gemm_pct > 80
            assert r.tensor_core_gemm_pct == 0
        else:
            assert r.fp32_gemm_pct == 0 and r.tensor_core_gemm_pct > 25, variant


# ---- activation offloading seen in the trace ---------------------------------------------------
def test_offloading_pattern_from_the_trace_alone(tmp_path: Path) -> None:
    src = {v: TRACES / v / "sft_rank0.pt.trace.json.gz" for v in ("offload", "baseline")}
    if not all(p.exists() for p in src.values()):
        pytest.skip("workload traces absent")
    got = {}
    for v, p in src.items():  # copied away from metrics.json: only the trace speaks
        (tmp_path / v).mkdir()
        dst = tmp_path / v / p.name
        dst.write_bytes(p.read_bytes())
        got[v] = analyze_paths([dst]).ranks[0]
    off = got["offload"]
    assert off.offloading is True
    assert off.offloading_evidence is not None and "forward" in off.offloading_evidence
    assert got["baseline"].offloading is None  # a few small copies: no evidence either way
    # beside its metrics.json the run's own config is the evidence
    r = analyze_paths([src["offload"]]).ranks[0]
    assert r.offloading is True and r.offloading_evidence is not None
    assert r.offloading_evidence.startswith("metrics.json: config.offload_activations")
    assert analyze_paths([src["baseline"]]).ranks[0].offloading is False


def test_offloading_pattern_needs_both_directions(tmp_path: Path) -> None:
    def trace(*copies: tuple[str, float]) -> KinetoBuilder:
        b = KinetoBuilder(rank=0)
        b.cpu("user_annotation", "forward", 0, 100)
        b.cpu("user_annotation", "backward", 100, 100)
        b.gpu("kernel", "k", 40, 50)
        for name, launch in copies:  # async copies: they run after their launch
            b.gpu("gpu_memcpy", name, launch + 300, 10, launch_ts=launch, bytes=8 << 20)
        return b

    dtoh, htod = "Memcpy DtoH (Device -> Pinned)", "Memcpy HtoD (Pinned -> Device)"
    both = trace((dtoh, 10), (htod, 150)).write(tmp_path / "both.json")
    assert analyze_paths([both]).ranks[0].offloading is True
    # only DtoH in forward (say, logging activations): no evidence of offloading
    one = trace((dtoh, 10), (dtoh, 20)).write(tmp_path / "one.json")
    assert analyze_paths([one]).ranks[0].offloading is None
    # the reverse (inputs in during forward, results out during backward): not the pattern
    rev = trace((htod, 10), (dtoh, 150)).write(tmp_path / "rev.json")
    assert analyze_paths([rev]).ranks[0].offloading is None


# ---- parsers: the layout scan and the generic path agree -------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_layout_scan_equals_generic_parser(variant: str) -> None:
    f = TRACES / variant / "sft_rank0.pt.trace.json.gz"
    if not f.exists():
        pytest.skip(f"{f} absent")
    raw = gzip.decompress(f.read_bytes())
    fast = kineto.scan(raw)
    assert fast is not None and fast.parser == "kineto layout scan"
    slow = kineto.from_json(orjson.loads(raw))
    assert fast.columns() == slow.columns()
    assert fast.thread_names == slow.thread_names and fast.peak == slow.peak
    assert fast.meta == slow.meta
    assert (fast.cat == kineto.KERNEL).sum() > 100


def test_scan_refuses_what_it_cannot_read_exactly(tmp_path: Path) -> None:
    f = TRACES / "baseline" / "sft_rank0.pt.trace.json.gz"
    if not f.exists():
        pytest.skip(f"{f} absent")
    raw = gzip.decompress(f.read_bytes())
    # a stream on a CPU op: HTA counts it as a GPU event, so the scan must not skip it
    cpu = raw.index(b'"cat": "cpu_op"')
    args = raw.index(b'"args": {\n', cpu) + len(b'"args": {\n')
    odd = raw[:args] + b'      "stream": 99,' + raw[args:]
    assert kineto.scan(odd) is None
    # an escaped quote in a name: not the simple layout
    odd2 = raw.replace(b'"name": "aten::zero_"', b'"name": "aten::zero_\\"x"', 1)
    assert kineto.scan(odd2) is None
    p = tmp_path / "odd.json"
    p.write_bytes(odd2)
    assert kineto.load_trace(p).parser == "orjson (generic)"
    assert any(n == 'aten::zero_"x' for n in kineto.load_trace(p).names)
    # json.dumps output (the test builder) takes the generic path
    q = small_trace().write(tmp_path / "b.json")
    assert kineto.load_trace(q).parser == "orjson (generic)"


def test_step_ranges_fold_into_one_row(tmp_path: Path) -> None:
    assert step_names.step_pattern("step_12") == "step_*"
    assert step_names.step_pattern("ProfilerStep#3 [gpu]") == "ProfilerStep#* [gpu]"
    assert step_names.step_pattern("Training Step 7") == "Training Step *"
    assert (
        step_names.step_pattern("train_step") is None and step_names.step_pattern("forward") is None
    )
    b = small_trace()
    for i in range(3, 8):
        b.cpu("user_annotation", f"step_{i}", 1000 + 100 * i, 10 + i)
    r = analyze_paths([b.write(tmp_path / "t.json")]).ranks[0]
    rows = {x.name: x for x in r.nvtx}
    assert not any(n.startswith("step_") and n != "step_*" for n in rows)
    assert (rows["step_*"].count, rows["step_*"].min_ns, rows["step_*"].max_ns) == (
        7,
        13000,
        150000,
    )
    assert r.steps is not None and r.steps.count == 7 and len(r.steps.durations_ns) == 7


# ---- the workload's metrics.json beside the trace --------------------------------------------
def test_workload_metrics_fold_per_rank(tmp_path: Path) -> None:
    small_trace().write(tmp_path / "rank5.json")  # distributedInfo.rank 5
    (tmp_path / "metrics.json").write_text(json.dumps({"rank": 0, "peak_gpu_memory_bytes": 7}))
    r = analyze_paths([tmp_path / "rank5.json"]).ranks[0]
    assert r.workload is None and r.peak_gpu_memory_bytes == 3000  # other rank's file ignored
    assert r.peak_gpu_memory_source is not None and "[memory]" in r.peak_gpu_memory_source
    (tmp_path / "metrics_rank5.json").write_text(
        json.dumps(
            {
                "peak_gpu_memory_bytes": 5 << 30,
                "median_step_time_s": 0.25,
                "step_times_s": [0.3, 0.25, 0.2],
                "tokens_per_s": 1000.0,
                "steps": 3,
            }
        )
    )
    m = analyze_paths([tmp_path / "rank5.json"])
    r = m.ranks[0]
    assert r.peak_gpu_memory_bytes == 5 << 30
    assert r.peak_gpu_memory_source is not None
    assert r.peak_gpu_memory_source.startswith("metrics_rank5.json")
    assert r.workload is not None and r.workload.step_times_s == [0.3, 0.25, 0.2]
    assert m.aggregate.workload_step_median_s == 0.25 and m.aggregate.tokens_per_s == 1000.0
    h = headline(m)
    assert h["step_time_median_s"] == 0.25 and h["peak_gpu_memory_bytes"] == float(5 << 30)
    (tmp_path / "metrics_rank5.json").write_text("{broken")
    with pytest.raises(UserError, match=r"metrics_rank5\.json"):
        analyze_paths([tmp_path / "rank5.json"])


def test_with_vs_without_offloading_on_real_traces() -> None:
    """The seed's table: GPU memory, kernel continuity, CPU activity, sync overhead."""
    base_dir, off_dir = TRACES / "baseline", TRACES / "offload"
    if not (base_dir / "metrics.json").exists() or not (off_dir / "metrics.json").exists():
        pytest.skip("workload traces absent")
    base, off = analyze_paths([base_dir]), analyze_paths([off_dir])
    c = compare([base, off], labels=["baseline", "offload"])
    row = {r.metric: r.values for r in c.rows}
    b_mem, o_mem = row["peak GPU memory"]
    assert b_mem is not None and o_mem is not None
    assert 16.5 < b_mem < 17.5 and 9.0 < o_mem < 9.8  # GiB, from metrics.json: 17.0 -> 9.4
    assert "metrics.json" in (off.ranks[0].peak_gpu_memory_source or "")
    b_cp, o_cp = row["memcpy share of GPU activity"]
    assert b_cp is not None and o_cp is not None and o_cp > 20 * b_cp and o_cp > 50
    hb, ho = headline(base), headline(off)
    assert ho["memcpy_share_pct"] == o_cp and ho["peak_gpu_memory_bytes"] == 10_100_996_608
    # kernel continuity: more gaps and longer ones
    b_gaps, o_gaps = row["idle gaps"]
    assert b_gaps is not None and o_gaps is not None and o_gaps > b_gaps
    b_p90, o_p90 = row["gap p90"]
    assert b_p90 is not None and o_p90 is not None and o_p90 > 5 * b_p90
    # CPU activity and sync overhead grow; throughput drops
    for metric in ("CPU operator time", "sync API time", "step time median (workload)"):
        b_v, o_v = row[metric]
        assert b_v is not None and o_v is not None and o_v > b_v, metric
    assert (ho["tokens_per_s"] or 0) < (hb["tokens_per_s"] or 0)
