"""nsys SQLite reader: hand-built exports with metrics known by construction, and the real
exports in tests/data/nsys/ checked against independent SQL. Every test runs twice: with the big
tables read from the file's pages (`sqlite_pages`, where it is built) and through SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.families import gaps
from orchestrator.analysis.metrics import RankMetrics
from orchestrator.analysis.readers import sqlite_pages
from orchestrator.analysis.timeline import intervals, ranks, step_names
from orchestrator.core.errors import UserError
from tests.fixtures.nsys_builder import NVTX_MARK, NVTX_STARTEND, NsysBuilder

REAL = Path(__file__).resolve().parents[1] / "data/nsys"  # copies of ../shared/data/nsys
MAIN, BWD = 100, 101

# (start, end, name, stream) kernels and (start, end, copyKind, bytes, cause) copies
KERNELS = [
    (1000, 5000, "ampere_sgemm_128x64_tn", 7),
    (3000, 8000, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn", 13),  # overlaps on stream 13
    (10500, 12000, "void at::native::elementwise_kernel<float>", 7),
    (40000, 42000, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 7),
    (42000, 44000, "ampere_sgemm_128x64_tn", 7),  # touches the previous one
]
COPIES = [
    (10000, 11000, 1, 1_000_000, None),  # HtoD overlapping a kernel
    (20000, 20500, 2, 500_000, None),  # DtoH
    (30000, 30200, 8, 2000, None),  # DtoD
    (30200, 30400, 10, 4000, None),  # PtoP
    (30400, 31400, 11, 65536, 2),  # UM HtoD, page-fault migration
    (31400, 31900, 12, 4096, 2),  # UM DtoH
    (31900, 32100, 13, 8192, 2),  # UM DtoD (device-to-device migration)
]
MEMSETS = [(20500, 21000, 1024)]


@pytest.fixture(autouse=True, params=["pages", "sqlite"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reader reads the big tables: the compiled page reader or SQLite's path."""
    if request.param == "sqlite":
        monkeypatch.setattr(sqlite_pages, "_LIB", None)
    elif not sqlite_pages.available():
        pytest.skip("the compiled page reader is not built here (no C compiler at install)")
    return str(request.param)


def build(path: Path, *, with_um: bool = True) -> Path:
    b = NsysBuilder(path, with_um_tables=with_um)
    b.add_gpu(0)
    b.add_thread(MAIN, "pt_main_thread")
    b.add_thread(BWD, "pt_autograd_0")
    for s, e, name, stream in KERNELS:
        b.add_kernel(s, e, name, stream=stream)
    for s, e, kind, nbytes, cause in COPIES:
        b.add_memcpy(s, e, kind, nbytes, migration_cause=cause)
    for s, e, nbytes in MEMSETS:
        b.add_memset(s, e, nbytes)
    b.add_nvtx(0, 20000, "step_1", tid=MAIN)
    b.add_nvtx(20000, 45000, "step_2", tid=MAIN)
    b.add_nvtx(1000, 9000, "forward", tid=MAIN)  # nested in step_1
    b.add_nvtx(21000, 30000, "forward", tid=MAIN)
    b.add_nvtx(9000, 19000, "backward", tid=BWD, registered=True)  # name via StringIds
    # data waits: `data` with a nested range, and one range that runs past the span's end
    b.add_nvtx(32000, 40000, "data", tid=MAIN)
    b.add_nvtx(33000, 38000, "dataloader_next", tid=MAIN, event_type=NVTX_STARTEND)
    b.add_nvtx(43000, 50000, "dataloader_next", tid=MAIN, event_type=NVTX_STARTEND)
    b.add_nvtx(500, None, "marker", tid=MAIN, event_type=NVTX_MARK)
    b.add_osrt(0, 30000, "pthread_cond_wait", tid=MAIN)
    b.add_osrt(30000, 35000, "pthread_cond_wait", tid=MAIN)
    b.add_osrt(35000, 36000, "poll", tid=MAIN)
    b.add_osrt(5000, 7000, "pthread_cond_wait", tid=BWD)
    b.add_runtime(12000, 20000, "cudaDeviceSynchronize_v3020", tid=MAIN)
    b.add_runtime(900, 950, "cudaLaunchKernel_v7000", tid=MAIN)
    for t, nbytes, free in (
        (0, 1000, False),
        (10, 500, False),
        (20, 1000, True),
        (30, 2000, False),
    ):
        b.add_gpu_memory(t, nbytes, free=free)
    if with_um:
        for t in (100, 200, 300):
            b.add_cpu_page_fault(t)
        b.add_gpu_page_fault(30300, 30400, 4)
        b.add_gpu_page_fault(31300, 31400, 6)
    return b.close()


def brute_union(intervals: list[tuple[int, int]]) -> set[int]:
    """Independent oracle: the set of covered nanoseconds."""
    covered: set[int] = set()
    for s, e in intervals:
        covered.update(range(s, e))
    return covered


@pytest.fixture()
def export(tmp_path: Path) -> Path:
    return build(tmp_path / "sft.3.sqlite")


def only(path: Path) -> RankMetrics:
    m = analyze_paths([path])
    assert len(m.ranks) == 1
    return m.ranks[0]


def test_busy_idle_and_gaps_match_brute_force(export: Path) -> None:
    r = only(export)
    ivs = [(s, e) for s, e, *_ in KERNELS] + [(s, e) for s, e, *_ in COPIES]
    ivs += [(s, e) for s, e, _ in MEMSETS]
    covered = brute_union(ivs)
    start, end = min(s for s, _ in ivs), max(e for _, e in ivs)
    assert (r.span_start_ns, r.span_end_ns, r.span_ns) == (start, end, end - start)
    assert r.busy_ns == len(covered)
    assert r.idle_ns == end - start - len(covered)
    # gaps: maximal runs of uncovered ns inside the span
    gaps, run = [], 0
    for t in range(start, end):
        if t in covered:
            if run:
                gaps.append(run)
            run = 0
        else:
            run += 1
    assert r.idle_gaps.count == len(gaps) == 4
    assert r.idle_gaps.total_ns == sum(gaps)
    assert r.idle_gaps.max_ns == max(gaps)
    g = sorted(gaps)
    assert r.idle_gaps.p50_ns == pytest.approx((g[1] + g[2]) / 2)
    assert r.idle_gaps.p90_ns == pytest.approx(g[2] + 0.7 * (g[3] - g[2]))
    assert sum(b.count for b in r.idle_gaps.buckets) == 4
    assert r.busy_pct + r.idle_pct == pytest.approx(100)


