"""Real recordings of the reference workload on GPUs, read through gh-run's public analysis API.

tests/data/nsys_h100/: `nsys export` files of the seed's variants recorded by Nsight Systems
2023.4.4 on an H100 through gh-run itself (bench/gpu_nsys.sh); tests/data/ddp_h200/: the workload
data-parallel on two H200s (bench/gpu_ddp.sh), Kineto traces per rank and nsys reports per rank.
How each was made: the README.md in each folder. The tests assert the seed's readings where the
present readers compute them, and pin the table facts a later reader needs (raw SQL on the
exports, never gh-run's internals); docs/seed-readings.md lists both.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.analysis import RankMetrics, advise, analyze_paths, compare, headline
from tests.conftest import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "nsys_h100"
DDP = DATA / "ddp_h200"
H100_VARIANTS = ("baseline", "workers4", "offload", "lora_um", "full_um", "full_um_first")
UM_STEADY = ("lora_um", "full_um")


def export(variant: str) -> Path:
    return H100 / variant / f"{variant}.sqlite"


def rank0(variant: str) -> RankMetrics:
    metrics = analyze_paths([export(variant)], label=variant)
    assert len(metrics.ranks) == 1
    return metrics.ranks[0]


def workload(variant: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((H100 / variant / "metrics.json").read_text())
    return data


def sql(path: Path, query: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn, conn:
        return conn.execute(query).fetchall()


# --- every export is whole ---------------------------------------------------------------------


@pytest.mark.parametrize("variant", H100_VARIANTS)
def test_h100_exports_are_small_real_nsys_2023_4_with_their_capture_window(variant: str) -> None:
    assert export(variant).stat().st_size < 3.5e6
    metrics = analyze_paths([export(variant)])
    (source,) = metrics.sources
    assert source.kind == "nsys-sqlite" and source.tool_version == "2023.4.4.54"
    r = metrics.ranks[0]
    assert r.device_name == "NVIDIA H100 80GB HBM3"
    assert r.activity.kernel_count > 1000 and r.activity.kernel_pct > 0
    # the capture range is the workload's --cuda-profiler-window: exactly its steps are traced
    start, end = workload(variant)["config"]["cuda_profiler_window"]  # type: ignore[index]
    assert r.steps is not None and r.steps.count == end - start
    assert {"data", "forward", "backward", "optimizer"} <= {n.name for n in r.nvtx}


# --- the seed's readings -----------------------------------------------------------------------


def test_workers4_has_less_gpu_idle_and_data_wait_than_workers0() -> None:
    base, w4 = rank0("baseline"), rank0("workers4")
    assert w4.idle_pct < base.idle_pct / 2
    assert w4.data_wait_ns / w4.span_ns < base.data_wait_ns / base.span_ns / 10
    assert w4.idle_gaps.max_ns < base.idle_gaps.max_ns
    # the same kernels run either way: only the waiting changed
    assert w4.activity.kernel_count == base.activity.kernel_count
    table = compare(
        [analyze_paths([export("baseline")]), analyze_paths([export("workers4")])],
        labels=["workers 0", "workers 4"],
    )
    assert table.rows


def test_offload_moves_activations_through_host_copies_and_syncs_more() -> None:
    base, off = rank0("baseline"), rank0("offload")
    assert off.activity.memcpy_pct > 10 * base.activity.memcpy_pct
    by_dir = {c.direction: c for c in off.copies}
    base_dir = {c.direction: c for c in base.copies}
    for direction in ("HtoD", "DtoH"):
        assert by_dir[direction].bytes > 1000 * base_dir[direction].bytes
    assert off.sync.wall_ns / off.span_ns > base.sync.wall_ns / base.span_ns
    assert off.offloading is True  # seen in the trace: DtoH in forward, HtoD in backward
    autograd = {t.name: t for t in off.threads}["pt_autograd_0"]
    assert autograd.osrt_ns > {t.name: t for t in base.threads}["pt_autograd_0"].osrt_ns


def _running_peak(variant: str, kinds: str) -> int:
    """Independent oracle: the peak of allocations - frees of the given memKinds, in SQL order
    of start."""
    rows = sql(
        export(variant),
        "SELECT bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
        f"WHERE memKind IN ({kinds}) ORDER BY start",
    )
    held = peak = 0
    for nbytes, op in rows:
        held += int(nbytes) if op == 0 else -int(nbytes)  # type: ignore[call-overload]
        peak = max(peak, held)
    return peak


def test_mem_kinds_are_as_the_exports_enum_tables_name_them() -> None:
    """memKind, migrationCause and faultAccessType codes, as each export's ENUM tables define
    them (the labels gh-run reports depend on these numbers)."""
    for variant in H100_VARIANTS:
        kinds = dict(sql(export(variant), "SELECT id, name FROM ENUM_CUDA_MEM_KIND"))
        assert kinds[1].endswith("_PINNED") and kinds[2].endswith("_DEVICE")  # type: ignore[union-attr]
        assert kinds[4].endswith("_MANAGED") and kinds[5].endswith("_DEVICE_STATIC")  # type: ignore[union-attr]
        causes = dict(sql(export(variant), "SELECT id, name FROM ENUM_CUDA_UNIF_MEM_MIGRATION"))
        assert causes[2].endswith("_COHERENCE") and causes[3].endswith("_PREFETCH")  # type: ignore[union-attr]
        assert causes[1].endswith("_USER") and causes[4].endswith("_EVICTION")  # type: ignore[union-attr]
        access = dict(sql(export(variant), "SELECT id, name FROM ENUM_CUDA_UNIF_MEM_ACCESS_TYPE"))
        assert access[1].endswith("_READ") and access[2].endswith("_WRITE")  # type: ignore[union-attr]


def test_offload_lowers_peak_device_memory_and_holds_its_activations_in_pinned_memory() -> None:
    """The seed: offloading trades GPU memory for copies. gh-run's peak GPU memory counts
    device memory (memKind 2, 3, 5); the pinned host buffers offloading adds (memKind 1) are
    their own peak (before: every kind summed, offload 24.60 GiB vs baseline 17.87)."""
    base, off = rank0("baseline"), rank0("offload")
    assert base.peak_gpu_memory_bytes is not None and off.peak_gpu_memory_bytes is not None
    assert off.peak_gpu_memory_bytes < 0.7 * base.peak_gpu_memory_bytes
    for r, variant in ((base, "baseline"), (off, "offload")):
        assert r.peak_gpu_memory_bytes == _running_peak(variant, "2, 3, 5")
        assert r.peak_pinned_memory_bytes == _running_peak(variant, "1")
        assert r.peak_managed_memory_bytes is None
        # every allocation row is at start 0: torch's pool, held when the capture opened
        assert (r.peak_gpu_memory_source or "").endswith("held at capture start")
    assert off.peak_pinned_memory_bytes is not None and off.peak_pinned_memory_bytes > 10 * 2**30
    assert base.peak_pinned_memory_bytes is not None and base.peak_pinned_memory_bytes < 2**20
    # the workload's own peak (torch's allocator, whole run) agrees on the direction
    assert (
        workload("offload")["peak_gpu_memory_bytes"]
        < 0.7
        * workload("baseline")[  # type: ignore[operator]
            "peak_gpu_memory_bytes"
        ]
    )
    table = compare(
        [analyze_paths([export("baseline")]), analyze_paths([export("offload")])],
        labels=["baseline", "offload"],
    )
    rows = {row.metric: row.values for row in table.rows}
    (b_peak, o_peak) = rows["peak GPU memory"]
    assert b_peak is not None and o_peak is not None and o_peak < b_peak
    (b_pin, o_pin) = rows["peak pinned host memory"]
    assert b_pin is not None and o_pin is not None and o_pin > 10 > b_pin


@pytest.mark.parametrize("variant", UM_STEADY)
def test_um_rows_are_read_and_the_um_share_is_as_documented(variant: str) -> None:
    r = rank0(variant)
    um = r.unified_memory
    assert um.cpu_page_faults and um.gpu_page_faults and um.gpu_fault_groups
    assert um.migrated_htod_bytes > 0 and um.migrated_dtoh_bytes > 0
    # docs/metrics.md: UM migrations (memcpy kinds 11/12/13) / all memcpys and memsets, by count
    ((um_copies,),) = sql(
        export(variant),
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (11,12,13)",
    )
    ((copies,),) = sql(export(variant), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    ((memsets,),) = sql(export(variant), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")
    assert um.migrations == um_copies
    assert um.share_of_memory_ops_pct == pytest.approx(100 * um_copies / (copies + memsets))  # type: ignore[operator]
    ((faults,),) = sql(
        export(variant), "SELECT sum(numberOfPageFaults) FROM CUDA_UM_GPU_PAGE_FAULT_EVENTS"
    )
    ((cpu_faults,),) = sql(export(variant), "SELECT count(*) FROM CUDA_UM_CPU_PAGE_FAULT_EVENTS")
    assert (um.gpu_page_faults, um.cpu_page_faults) == (faults, cpu_faults)


def test_um_full_sft_migrates_more_than_lora() -> None:
    """The seed: LoRA 1.1 % of memory operations are UM, full SFT 9.8 %. Here the host snapshot
    reads the trainable weights (all of them for full SFT, the adapters for LoRA)."""
    lora, full = rank0("lora_um").unified_memory, rank0("full_um").unified_memory
    assert full.share_of_memory_ops_pct > lora.share_of_memory_ops_pct
    assert full.migrated_htod_bytes > 5 * lora.migrated_htod_bytes
    assert headline(analyze_paths([export("full_um")]))["um_share_pct"] == pytest.approx(
        full.share_of_memory_ops_pct
    )


@pytest.mark.parametrize("variant", UM_STEADY)
def test_um_migrations_are_split_by_cause_as_the_memcpy_rows_say(variant: str) -> None:
    """Why pages moved (`migrationCause` of the UM copies): gh-run's split equals the rows',
    adds up to the migrations, and reads as the runs were made: the host snapshot's CPU reads
    fault pages out (DtoH) and the GPU's next touch faults them back (HtoD), each fault pulling
    neighbouring pages along by speculative prefetch, which carries most of the bytes; no
    eviction (the pool never oversubscribes the GPU) and no user prefetch."""
    um = rank0(variant).unified_memory
    rows = sql(
        export(variant),
        'SELECT copyKind, migrationCause, count(*), sum(bytes), sum("end" - start)'
        " FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (11, 12, 13) GROUP BY 1, 2",
    )
    labels = dict(sql(export(variant), "SELECT id, label FROM ENUM_CUDA_UNIF_MEM_MIGRATION"))
    assert labels[2] == "Page fault"
    got = {(c.direction, c.cause): (c.count, c.bytes, c.total_ns) for c in um.by_cause}
    names = {11: "UM HtoD", 12: "UM DtoH", 13: "UM DtoD"}
    causes = {2: "page fault", 3: "speculative prefetch"}
    assert got == {(names[k], causes[c]): (n, b, t) for k, c, n, b, t in rows}  # type: ignore[index]
    assert sum(c.count for c in um.by_cause) == um.migrations
    assert sum(c.bytes for c in um.by_cause) == um.migrated_htod_bytes + um.migrated_dtoh_bytes
    assert {c.cause for c in um.by_cause} == {"page fault", "speculative prefetch"}
    for direction in ("UM HtoD", "UM DtoH"):
        fault = got[(direction, "page fault")][1]
        prefetch = got[(direction, "speculative prefetch")][1]
        assert prefetch > 5 * fault
    # the unified-memory advice cites the split by bytes
    (um_advice,) = [
        a for a in advise(analyze_paths([export(variant)])) if a.rule == "unified-memory"
    ]
    moved = um.migrated_htod_bytes + um.migrated_dtoh_bytes
    fault_bytes = sum(c.bytes for c in um.by_cause if c.cause == "page fault")
    assert um_advice.evidence["um_page_fault_bytes_pct"] == pytest.approx(100 * fault_bytes / moved)
    assert "speculative prefetch" in um_advice.message
    # steady state: the GPU re-reads pages the CPU took (read faults only, or nearly)
    access = um.gpu_faults_by_access
    assert access.get("read", 0) > 10 * access.get("write", 0)


def test_um_first_touch_faults_without_migrating() -> None:
    """Pages first touched on the GPU fault there but copy nothing: no UM memcpy rows."""
    um = rank0("full_um_first").unified_memory
    assert um.gpu_page_faults and um.gpu_page_faults > 10 * (
        rank0("full_um").unified_memory.gpu_page_faults or 0
    )
    assert um.migrations == 0 and um.cpu_page_faults is None  # no CPU faults: table absent
    # first touch writes (activations, gradients, Adam state): every fault is a write
    assert um.gpu_faults_by_access == {"write": um.gpu_page_faults}
    assert um.by_cause == []


def test_um_peak_memory_is_rmms_not_torchs() -> None:
    for variant in UM_STEADY:
        data = workload(variant)
        assert str(data["peak_gpu_memory_source"]).startswith("rmm.statistics")
        assert 0 < data["peak_gpu_memory_bytes"] < data["peak_gpu_memory_reserved_bytes"]  # type: ignore[operator]
    # nsys sees RMM's pool as one managed allocation (memKind 4), not what torch used of it
    ((managed,),) = sql(
        export("full_um"),
        "SELECT max(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 4",
    )
    assert managed == workload("full_um")["peak_gpu_memory_reserved_bytes"]
    # gh-run reports that pool apart from device memory, and says so
    for variant in UM_STEADY:
        r = rank0(variant)
        assert r.peak_managed_memory_bytes == managed
        assert r.peak_gpu_memory_bytes == _running_peak(variant, "2, 3, 5")
        assert r.peak_gpu_memory_bytes < 2**30
        assert any("managed (Unified) memory peaked" in n for n in r.notes)


# --- threads: the seed's pt_main_thread / pt_autograd_0 / pthread_cond_wait -----------------------


@pytest.mark.parametrize("variant", H100_VARIANTS)
def test_main_thread_is_found_in_every_h100_export_and_blocks_in_pthread_cond_wait(
    variant: str,
) -> None:
    """nsys names the main thread `python3` here, as it names a dozen OpenMP and loader
    threads: gh-run finds it by tid == pid in the process owning the CUDA streams, flags it in
    the thread table, and reads the seed's blocking in `pthread_cond_wait` on it and on
    `pt_autograd_0`."""
    r = rank0(variant)
    assert r.main_thread == "python3"
    assert r.main_thread_rule == "tid == pid in the process owning the CUDA streams"
    ((streams_pid,),) = sql(
        export(variant), "SELECT DISTINCT processId FROM TARGET_INFO_CUDA_STREAM"
    )
    (main,) = [t for t in r.threads if t.main]
    assert (main.pid, main.tid, main.name) == (streams_pid, streams_pid, "python3")
    assert r.pid == streams_pid
    assert sum(t.name == "python3" for t in r.threads) > 1  # the name alone would not do
    assert main.functions[0].name == "pthread_cond_wait"
    assert r.main_thread_wait_ns and r.main_thread_wait_ns <= main.osrt_ns
    autograd = {t.name: t for t in r.threads}["pt_autograd_0"]
    assert autograd.functions[0].name == "pthread_cond_wait" and not autograd.main
    # nsys's own marker rows at tid 0 are no thread
    assert all(t.tid != 0 for t in r.threads)


def test_compare_reads_the_main_thread_of_nsys_exports() -> None:
    table = compare(
        [analyze_paths([export("baseline")]), analyze_paths([export("workers4")])],
        labels=["workers 0", "workers 4"],
    )
    rows = {row.metric: row.values for row in table.rows}
    base, w4 = rank0("baseline"), rank0("workers4")
    mains = [next(t for t in r.threads if t.main) for r in (base, w4)]
    assert rows["main thread OS-runtime"] == [pytest.approx(t.osrt_ns / 1e9) for t in mains]
    assert rows["main thread blocking waits"] == [
        pytest.approx(r.main_thread_wait_ns / 1e9)  # type: ignore[operator]
        for r in (base, w4)
    ]


# --- data parallel on two H200s ----------------------------------------------------------------


def _nccl_share(r: RankMetrics) -> float:
    nccl = sum(k.total_ns for k in r.top_kernels if k.name.startswith("ncclDevKernel_"))
    return nccl / r.activity.kernel_ns


@pytest.mark.parametrize("run", ["kineto", "kineto_straggler"])
def test_ddp_kineto_traces_are_per_rank_with_distributed_info_and_nccl(run: str) -> None:
    metrics = analyze_paths([DDP / run])
    assert [(s.rank, s.rank_rule) for s in metrics.sources] == [
        (0, "distributedInfo.rank"),
        (1, "distributedInfo.rank"),
    ]
    assert [r.devices for r in metrics.ranks] == [[0], [1]]
    for r in metrics.ranks:
        assert r.device_name == "NVIDIA H200"
        assert _nccl_share(r) > 0.05
        assert r.workload is not None and r.workload.median_step_time_s


def test_ddp_straggler_shows_in_data_wait_and_in_the_other_ranks_nccl_time() -> None:
    normal = analyze_paths([DDP / "kineto"]).ranks
    slow = analyze_paths([DDP / "kineto_straggler"]).ranks
    # rank 1 does extra host work in its data phase ...
    assert slow[1].data_wait_ns > 50 * max(slow[0].data_wait_ns, 1)
    assert normal[1].data_wait_ns < 10 * max(normal[0].data_wait_ns, 1)
    # ... so rank 0 waits for it inside the gradient all-reduce
    assert _nccl_share(slow[0]) > 2 * _nccl_share(slow[1])
    assert _nccl_share(slow[0]) > 2 * _nccl_share(normal[0])


def test_ddp_nsys_reports_lost_their_kernels_and_are_refused(tmp_path: Path) -> None:
    """nsys 2023.4's importer stopped at cudaGetDriverEntryPointByVersion on these reports and
    kept their kernel lookups but no kernel (README): `analyze` exits 1 with one sentence."""
    for rank in (0, 1):
        path = DDP / "nsys" / f"nsys.rank{rank}.sqlite"
        res = run_cli(["analyze", str(path)], tmp_path / "home")
        assert res.rc == 1, res.text
        (line,) = res.err.strip().splitlines()
        assert "this capture lost data" in line and "holds no kernel" in line, line
        assert "GH_RUN_ACCEPT_LOST_DATA=1" in line and "Traceback" not in res.text
        assert "cuKernelGetAttribute" in line or "cudaGetFuncBySymbol" in line


def test_ddp_nsys_reports_are_named_per_rank_and_say_their_rank_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GH_RUN_ACCEPT_LOST_DATA", "1")  # read what they kept (the test above)
    metrics = analyze_paths([DDP / "nsys"])
    # the rank inside the report (its RANK variable) wins over the name (nsys.rank1.sqlite)
    assert [(s.rank, s.rank_rule) for s in metrics.sources] == [
        (0, "RANK in the profiled environment"),
        (1, "RANK in the profiled environment"),
    ]
    for rank in (0, 1):
        ((env,),) = sql(
            DDP / "nsys" / f"nsys.rank{rank}.sqlite",
            "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'",
        )
        variables = dict(kv.split("=", 1) for kv in str(env).split(";"))
        assert (variables["RANK"], variables["WORLD_SIZE"]) == (str(rank), "2")
    # NCCL marks each collective with NVTX ranges in a domain of its own: a library's ranges,
    # kept out of the workload's (issue 28 item 4)
    names = {n.name for r in metrics.ranks for n in r.nvtx}
    assert "ncclAllReduce" not in names and {"forward", "backward"} <= names
    assert all(r.steps is not None and r.steps.count == 2 for r in metrics.ranks)


def test_one_nsys_report_around_torchrun_holds_both_ranks_processes() -> None:
    path = DDP / "nsys_one_report" / "nsys_one_report.sqlite"
    contexts = sql(path, "SELECT DISTINCT deviceId, processId FROM TARGET_INFO_CUDA_CONTEXT_INFO")
    assert len(contexts) == 2 and len({p for _, p in contexts}) == 2
    # nsys's own environment is the job task's, outside torchrun: it names no worker's rank
    ((env,),) = sql(
        path, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"
    )
    assert "RANK=0" in str(env).split(";") and "WORLD_SIZE=1" in str(env).split(";")
    # several processes in one report are several ranks (issue 14): numbered by their device
    m = analyze_paths([path])
    assert [(r.rank, r.pid) for r in m.ranks] == sorted(
        ((dev, pid) for dev, pid in contexts), key=lambda x: x[0]
    )
    assert m.sources[0].ranks == [0, 1]
    assert m.sources[0].rank_rule.endswith("process 1 of 2")
    # each rank's threads and memory are its own process's: rank 1 has no GPU activity left in
    # the export (the import stopped), yet its allocations are read; its device-static rows sit
    # on device 0, its pool on device 1: a peak is per device (no frees: sums)
    for r in m.ranks:
        (main,) = [t for t in r.threads if t.main]
        assert (main.pid, main.tid) == (r.pid, r.pid)
        per_device = sql(
            path,
            "SELECT deviceId, sum(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind IN"
            f" (2, 3, 5) AND ((globalPid >> 24) & 16777215) = {r.pid} GROUP BY deviceId",
        )
        assert r.peak_gpu_memory_bytes == max(int(b) for _, b in per_device)  # type: ignore[call-overload]


def test_ddp_straggler_is_named_with_its_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 1 of the straggler run does ~100 ms of extra host work per step (README): gh-run
    names it from the collectives' starts; the normal run has no straggler."""
    slow = analyze_paths([DDP / "kineto_straggler"]).cross_rank
    assert slow.straggler is not None and slow.straggler.rank == 1
    assert slow.straggler.evidence["late_in_pct_of_collectives"] > 90
    assert 80_000 < slow.straggler.evidence["late_us_per_step"] < 120_000
    assert analyze_paths([DDP / "kineto"]).cross_rank.straggler is None
    monkeypatch.setenv("GH_RUN_ACCEPT_LOST_DATA", "1")  # they lost their kernels
    assert analyze_paths([DDP / "nsys"]).cross_rank.straggler is None
