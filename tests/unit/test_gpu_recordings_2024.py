"""The GPU recordings made under Nsight Systems 2024.2.3 on two H200s (issues 24 item 6, 28 item
5, 29 item 4): tests/data/unannotated/, ddp_nsys2024/, gpu_metrics/ (READMEs there say how).

These pin what the recordings hold, by plain SQL on the exports and by the workloads' own truth
files, so that the analysis built on them later starts from facts: the planted data-loading wait
is in the GPU timeline where the workload says it is, the DDP reports keep their kernels, the
GPU-metric samples are in the capture window, per GPU, from one sampler. gh-run's own readings
are asserted only where the present analysis already answers (ranks, kernels, steps).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import analyze_paths
from tests.fixtures.recordings import export, unpacked

DATA = Path(__file__).resolve().parents[1] / "data"
UNANNOTATED = DATA / "unannotated"
DDP = DATA / "ddp_nsys2024"
METRICS = DATA / "gpu_metrics"
VARIANTS = ("sft_w0", "sft_w4", "convnet_w0", "convnet_w4")
# the workload's own range names (workloads/profiling.py): none may be in an unannotated trace
OWN_RANGES = {"data", "forward", "backward", "optimizer", "host_snapshot"}


def sql(path: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn, conn:
        return conn.execute(query, args).fetchall()


def truth(folder: Path, rank: int = 0) -> dict[str, Any]:
    name = "metrics.json" if rank == 0 else f"metrics_rank{rank}.json"
    data: dict[str, Any] = json.loads((folder / name).read_text())
    return data


def window(m: dict[str, Any]) -> tuple[int, int]:
    w = m.get("cuda_profiler_window") or m["config"]["cuda_profiler_window"]
    return int(w[0]), int(w[1])


def gpu_gaps_ns(db: Path) -> list[int]:
    """Idle time between consecutive GPU activities (kernels, copies, memsets), as SQL gives
    them: the reference for whatever finds the waits later."""
    rows = sorted(
        r
        for t in ("KERNEL", "MEMCPY", "MEMSET")
        for r in sql(db, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")
    )
    gaps, end = [], rows[0][1]
    for s, e in rows[1:]:
        if s > end:
            gaps.append(s - end)
        end = max(end, e)
    return gaps


# --- unannotated workloads (issue 28) ----------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_unannotated_nsys_exports_hold_no_range_of_the_workloads_own(variant: str) -> None:
    db = export(UNANNOTATED / "nsys" / variant / f"{variant}.sqlite.xz")
    version = sql(db, "SELECT value FROM META_DATA_EXPORT WHERE name = ?", "EXPORT_PRODUCT_VERSION")
    assert version == [("2024.2.3.38",)]
    texts = {
        str(t)
        for (t,) in sql(
            db,
            "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n"
            " LEFT JOIN StringIds s ON s.id = n.textId",
        )
        if t is not None
    }
    assert not texts & OWN_RANGES and not any(t.startswith("step_") for t in texts)
    # what is there is the libraries' and nsys's own: CUB's ranges (CCCL:cub::...), the names
    # of the domains and of the category that Python sampling's marks use
    nsys_own = {"Python Backtrace", "Python Thread", "cuBLAS", "CCCL"}
    assert texts <= nsys_own | {t for t in texts if "::" in t}
    # kernels, runtime calls and the call stacks of CPU samples were kept
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"):
        assert sql(db, f"SELECT count(*) FROM {table}")[0][0] > 0
    assert sql(db, "SELECT count(*) FROM SAMPLING_CALLCHAINS")[0][0] > 0


@pytest.mark.parametrize("variant", ["sft_w0", "convnet_w0"])
def test_at_workers_0_the_gpu_waits_for_each_batch_as_the_workload_measured(variant: str) -> None:
    """The steps inside the kernel span each begin with one GPU-idle gap as long as the loop
    waited for its batch (the first step's wait lies before the first kernel)."""
    folder = UNANNOTATED / "nsys" / variant
    m = truth(folder)
    start, end = window(m)
    waits = sorted(m["data_times_s"][start + 1 : end])
    gaps = sorted(gpu_gaps_ns(export(folder / f"{variant}.sqlite.xz")), reverse=True)
    big = sorted(g / 1e9 for g in gaps[: len(waits)])
    assert big == pytest.approx(waits, abs=0.0015)
    assert gaps[len(waits)] < 0.05 * min(waits) * 1e9  # and no other wait of that size
    planted = m["planted_data_ms_per_step"] / 1e3
    assert min(waits) >= planted  # the planted cost is a floor of what the loop waited


@pytest.mark.parametrize("variant", ["sft_w4", "convnet_w4"])
def test_at_workers_4_no_gpu_gap_comes_near_the_planted_cost(variant: str) -> None:
    folder = UNANNOTATED / "nsys" / variant
    m = truth(folder)
    start, end = window(m)
    planted_ns = m["planted_data_ms_per_step"] * 1e6
    assert max(gpu_gaps_ns(export(folder / f"{variant}.sqlite.xz"))) < 0.05 * planted_ns
    assert max(m["data_times_s"][start:end]) * 1e9 < 0.05 * planted_ns


@pytest.mark.parametrize("variant", VARIANTS)
def test_unannotated_kineto_traces_mark_only_torchs_steps_and_loader(variant: str) -> None:
    folder = UNANNOTATED / "kineto" / variant
    m = truth(folder)
    start, end = m.get("profile_steps") or m["config"]["profile_steps"]
    with gzip.open(folder / m["trace_file"], "rt") as fh:
        events = json.load(fh)["traceEvents"]
    marks = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert {f"ProfilerStep#{i}" for i in range(start, end)} == {
        n for n in marks if n.startswith("ProfilerStep#")
    }
    assert not marks & OWN_RANGES and not any(n.startswith("step_") for n in marks)
    assert any(n.startswith("enumerate(DataLoader)") for n in marks)
    assert sum(e.get("cat") == "kernel" for e in events) > 1000
    # the truth file says how long each traced step took and waited
    assert len(m["step_times_s"]) == m["steps"] and m["annotated"] is False


def test_unannotated_kineto_steps_are_the_workloads_own() -> None:
    """gh-run already finds the steps of a Kineto trace (ProfilerStep#); their mean is the
    workload's wall time per step in the window."""
    for variant in VARIANTS:
        folder = UNANNOTATED / "kineto" / variant
        m = truth(folder)
        start, end = m.get("profile_steps") or m["config"]["profile_steps"]
        (r,) = analyze_paths([folder]).ranks
        assert r.steps is not None and r.steps.count == end - start
        wall = sum(m["step_times_s"][start:end]) / (end - start)
        assert r.steps.mean_ns / 1e9 == pytest.approx(wall, rel=0.05)


# --- DDP under nsys 2024.2 (issue 24 item 6) ---------------------------------------------------


def test_ddp_reports_under_nsys_2024_2_keep_their_kernels() -> None:
    """Under 2023.4 these per-rank reports lost every kernel (tests/data/ddp_h200): 2024.2.3
    keeps them, NCCL's included, and the ranks read as two."""
    for rank in (0, 1):
        db = export(DDP / f"ddp.rank{rank}.sqlite.xz")
        env = sql(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'")
        assert f"RANK={rank}" in env[0][0].split(";")
        names = sql(
            db,
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.shortName GROUP BY 1",
        )
        assert sum(n for _, n in names) > 2000
        assert any(str(name).startswith("ncclDevKernel_AllReduce") for name, _ in names)
    metrics = analyze_paths([unpacked(DDP)])
    assert [r.rank for r in metrics.ranks] == [0, 1]
    for r in metrics.ranks:
        assert r.activity.kernel_count > 2000
        assert r.steps is not None and r.steps.count == 2  # the annotated window 6:8


# --- GPU metrics (issue 29) --------------------------------------------------------------------


def metric_means(db: Path) -> dict[int, dict[str, float]]:
    """Per GPU (typeId - sourceId: the PerfWorks GPU id), each metric's mean over the samples."""
    rows = sql(
        db,
        "SELECT g.typeId - m.sourceId, m.metricName, avg(g.value) FROM GPU_METRICS g"
        " JOIN TARGET_INFO_GPU_METRICS m USING (typeId, metricId) GROUP BY 1, 2",
    )
    out: dict[int, dict[str, float]] = {}
    for gpu, name, mean in rows:
        out.setdefault(int(gpu), {})[str(name)] = float(mean)
    return out


@pytest.mark.parametrize("variant", ["bf16", "fp32"])
def test_gpu_metrics_are_cut_to_the_capture_window_for_every_gpu(variant: str) -> None:
    db = export(METRICS / variant / f"metrics_{variant}.sqlite.xz")
    (duration,) = sql(db, "SELECT duration FROM ANALYSIS_DETAILS")[0]
    per_gpu = sql(
        db,
        "SELECT typeId, count(DISTINCT timestamp), min(timestamp), max(timestamp)"
        " FROM GPU_METRICS GROUP BY typeId",
    )
    assert len(per_gpu) == 2  # --gpu-metrics-device=all: both GPUs of the machine
    for _, samples, first, last in per_gpu:
        assert first >= 0 and last <= duration
        assert samples == pytest.approx(duration / 1e5, rel=0.02)  # the default 10 kHz
    names = {n for (n,) in sql(db, "SELECT DISTINCT metricName FROM TARGET_INFO_GPU_METRICS")}
    assert {"SMs Active [Throughput %]", "Tensor Active [Throughput %]"} <= names
    assert {"DRAM Read Bandwidth [Throughput %]", "PCIe RX Throughput [Throughput %]"} <= names


def test_bf16_keeps_the_tensor_cores_busy_and_fp32_does_not() -> None:
    bf16 = metric_means(export(METRICS / "bf16" / "metrics_bf16.sqlite.xz"))
    fp32 = metric_means(export(METRICS / "fp32" / "metrics_fp32.sqlite.xz"))
    tensor, sm = "Tensor Active [Throughput %]", "SMs Active [Throughput %]"
    # GPU 0 ran the workload (CUDA_VISIBLE_DEVICES=0); GPU 1 idled beside it
    assert bf16[0][tensor] > 5 * fp32[0][tensor] and bf16[0][tensor] > 15
    assert bf16[0][sm] > 50 and fp32[0][sm] > 50
    assert bf16[1][sm] == fp32[1][sm] == 0


def test_ddp_gpu_metrics_come_from_one_sampler_for_both_gpus() -> None:
    rank0 = export(METRICS / "ddp" / "metrics_ddp.rank0.sqlite.xz")
    rank1 = export(METRICS / "ddp" / "metrics_ddp.rank1.sqlite.xz")
    means = metric_means(rank0)
    assert sorted(means) == [0, 1]
    assert all(m["SMs Active [Throughput %]"] > 30 for m in means.values())
    # NVLink carries the all-reduce between the two GPUs
    assert all(m["NVLink TX Requests User Data [Throughput %]"] > 0 for m in means.values())
    tables = {t for (t,) in sql(rank1, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "GPU_METRICS" not in tables  # rank 1's nsys did not sample


# --- scrubbed ----------------------------------------------------------------------------------


# the recordings made here (scrubbed by bench/scrub_nsys_export.py); tests/data/nsys2026 holds
# another project's published exports, kept byte for byte as published
OURS = [p for p in DATA.glob("*/**/*.sqlite.xz") if p.parent.name != "nsys2026"]


def _machine_path(col: str) -> str:
    """SQL true where the column holds text naming a machine's folder."""
    return (
        f"(typeof(\"{col}\") = 'text' AND (\"{col}\" LIKE '%/work/%' OR \"{col}\" LIKE '%/tmp/%'"
        f" OR \"{col}\" LIKE '%/root/%' OR \"{col}\" LIKE '%/home/%'))"
    )


@pytest.mark.parametrize("xz", sorted(OURS, key=str), ids=lambda p: p.name)
def test_recordings_name_no_machine_path_or_host(xz: Path) -> None:
    db = export(xz)
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cols = [c[1] for c in conn.execute(f'PRAGMA table_info("{table}")')]
            # one scan of the table for all its columns (a scan per column was most of this
            # test's time); a hit is then named by its column
            for part in (cols[i : i + 40] for i in range(0, len(cols), 40)):
                where = " OR ".join(map(_machine_path, part))
                if conn.execute(f'SELECT 1 FROM "{table}" WHERE {where} LIMIT 1').fetchone():
                    for col in part:
                        hit = conn.execute(
                            f'SELECT "{col}" FROM "{table}" WHERE {_machine_path(col)} LIMIT 1'
                        ).fetchone()
                        assert not hit, f"{xz.name}: {table}.{col}: {hit[0][:80]}"
                    pytest.fail(f"{xz.name}: {table}: a machine's path in {part}")
    host = sql(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
    assert host == [("<host>",)]