def test_temporal_follows_hta_definitions(export: Path) -> None:
    r = only(export)
    compute = brute_union([(s, e) for s, e, name, _ in KERNELS if not name.startswith("nccl")])
    every = brute_union([(s, e) for s, e, *_ in KERNELS + COPIES] + [(s, e) for s, e, _ in MEMSETS])
    t = r.temporal
    assert t.span_ns == r.span_ns
    assert t.compute_ns == len(compute)
    assert t.non_compute_ns == len(every) - len(compute)
    assert t.idle_ns == r.idle_ns
    assert t.idle_pct + t.compute_pct + t.non_compute_pct == pytest.approx(100)


def test_activity_copies_and_unified_memory(export: Path) -> None:
    r = only(export)
    kt = sum(e - s for s, e, *_ in KERNELS)
    ct = sum(e - s for s, e, *_ in COPIES)
    mt = sum(e - s for s, e, _ in MEMSETS)
    a = r.activity
    assert (a.kernel_count, a.memcpy_count, a.memset_count) == (5, 7, 1)
    assert (a.kernel_ns, a.memcpy_ns, a.memset_ns) == (kt, ct, mt)
    assert a.kernel_pct == pytest.approx(100 * kt / (kt + ct + mt))
    by = {c.direction: c for c in r.copies}
    assert set(by) == {"HtoD", "DtoH", "DtoD", "PtoP", "UM HtoD", "UM DtoH", "UM DtoD"}
    assert (by["UM DtoD"].count, by["UM DtoD"].bytes, by["UM DtoD"].total_ns) == (1, 8192, 200)
    assert by["HtoD"].bytes == 1_000_000 and by["HtoD"].count == 1
    assert by["HtoD"].bandwidth_gb_s == pytest.approx(1_000_000 / 1000)
    um = r.unified_memory
    assert um.cpu_page_faults == 3
    assert um.gpu_page_faults == 10 and um.gpu_fault_groups == 2
    assert (um.migrated_htod_bytes, um.migrated_dtoh_bytes, um.migrated_dtod_bytes) == (
        65536,
        4096,
        8192,
    )
    assert um.migrations == 3  # copyKind 11, 12 and 13
    assert um.migration_ns == 1000 + 500 + 200
    assert um.share_of_memory_ops_pct == pytest.approx(100 * 3 / 8)
    assert um.share_of_memory_time_pct == pytest.approx(100 * 1700 / (ct + mt))
    assert r.peak_gpu_memory_bytes == 2500
    assert r.peak_pinned_memory_bytes is None and r.peak_managed_memory_bytes is None
    # the three UM copies are page-fault (coherence) migrations
    assert [(c.direction, c.cause, c.count, c.bytes, c.total_ns) for c in um.by_cause] == [
        ("UM HtoD", "page fault", 1, 65536, 1000),
        ("UM DtoH", "page fault", 1, 4096, 500),
        ("UM DtoD", "page fault", 1, 8192, 200),
    ]
    assert um.gpu_faults_by_access == {"read": 10}


# ---- memory kinds and Unified-Memory causes ----------------------------------------------------
def _kinds_export(path: Path, *, in_window: bool) -> Path:
    """Device, device-static, pinned and managed allocations (memKind 2, 5, 1, 4), all alive at
    capture start (start 0) unless `in_window`, where device memory is allocated and freed
    inside the window too."""
    b = NsysBuilder(path)
    b.add_kernel(1000, 2000, "k")
    b.add_gpu_memory(0, 10_000, kind=2)
    b.add_gpu_memory(0, 7, kind=5)
    b.add_gpu_memory(0, 1_000_000, kind=1)  # pinned host buffers (offloaded activations)
    b.add_gpu_memory(0, 5_000_000, kind=4)  # a managed pool (RMM)
    b.add_gpu_memory(0, 99, kind=0)  # pageable: no class of its own, counted nowhere
    if in_window:
        b.add_gpu_memory(1500, 3_000, kind=2)
        b.add_gpu_memory(1600, 3_000, kind=2, free=True)
        b.add_gpu_memory(1700, 1_000_000, kind=1, free=True)
        b.add_gpu_memory(1800, 400, kind=2)
    return b.close()


def test_peak_gpu_memory_is_device_memory_with_pinned_and_managed_apart(tmp_path: Path) -> None:
    held = only(_kinds_export(tmp_path / "a.sqlite", in_window=False))
    assert held.peak_gpu_memory_bytes == 10_007  # device + device static
    assert held.peak_pinned_memory_bytes == 1_000_000
    assert held.peak_managed_memory_bytes == 5_000_000
    src = held.peak_gpu_memory_source or ""
    assert "device memory" in src and src.endswith("held at capture start")
    assert any("managed (Unified) memory peaked at" in n for n in held.notes)
    moved = only(_kinds_export(tmp_path / "b.sqlite", in_window=True))
    # 10,007 at start, +3,000 (13,007), -3,000, +400: the running sum peaks inside the window
    assert moved.peak_gpu_memory_bytes == 13_007
    assert moved.peak_pinned_memory_bytes == 1_000_000  # freed later: the peak stays
    assert (moved.peak_gpu_memory_source or "").endswith("peak in the window")
    m = analyze_paths([tmp_path / "a.sqlite"])
    assert m.aggregate.peak_pinned_memory_bytes == 1_000_000
    assert m.aggregate.peak_managed_memory_bytes == 5_000_000


def test_peak_memory_without_a_memkind_column_sums_every_kind(tmp_path: Path) -> None:
    path = _kinds_export(tmp_path / "old.sqlite", in_window=False)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE CUDA_GPU_MEMORY_USAGE_EVENTS DROP COLUMN memKind")
    db.commit()
    db.close()
    r = only(path)
    assert r.peak_gpu_memory_bytes == 10_000 + 7 + 1_000_000 + 5_000_000 + 99
    assert "every memKind" in (r.peak_gpu_memory_source or "")
    assert r.peak_pinned_memory_bytes is None and r.peak_managed_memory_bytes is None


def test_um_migrations_by_cause_and_faults_by_access_per_process(tmp_path: Path) -> None:
    """Two processes in one report (two ranks): each reads its own migrations, faults and
    memory; the CPU fault table has no end column and is counted per process."""
    b = NsysBuilder(tmp_path / "node.sqlite", pid=500)
    for pid, dev in ((500, 0), (600, 1)):
        b.add_cuda_stream(7, pid=pid)
        b.add_kernel(0, 100, "k", device=dev, pid=pid)
        b.add_gpu_memory(0, 1000 * (dev + 1), device=dev, pid=pid)
        b.add_gpu_memory(0, 77, device=dev, kind=4, pid=pid)
    # process 500: fault-driven and speculative-prefetch migrations; 600: eviction only
    b.add_memcpy(200, 300, 11, 4096, migration_cause=2, device=0, pid=500)
    b.add_memcpy(300, 400, 11, 61440, migration_cause=3, device=0, pid=500)
    b.add_memcpy(400, 450, 11, 4096, migration_cause=3, device=0, pid=500)
    b.add_memcpy(200, 900, 12, 2 << 20, migration_cause=4, device=1, pid=600)
    b.add_memcpy(900, 950, 1, 512, device=1, pid=600)  # an ordinary copy: no cause
    b.add_gpu_page_fault(150, 160, 3, device=0, access=2, pid=500)
    b.add_gpu_page_fault(160, 170, 2, device=0, access=1, pid=500)
    b.add_gpu_page_fault(150, 160, 5, device=1, access=1, pid=600)
    b.add_cpu_page_fault(50)  # the builder's process, 500
    m = analyze_paths([b.close()])
    r0, r1 = m.ranks
    assert (r0.pid, r1.pid) == (500, 600)
    c0 = [(c.direction, c.cause, c.count, c.bytes, c.total_ns) for c in r0.unified_memory.by_cause]
    assert c0 == [
        ("UM HtoD", "page fault", 1, 4096, 100),
        ("UM HtoD", "speculative prefetch", 2, 65536, 150),
    ]
    c1 = [(c.direction, c.cause, c.count, c.bytes) for c in r1.unified_memory.by_cause]
    assert c1 == [("UM DtoH", "eviction", 1, 2 << 20)]
    assert r0.unified_memory.gpu_faults_by_access == {"write": 3, "read": 2}
    assert r1.unified_memory.gpu_faults_by_access == {"read": 5}
    assert (r0.unified_memory.cpu_page_faults, r1.unified_memory.cpu_page_faults) == (1, 0)
    assert (r0.peak_gpu_memory_bytes, r1.peak_gpu_memory_bytes) == (1000, 2000)
    assert r0.peak_managed_memory_bytes == r1.peak_managed_memory_bytes == 77


def test_kernels_nvtx_steps_threads_sync(export: Path) -> None:
    r = only(export)
    top = {k.name: k for k in r.top_kernels}
    sgemm = top["ampere_sgemm_128x64_tn"]
    assert (sgemm.count, sgemm.total_ns) == (2, 6000)
    assert sgemm.compute and not top["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"].compute
    assert r.top_kernels[0].name == "ampere_sgemm_128x64_tn"  # largest total first
    kt = sum(e - s for s, e, *_ in KERNELS)
    assert r.fp32_gemm_pct == pytest.approx(100 * 6000 / kt)
    assert r.tensor_core_gemm_pct == pytest.approx(100 * 5000 / kt)
    ranges = {x.name: x for x in r.nvtx}
    assert set(ranges) == {"step_*", "forward", "backward", "data", "dataloader_next"}
    step_row = ranges["step_*"]  # step_1 and step_2 folded into one row
    assert (step_row.count, step_row.total_ns, step_row.min_ns, step_row.max_ns) == (
        2,
        45000,
        20000,
        25000,
    )
    assert (ranges["forward"].count, ranges["forward"].total_ns) == (2, 17000)
    assert ranges["backward"].total_ns == 10000  # registered string resolved
    assert r.steps is not None and r.steps.family == "step_N"
    assert r.steps.durations_ns == [20000, 25000]
    assert r.steps.mean_ns == 22500
    # union of [32000, 40000) (with [33000, 38000) inside) and [43000, 50000) cut at 44000
    assert r.data_wait_ns == 8000 + 1000
    threads = {t.name: t for t in r.threads}
    assert threads["pt_main_thread"].osrt_ns == 36000
    assert threads["pt_main_thread"].functions[0].name == "pthread_cond_wait"
    assert threads["pt_main_thread"].functions[0].total_ns == 35000
    assert threads["pt_autograd_0"].osrt_ns == 2000
    assert threads["pt_main_thread"].tid == MAIN
    assert threads["pt_main_thread"].main and not threads["pt_autograd_0"].main
    assert r.sync.calls == 1 and r.sync.total_ns == 8000 == r.sync.wall_ns


def test_sync_wall_time_counts_overlapping_calls_once(tmp_path: Path) -> None:
    # Two threads block in syncs at once, and a third call runs past the GPU span's end:
    # the summed time is 18,700 ns, the wall time inside the span [0, 10000) is 8,700 ns.
    b = NsysBuilder(tmp_path / "sync.sqlite")
    b.add_gpu(0)
    b.add_thread(MAIN, "pt_main_thread")
    b.add_thread(BWD, "pt_autograd_0")
    b.add_kernel(0, 10000, "k", stream=7)
    b.add_runtime(1000, 9000, "cudaStreamSynchronize_v3020", tid=MAIN)
    b.add_runtime(2000, 9500, "cudaDeviceSynchronize_v3020", tid=BWD)
    b.add_runtime(9700, 12900, "cudaDeviceSynchronize_v3020", tid=MAIN)
    b.add_runtime(500, 600, "cudaLaunchKernel_v7000", tid=MAIN)  # not a sync
    r = only(b.close())
    assert r.sync.calls == 3
    assert r.sync.total_ns == 8000 + 7500 + 3200
    assert r.sync.wall_ns == len(brute_union([(1000, 9000), (2000, 9500), (9700, 10000)]))
    assert r.sync.wall_ns <= r.span_ns


def test_data_wait_is_the_union_of_data_ranges_inside_the_span(export: Path) -> None:
    r = only(export)
    data = [(32000, 40000), (33000, 38000), (43000, 50000)]  # as built above
    inside = brute_union(data) & set(range(r.span_start_ns, r.span_end_ns))
    assert r.data_wait_ns == len(inside)
    summed = sum(x.total_ns for x in r.nvtx if step_names.is_data_wait(x.name))
    assert summed > r.data_wait_ns  # the old per-name sum counted the nesting twice
    assert r.data_wait_ns <= r.span_ns


def test_data_wait_share_never_exceeds_the_span(tmp_path: Path) -> None:
    """Nested data ranges that cover the whole span (and more) give exactly 100 %."""
    b = NsysBuilder(tmp_path / "nested.sqlite")
    b.add_kernel(1000, 2000, "k")
    b.add_kernel(9000, 10000, "k")
    for s, e in ((0, 12000), (500, 11000), (900, 10500)):
        b.add_nvtx(s, e, "data", tid=MAIN)
        b.add_nvtx(s, e, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", tid=MAIN)
    r = only(b.close())
    assert r.data_wait_ns == r.span_ns == 9000


def test_main_thread_waits_are_blocking_waits_clipped_to_the_span(export: Path) -> None:
    r = only(export)
    # no CUDA-stream table and tid != pid in the builder: the thread named pt_main_thread
    assert (r.main_thread, r.main_thread_rule) == ("pt_main_thread", "named pt_main_thread")
    # pthread_cond_wait [0, 30000) + [30000, 35000) of MAIN inside the span [1000, 44000);
    # poll (MAIN) and pt_autograd_0's wait do not count
    waits = brute_union([(0, 30000), (30000, 35000)])
    assert r.main_thread_wait_ns == len(waits & set(range(r.span_start_ns, r.span_end_ns)))


PID = 4242


def helper_thread_export(path: Path, *, with_streams: bool, worker: bool) -> Path:
    """Like the CloverLeaf export: the main thread (tid == pid) barely waits, an event-handler
    thread polls for the whole capture; optionally a data-loader worker process whose main
    thread is named like a Python main thread and waits a lot."""
    b = NsysBuilder(path, pid=PID)
    b.add_gpu(0)
    b.add_thread(PID, "cuda-app")
    b.add_thread(PID + 9, "cuda-EvtHandlr")
    if with_streams:
        b.add_cuda_stream(7)
    for i in range(10):  # 10 kernels of 1 ms with 1 ms gaps: GPU idle ~47 %
        b.add_kernel(1_000_000 + 2_000_000 * i, 2_000_000 + 2_000_000 * i, "k")
    b.add_osrt(0, 30_000_000, "poll", tid=PID + 9)  # longer than the whole span
    b.add_osrt(0, 30_000_000, "read", tid=PID + 9)
    b.add_osrt(500_000, 1_500_000, "sem_timedwait", tid=PID)  # half of it before the span
    b.add_osrt(3_000_000, 3_200_000, "poll", tid=PID)  # I/O, not a blocking wait
    if worker:
        b.add_thread(7000, "python3", pid=7000)
        b.add_osrt(0, 30_000_000, "pthread_cond_wait", tid=7000, pid=7000)
    return b.close()


@pytest.mark.parametrize(("with_streams", "worker"), [(True, True), (True, False), (False, False)])
def test_main_thread_is_not_the_busiest_thread(
    tmp_path: Path, with_streams: bool, worker: bool
) -> None:
    from orchestrator.analysis import advise

    m = analyze_paths(
        [helper_thread_export(tmp_path / "h.sqlite", with_streams=with_streams, worker=worker)]
    )
    r = m.ranks[0]
    assert r.main_thread == "cuda-app"
    assert r.main_thread_rule is not None and "tid == pid" in r.main_thread_rule
    assert r.main_thread_wait_ns == 500_000  # sem_timedwait from the span start (1 ms) on
    assert r.idle_pct > 40
    assert [a.rule for a in advise(m) if a.rule == "data-loader"] == []  # no data ranges


def test_main_thread_of_two_processes_without_stream_table(tmp_path: Path) -> None:
    """Two processes and no CUDA-stream table: tid == pid does not single one out, and no
    thread is named like a Python main thread, so no main thread (no guessing)."""
    r = only(helper_thread_export(tmp_path / "h.sqlite", with_streams=False, worker=False))
    assert r.main_thread == "cuda-app"  # one process: its main thread
    b = NsysBuilder(tmp_path / "two.sqlite", pid=PID)
    b.add_kernel(0, 10, "k")
    b.add_thread(PID, "app")
    b.add_thread(7000, "helper", pid=7000)
    b.add_osrt(0, 10, "pthread_cond_wait", tid=7000, pid=7000)
    r2 = only(b.close())
    assert (r2.main_thread, r2.main_thread_wait_ns) == (None, None)
    b = NsysBuilder(tmp_path / "named.sqlite", pid=PID)
    b.add_kernel(0, 10, "k")
    b.add_thread(PID, "pt_main_thread")
    b.add_thread(7000, "pt_data_worker", pid=7000)
    b.add_osrt(2, 6, "pthread_cond_wait", tid=PID)
    r3 = only(b.close())
    assert (r3.main_thread, r3.main_thread_wait_ns) == ("pt_main_thread", 4)


def _merged_by_loop(starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
    """The plain reference: sort, then one loop that extends or opens an interval."""
    ms: list[int] = []
    me: list[int] = []
    for s0, e0 in sorted((a, b) for a, b in zip(starts, ends, strict=True) if b >= a):
        if me and s0 <= me[-1]:
            me[-1] = max(me[-1], e0)
        else:
            ms.append(s0)
            me.append(e0)
    return ms, me


@pytest.mark.parametrize("n", [40, 30_000])
def test_merge_intervals_and_covered_ns(n: int) -> None:
    import random

    rnd = random.Random(n)
    starts = [rnd.randrange(0, 200 * n) for _ in range(n)]
    ends = [s + rnd.randrange(-20, 150) for s in starts]  # some end before they start: left out
    lo, hi = 20 * n, 180 * n
    ms, me = intervals.merge_intervals(np.array(starts), np.array(ends))
    assert (ms[1:] > me[:-1]).all()  # disjoint, sorted, not touching
    assert (ms.tolist(), me.tolist()) == _merged_by_loop(starts, ends)
    got = intervals.covered_ns(ms, me, lo, hi)
    assert got == sum(max(0, min(e, hi) - max(s, lo)) for s, e in zip(ms, me, strict=True))
    assert intervals.union_in_span(ms, me, lo, hi) == got
    assert intervals.union_in_span(ms, me, 0, 0) == int((me - ms).sum())  # no span: all of it
    if n <= 1000:  # the independent oracle: covered nanoseconds
        covered = brute_union([(s, e) for s, e in zip(starts, ends, strict=True) if e >= s])
        assert sum(e - s for s, e in zip(ms.tolist(), me.tolist(), strict=True)) == len(covered)
        assert got == len(covered & set(range(lo, hi)))


def _busy_oracle(ivs: list[tuple[int, int]], start: int, end: int, width: int) -> list[float]:
    covered = brute_union(ivs)
    out = []
    for lo in range(start, end, width):
        hi = min(lo + width, end)
        out.append(sum(1 for t in range(lo, hi) if t in covered) / (hi - lo))
    return out


@pytest.mark.parametrize("span_end", [2000, 2003])
def test_busy_fraction_timeline(tmp_path: Path, span_end: int) -> None:
    """200 buckets over the span; each bucket's busy fraction = covered ns / bucket length
    (the last bucket may be shorter)."""
    ivs = [(0, 1000), (1505, 1700), (1650, span_end)]  # idle [1000, 1505): bucket 150 half idle
    b = NsysBuilder(tmp_path / "tl.sqlite")
    for s, e in ivs:
        b.add_kernel(s, e, "k")
    r = only(b.close())
    tl = r.timeline
    width = -(-span_end // 200)
    assert (tl.start_ns, tl.bucket_ns) == (0, width)
    expected = _busy_oracle(ivs, 0, span_end, width)
    assert len(tl.busy_fraction) == len(expected) <= 200
    assert tl.busy_fraction == pytest.approx(expected, abs=1e-4)
    if span_end == 2000:  # 10 ns buckets: busy up to 1000, idle to 1505, busy again
        assert tl.busy_fraction[99:101] == [1.0, 0.0]
        assert tl.busy_fraction[150:152] == [0.5, 1.0]


@pytest.mark.parametrize("n", [50, 3000])  # the plain loop and the numpy path (> 1000 gaps)
def test_busy_fraction_matches_brute_force_on_many_gaps(n: int) -> None:
    import random

    rnd = random.Random(n)
    ivs = []
    t = 0
    for _ in range(n):
        t += rnd.randrange(1, 40)
        d = rnd.randrange(1, 60)
        ivs.append((t, t + d))
        t += d
    u = intervals.union_of_sorted(np.array([s for s, _ in ivs]), np.array([e for _, e in ivs]))
    tl = gaps.busy_timeline(u.gap_starts, u.gap_ends, u.start, u.end)
    assert tl.busy_fraction == pytest.approx(
        _busy_oracle(ivs, u.start, u.end, tl.bucket_ns), abs=1e-4
    )
    empty = gaps.busy_timeline(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0, 0)
    assert empty.busy_fraction == []


def test_rank_from_file_name_and_source(export: Path) -> None:
    m = analyze_paths([export])
    assert m.ranks[0].rank == 3
    assert m.sources[0].rank_rule == "file name"
    assert m.sources[0].tool_version == "2024.5.1.113"
    assert m.sources[0].missing == []


def test_without_um_tables(tmp_path: Path) -> None:
    with_um = only(build(tmp_path / "a_rank0.sqlite"))
    without = only(build(tmp_path / "b_rank0.sqlite", with_um=False))
    assert without.unified_memory.cpu_page_faults is None
    assert without.unified_memory.gpu_page_faults is None
    src = analyze_paths([tmp_path / "b_rank0.sqlite"]).sources[0]
    assert "CUDA_UM_CPU_PAGE_FAULT_EVENTS" in src.missing
    # everything else is unchanged (UM memcpys are still copies)
    assert without.busy_ns == with_um.busy_ns
    assert without.unified_memory.migrations == with_um.unified_memory.migrations
    assert without.temporal == with_um.temporal


def test_minimal_export_without_optional_tables(tmp_path: Path) -> None:
    p = tmp_path / "k.sqlite"
    db = sqlite3.connect(p)
    db.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO StringIds VALUES (1, 'k');"
        'CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, "end" INT, deviceId INT,'
        " streamId INT, shortName INT);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 10, 0, 7, 1), (20, 30, 0, 7, 1);"
    )
    db.commit()
    db.close()
    r = only(p)
    assert (r.busy_ns, r.idle_ns, r.idle_gaps.count) == (20, 10, 1)
    assert r.top_kernels[0].name == "k"
    src = analyze_paths([p]).sources[0]
    assert {"CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS", "OSRT_API"} <= set(src.missing)


def test_two_devices_in_one_file(tmp_path: Path) -> None:
    b = NsysBuilder(tmp_path / "multi.sqlite")
    b.add_kernel(0, 100, "a", device=0)
    b.add_kernel(50, 80, "b", device=1)
    b.add_kernel(200, 300, "b", device=1)
    b.add_nvtx(0, 10, "step_1", tid=1)
    m = analyze_paths([b.close()])
    assert [r.devices for r in m.ranks] == [[0], [1]]
    assert [r.busy_ns for r in m.ranks] == [100, 130]
    assert m.ranks[0].nvtx and not m.ranks[1].nvtx  # CPU side on the first device only


def _one_pass_union(rows: list[tuple[int, ...]]) -> tuple[int, int, int, list[tuple[int, int]]]:
    """(start, end, busy, gaps) of rows sorted by start: the streaming merge, one row at a time
    (touching rows merge)."""
    it = iter(rows)
    cs, ce = next(it)
    start, busy, found = cs, 0, []
    for s, e in it:
        if s > ce:
            found.append((ce, s))
            busy += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return start, ce, busy + ce - cs, found


def test_union_equals_the_single_pass_over_sql_sorted_rows(export: Path) -> None:
    """The reader's columnar union (`intervals.groups_sorted`) against the one-pass merge over
    the GPU rows sorted by SQL (what the reader did without numpy before the timeline model)."""
    r = only(export)
    rows = _sql(
        export,
        'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL'
        ' SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL'
        ' SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY 1',
    )
    start, end, busy, found = _one_pass_union(rows)
    assert (start, end, busy) == (r.span_start_ns, r.span_end_ns, r.busy_ns)
    assert found and len(found) == r.idle_gaps.count
    assert sum(e - s for s, e in found) == r.idle_gaps.total_ns


def test_many_step_ranges_and_data_waits(tmp_path: Path) -> None:
    """1,200 numbered step ranges and as many data waits (the reader used to fetch them by name
    in chunks of 500; now every NVTX range is read once)."""
    b = NsysBuilder(tmp_path / "steps.sqlite")
    for i in range(1200):
        b.add_kernel(100 * i + 10, 100 * i + 60, "k")
        b.add_nvtx(100 * i, 100 * i + 90, f"step_{i}", tid=MAIN)
        b.add_nvtx(100 * i + 60, 100 * i + 100, "get_batch", tid=MAIN)
    f = b.close()
    one = analyze_paths([f])
    r = one.ranks[0]
    assert r.steps is not None and r.steps.count == 1200
    # span [10, 119960): the last get_batch, [119960, 120000), lies after it
    assert (r.span_start_ns, r.span_end_ns, r.data_wait_ns) == (10, 119960, 1199 * 40)


def test_file_is_opened_read_only(export: Path) -> None:
    before = export.stat().st_mtime_ns, export.read_bytes()
    analyze_paths([export])
    assert (export.stat().st_mtime_ns, export.read_bytes()) == before
    assert not Path(str(export) + "-journal").exists()


def test_strings_are_data(tmp_path: Path) -> None:
    b = NsysBuilder(tmp_path / "evil.sqlite")
    evil = "x'); DROP TABLE StringIds; --"
    b.add_kernel(0, 10, evil)
    b.add_nvtx(0, 10, evil, tid=1)
    r = only(b.close())
    assert r.top_kernels[0].name == evil and r.nvtx[0].name == evil


def test_bad_inputs_are_user_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite")
    with pytest.raises(UserError, match=r"junk\.sqlite"):
        analyze_paths([junk])
    with pytest.raises(UserError, match="no such file"):
        analyze_paths([tmp_path / "missing.sqlite"])
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(UserError, match="unknown file type"):
        analyze_paths([tmp_path / "x.txt"])


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("sft.3.sqlite", 3),
        ("sft_rank12.sqlite", 12),
        ("trace_procid-2.json.gz", 2),
        ("host_7.pt.trace.json", None),  # `_7`: as likely a job id as a rank
        ("sft_llama2_7B.sqlite", None),
        ("saxpy-mpi-cuda_perlmutter0.sqlite", None),
    ],
)
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert ranks.rank_from_name(Path(name)) == rank


# ---- real exports ---------------------------------------------------------------------------
def _real(name: str) -> Path:
    p = REAL / name
    if not p.exists():
        pytest.skip(f"{p} absent: the real nsys exports belong in tests/data/nsys")
    return p


def _sql(path: Path, q: str) -> list[tuple[int, ...]]:
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return c.execute(q).fetchall()
    finally:
        c.close()


def _merge_busy(ivs: list[tuple[int, int]]) -> int:
    busy, cs, ce = 0, None, None
    for s, e in sorted(ivs):
        if ce is None or s > ce:
            if ce is not None and cs is not None:
                busy += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return busy + (ce - cs if ce is not None and cs is not None else 0)


@pytest.mark.parametrize(
    "name", ["cloverleaf-cuda_perlmutter.sqlite", "saxpy-mpi-cuda_perlmutter0.sqlite"]
)
def test_real_export_against_independent_sql(name: str) -> None:
    p = _real(name)
    r = only(p)
    ((kc, kt),) = _sql(p, 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL')
    assert (r.activity.kernel_count, r.activity.kernel_ns) == (kc, kt)
    ivs = _sql(
        p,
        'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL'
        ' SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY',
    )
    if "MEMSET" in str(_sql(p, "SELECT group_concat(name) FROM sqlite_master")):
        ivs += _sql(p, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMSET')
    assert r.span_ns == max(e for _, e in ivs) - min(s for s, _ in ivs)
    assert r.busy_ns == _merge_busy(ivs)
    for kind, direction in ((1, "HtoD"), (2, "DtoH")):
        ((cnt, nbytes),) = _sql(
            p,
            f"SELECT count(*), coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
            f" WHERE copyKind = {kind}",
        )
        got = {c.direction: c for c in r.copies}.get(direction)
        assert ((got.count, got.bytes) if got else (0, 0)) == (cnt, nbytes)
    assert 0 < r.temporal.compute_pct <= 100
    assert r.temporal.idle_pct == pytest.approx(r.idle_pct)


def test_real_cloverleaf_threads_and_osrt() -> None:
    p = _real("cloverleaf-cuda_perlmutter.sqlite")
    r = only(p)
    ((osrt,),) = _sql(p, 'SELECT sum("end" - start) FROM OSRT_API')
    assert sum(t.osrt_ns for t in r.threads) == osrt
    assert "cuda-cloverleaf" in {t.name for t in r.threads}
    ((syncs,),) = _sql(
        p,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        " WHERE s.value LIKE 'cudaDeviceSynchronize%'",
    )
    assert r.sync.calls == syncs > 0
    assert r.device_name == "NVIDIA A100-SXM4-80GB"
    assert r.unified_memory.cpu_page_faults is None  # UM tracing was off
    # the main thread is the process's first thread (tid == pid), not cuda-EvtHandlr, whose
    # poll() holds most of the OS-runtime time; only its blocking waits, inside the span
    ((pid,),) = _sql(p, "SELECT DISTINCT processId FROM TARGET_INFO_CUDA_STREAM")
    ((main_name,),) = _sql(
        p,
        "SELECT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"
        f" WHERE (t.globalTid >> 24) & 16777215 = {pid} AND t.globalTid & 16777215 = {pid}",
    )
    busiest = max(r.threads, key=lambda t: t.osrt_ns)
    assert r.main_thread == main_name == "cuda-cloverleaf" != busiest.name
    assert r.main_thread_wait_ns is not None and 0 <= r.main_thread_wait_ns <= r.span_ns


def test_real_saxpy_nvtx() -> None:
    p = _real("saxpy-mpi-cuda_perlmutter0.sqlite")
    r = only(p)
    ((sends,),) = _sql(
        p,
        "SELECT count(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId"
        " WHERE s.value = 'MPI_Send' AND n.eventType = 59",
    )
    ranges = {x.name: x for x in r.nvtx}
    # MPI_Send is the MPI wrapper's range (its own NVTX domain): a library's, not a phase of the
    # workload (issue 28 item 4)
    assert sends > 0 and "MPI_Send" not in ranges
    assert ranges["saxpy"].count == 5  # free-text ranges (text column), the default domain
    assert r.unified_memory.cpu_page_faults == 0  # UM tables present but empty
    assert analyze_paths([p]).sources[0].tool_version == "2022.2.1.31"


@pytest.mark.parametrize("machine_wide", [False, True])
def test_thread_names_of_traced_processes_only(tmp_path: Path, machine_wide: bool) -> None:
    """With CPU sampling, ThreadNames lists every thread of the machine: only the threads of
    processes the export recorded calls of are kept, a process seen only in the CUDA runtime
    table included. Without such names (machine_wide False) every named thread is kept."""
    b = NsysBuilder(tmp_path / "t.sqlite", pid=PID)
    b.add_gpu(0)
    b.add_cuda_stream(7)
    b.add_thread(PID, "cuda-app")
    b.add_thread(PID + 1, "pt_data_worker")
    b.add_kernel(1_000_000, 2_000_000, "k")
    b.add_osrt(0, 500_000, "poll", tid=PID + 1)
    if machine_wide:
        b.add_thread(31, "kworker/0:1", pid=31)  # no row anywhere: not traced
        b.add_thread(5000, "probe", pid=5000)  # only a runtime call (no context, no kernel)
        b.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,?,0,NULL)",
            (100, 200, b.tid(5000, 5000), 999_999, b.sid("cudaGetDeviceCount_v2020")),
        )
    r = only(b.close())
    want = {"cuda-app", "pt_data_worker"} | ({"probe"} if machine_wide else set())
    assert {t.name for t in r.threads} == want


@pytest.mark.parametrize("launcher_first", [True, False])
def test_a_thread_named_by_nsys_launcher_and_the_workload_is_the_workload(
    tmp_path: Path, launcher_first: bool
) -> None:
    """nsys may record the workload's main thread under its launcher's name (before exec) and
    under its own: the workload's name, whichever string nsys stored first; the launcher's own
    process keeps its only name."""
    from orchestrator.analysis.readers import nsys_sqlite

    b = NsysBuilder(tmp_path / "t.sqlite", pid=PID)
    names = ["nsys-launcher", "python3.12"] if launcher_first else ["python3.12", "nsys-launcher"]
    for name in names:
        b.add_thread(PID, name)
    b.add_thread(PID - 1, "nsys-launcher", pid=PID - 1)
    b.add_osrt(0, 30_000_000, "clock_nanosleep", tid=PID)
    b.add_osrt(0, 1_000, "read", tid=PID - 1, pid=PID - 1)
    (tl,) = nsys_sqlite.read_timelines(b.close())
    assert tl.threads[(PID, PID)] == "python3.12"
    assert tl.threads[(PID - 1, PID - 1)] == "nsys-launcher"


@pytest.mark.parametrize(
    ("exe", "want"),
    [
        ("/root/.pyenv/versions/3.11.7/bin/python3.11", "python3.11"),
        ("/opt/apps/a-very-long-program-name", "a-very-long-pro"),  # the kernel's 15 bytes
        ("/opt/nvidia/nsys/target-linux-x64/nsys-launcher", "nsys-launcher"),
    ],
)
def test_a_main_thread_named_only_by_nsys_launcher_takes_its_program_name(
    tmp_path: Path, exe: str, want: str
) -> None:
    """Under load nsys may record the workload's main thread under its launcher's name alone
    (named before exec, never again): the program PROCESSES names is what the kernel names the
    thread at exec; a process that is the launcher keeps the launcher's name."""
    from orchestrator.analysis.readers import nsys_sqlite

    b = NsysBuilder(tmp_path / "t.sqlite", pid=PID)
    b.db.execute("UPDATE PROCESSES SET name = ? WHERE pid = ?", (exe, PID))
    b.add_thread(PID, "nsys-launcher")
    b.add_thread(PID + 1, "nsys-launcher")  # not a main thread: its name stays
    b.add_osrt(0, 30_000_000, "clock_nanosleep", tid=PID)
    b.add_osrt(0, 1_000, "read", tid=PID + 1)
    (tl,) = nsys_sqlite.read_timelines(b.close())
    assert tl.threads[(PID, PID)] == want
    assert tl.threads[(PID, PID + 1)] == "nsys-launcher"


def test_tables_read_in_parts_give_the_rows_of_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large tables are read in rowid parts in several threads; rows left out of a part (end
    before start) leave no hole, and the runtime calls taken part by part for the launch times
    keep the call of a repeated correlationId that starts latest: the metrics equal those of
    one read."""
    from orchestrator.analysis.readers import nsys_sqlite, sqlite_columns

    b = NsysBuilder(tmp_path / "k.sqlite")
    b.add_gpu(0)
    for i in range(40):
        s = 1000 * i
        # a few inside-out rows in the first half, one in the second
        b.add_kernel(s, s - 5 if i in (3, 4, 11, 30) else s + 400 + 10 * i, f"k{i % 7}",
                     stream=7 + i % 2, launch=s - 100)  # fmt: skip
    # a repeated correlationId in a later part of the runtime table: its call is the launch
    b.db.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start + 60, "end" + 60, eventClass,'
        " globalTid, correlationId, nameId, returnValue, callchainId"
        " FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid IN (2, 7, 20)"
    )
    b.db.execute('UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = start - 1 WHERE rowid = 9')
    path = b.close()
    monkeypatch.setattr(sqlite_columns, "FETCH_CHUNK_ROWS", 1000)
    (whole,) = analyze_paths([path]).ranks
    monkeypatch.setattr(sqlite_columns, "FETCH_CHUNK_ROWS", 4)
    monkeypatch.setattr(sqlite_columns, "PART_ROWS", 8)  # parts of 8 rows: 5 of kernels, 6 of calls
    (parts,) = analyze_paths([path]).ranks
    assert parts.activity.kernel_count == 36
    assert parts.model_dump() == whole.model_dump()
    # each kernel's launch: the start of the latest runtime call with its correlationId (of
    # the calls read: not rowid 9, whose end is before its start)
    conn = sqlite3.connect(path)
    want = sorted(conn.execute(
        "SELECT k.start, coalesce((SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE"
        " r.correlationId = k.correlationId AND r.\"end\" >= r.start"
        " ORDER BY r.start DESC LIMIT 1), -1)"
        " FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.\"end\" >= k.start"
    ).fetchall())  # fmt: skip
    conn.close()
    assert sum(1 for _, launch in want if launch % 1000 == 960) == 3  # the repeated calls'
    (tl,) = nsys_sqlite.read_timelines(path)
    assert sorted(zip(tl.gpu.start.tolist(), tl.gpu.launch.tolist(), strict=True)) == want


def _sync_reference(path: Path) -> list[tuple[int, int]]:
    """The synchronisation calls by plain SQL over the whole runtime table, with the reader's
    rules (start and end integers, end >= start): (start, end), sorted."""
    from orchestrator.analysis.readers.nsys_host import SYNC_PATTERNS

    like = " OR ".join("s.value LIKE ?" for _ in SYNC_PATTERNS)
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute(
            'SELECT r.start, r."end" FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s'
            f" ON s.id = r.nameId WHERE ({like}) AND typeof(r.start) = 'integer'"
            """ AND typeof(r."end") = 'integer' AND r."end" >= r.start""",
            SYNC_PATTERNS,
        ).fetchall())  # fmt: skip
    finally:
        conn.close()


def _sync_read(tl: object) -> list[tuple[int, int]]:
    from orchestrator.analysis.timeline import model as T

    host = tl.host  # type: ignore[attr-defined]
    m = host.kind == T.CUDA_API
    return sorted(zip(host.start[m].tolist(), host.end[m].tolist(), strict=True))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("odd", [False, True])
def test_what_the_big_scans_gather_equals_sql_over_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: bool, native: bool
) -> None:
    """The UM copies' migration causes and the synchronisation calls come from the scans that
    read the memcpy and runtime tables in parts (a `Subset`), by the page reader and by SQLite's
    path; they equal plain SQL over the whole tables with the reader's rules (start and end
    integers, end >= start, other values as CAST reads them, a NULL cause as 0). `odd` puts a
    text in a memcpy's bytes, in a UM copy's copy kind and in another's cause, and a real in a
    runtime call's end: the page reader leaves those parts to SQLite, whose one query must pick
    the same UM copies for the causes as for the GPU table."""
    from orchestrator.analysis.readers import nsys_sqlite, sqlite_columns

    if not native:
        monkeypatch.setattr(sqlite_pages, "_LIB", None)
    b = NsysBuilder(tmp_path / "g.sqlite")
    b.add_gpu(0)
    for i in range(30):
        s = 1000 * i
        b.add_kernel(s, s + 300, f"k{i % 3}", stream=7, launch=s - 50)
        b.add_memcpy(s + 400, s + 600, 11 + i % 3 if i % 2 else 1, 4096 * (i + 1),
                     migration_cause=i % 4 or None, launch=s + 350)  # fmt: skip
        b.add_runtime(s + 700, s + 900, "cudaStreamSynchronize_v3020", tid=b.pid)
        b.add_runtime(s + 900, s + 950, "cudaDeviceSynchronize_v3020", tid=b.pid)
    if odd:
        memcpy = "CUPTI_ACTIVITY_KIND_MEMCPY"
        b.db.execute(f"UPDATE {memcpy} SET bytes = '4096x' WHERE rowid = 5")
        b.db.execute(f"UPDATE {memcpy} SET copyKind = '12x' WHERE rowid = 6")  # a UM kind, CAST
        b.db.execute(f"UPDATE {memcpy} SET migrationCause = '2x' WHERE rowid = 10")
        b.db.execute('UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = 9.5 WHERE rowid = 8')
    path = b.close()
    monkeypatch.setattr(sqlite_columns, "FETCH_CHUNK_ROWS", 4)
    monkeypatch.setattr(sqlite_columns, "PART_ROWS", 8)  # several parts of each table
    (tl,) = nsys_sqlite.read_timelines(path)
    conn = sqlite3.connect(path)
    try:
        want: dict[int, dict[tuple[int, int], tuple[int, int, int]]] = {}
        for dev, kind, cause, n, nbytes, ns in conn.execute(
            "SELECT deviceId, CAST(copyKind AS INTEGER), CAST(coalesce(migrationCause, 0) AS"
            ' INTEGER), count(*), sum(CAST(bytes AS INTEGER)), sum("end" - start)'
            " FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE CAST(copyKind AS INTEGER) IN (11, 12, 13)"
            ' AND "end" >= start GROUP BY 1, 2, 3'
        ):
            want.setdefault(dev, {})[(kind, cause)] = (n, nbytes, ns)
    finally:
        conn.close()
    assert tl.um.migrations == want
    assert sum(n for per in want.values() for n, _, _ in per.values()) == 15
    assert _sync_read(tl) == _sync_reference(path)
    assert len(_sync_read(tl)) == (59 if odd else 60)


def test_sync_calls_are_found_where_the_runtime_table_has_no_correlation_ids(
    tmp_path: Path,
) -> None:
    """A runtime table without correlationId gives no launch times, and its synchronisation
    calls are still gathered by its read (then read for them alone)."""
    from orchestrator.analysis.readers import nsys_sqlite

    b = NsysBuilder(tmp_path / "c.sqlite")
    b.add_gpu(0)
    for i in range(10):
        b.add_kernel(1000 * i, 1000 * i + 300, "k", stream=7, launch=1000 * i - 50)
        b.add_runtime(1000 * i + 400, 1000 * i + 600, "cudaStreamSynchronize_v3020", tid=b.pid)
    b.db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME DROP COLUMN correlationId")
    path = b.close()
    (tl,) = nsys_sqlite.read_timelines(path)
    assert len(_sync_read(tl)) == 10
    assert _sync_read(tl) == _sync_reference(path)
    assert (tl.gpu.launch < 0).all()  # no launch time without correlation ids


def test_bytes_that_are_not_utf8_read_as_replacement_characters(tmp_path: Path) -> None:
    """A kernel name whose bytes are not UTF-8, and a blob of such bytes in a numeric column:
    the name reads with U+FFFD in place of the bad bytes, the odd value as SQLite casts it, and
    the analysis goes on (it used to fail the whole query)."""
    b = NsysBuilder(tmp_path / "u.sqlite")
    b.add_gpu(0)
    b.add_kernel(0, 100, "gemm_ok", stream=7)
    b.add_kernel(200, 300, "bad", stream=7)
    b.db.execute("UPDATE StringIds SET value = CAST(x'67656d6dff5f6b' AS TEXT) WHERE value = 'bad'")
    b.db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = x'ff80' WHERE start = 200")
    path = b.close()
    (r,) = analyze_paths([path]).ranks
    assert r.activity.kernel_count == 2
    assert sorted(k.name for k in r.top_kernels) == ["gemm_ok", "gemm\ufffd_k"]


def test_a_file_damaged_inside_a_table_is_refused_in_one_sentence(tmp_path: Path) -> None:
    """A kernel table whose b-tree points past the end of the file: SQLite finds it partway
    through the reading ("database disk image is malformed", and the page reader gives the range
    to SQLite); the user gets one sentence naming the file and the fix, not a traceback."""
    b = NsysBuilder(tmp_path / "d.sqlite")
    b.add_gpu(0)
    for i in range(3000):
        b.add_kernel(100 * i, 100 * i + 50, f"k{i % 5}", stream=7)
    path = b.close()
    conn = sqlite3.connect(path)
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'"
    ).fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    raw = bytearray(path.read_bytes())
    at = (root - 1) * page_size
    assert raw[at] == 5  # an interior page: its right-most child to a page past the end
    raw[at + 8 : at + 12] = (len(raw) // page_size + 100).to_bytes(4, "big")
    path.write_bytes(bytes(raw))
    with pytest.raises(UserError) as exc:
        analyze_paths([path])
    msg = str(exc.value)
    assert str(path) in msg and "SQLite cannot read this file" in msg
    assert "nsys export --type sqlite" in msg
