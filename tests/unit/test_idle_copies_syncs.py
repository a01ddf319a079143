"""The host side of pageable copies, what a sync costs after it, and input that needs loading
evidence (issue 35, branch cause3).

- pageable copies: `readers/pageable_copies` against plain SQL on the real H200 export of
  `img_pageable` (its 39 MB batches copied from pageable memory) and `img_pinned` (the same from
  pinned memory: none), and `osrt_stacks.target` on a storage-releasing `munmap`;
- syncs: `sync_refill` on STAND-INS (tests/fixtures/nsys_builder.py, not nsys output) whose
  idle is known by construction: a GPU-bound loop whose `.item()` leaves the host behind for a
  few launches, and a launch-bound loop whose syncs block little;
- input: `idle_classes.loading_seen` on the evidence of the real recordings (a loop's own host
  work before each copy is no input; a Dataset's sleeps and tensor building are).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import RankMetrics
from orchestrator.analysis.presentation.advise import advise
from orchestrator.analysis.readers import osrt_stacks, pageable_copies
from tests.fixtures.nsys_builder import NsysBuilder
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"
PID = 4242
US = 1_000
LIBC = "libc.so.6"
TORCH_CPU = "libtorch_cpu.so"


def _export(variant: str) -> Path:
    return unpacked(DATA / variant) / f"{variant}.sqlite"


def _ms(r: RankMetrics, cls: str) -> float:
    assert r.idle_causes is not None
    return sum(c.ms_per_step for c in r.idle_causes.causes if c.cause == cls)


# --- pageable copies -------------------------------------------------------------------------
def test_pageable_copies_are_what_plain_sql_says() -> None:
    """Each copy with a pageable host side, with its runtime call, equals a plain SQL join; the
    pinned twin has none."""
    path = _export("img_pageable")
    got = pageable_copies.read(str(path), 0, 2**62)
    assert got is not None and got.start.size > 0
    db = sqlite3.connect(path)
    try:
        want = db.execute(
            "SELECT r.start, r.end, m.start, m.end, m.bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY m"
            " JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"
            " JOIN ENUM_CUDA_MEM_KIND k ON k.id = CASE m.copyKind WHEN 1 THEN m.srcKind"
            " WHEN 2 THEN m.dstKind END WHERE k.name LIKE '%PAGEABLE%' ORDER BY r.start"
        ).fetchall()
    finally:
        db.close()
    rows = list(zip(got.call_start.tolist(), got.call_end.tolist(), got.start.tolist(),
                    got.end.tolist(), got.nbytes.tolist(), strict=True))  # fmt: skip
    assert rows == [tuple(r) for r in want]
    assert bool(got.htod.any())
    pinned = pageable_copies.read(str(_export("img_pinned")), 0, 2**62)
    assert pinned is not None and pinned.start.size == 0


def test_a_runtime_table_too_big_to_scan_steps_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_RUNTIME_ROWS runtime rows the calls are not looked up: None (the evidence not
    read), never copies without their calls."""
    path = str(_export("img_pageable"))
    assert pageable_copies.read(path, 0, 2**62) is not None
    monkeypatch.setattr(pageable_copies, "MAX_RUNTIME_ROWS", 10)
    assert pageable_copies.read(path, 0, 2**62) is None


def test_an_export_without_memory_kinds_says_nothing(tmp_path: Path) -> None:
    """No ENUM_CUDA_MEM_KIND (its ids differ from CUPTI's own): no guess, None."""
    b = NsysBuilder(tmp_path / "x.sqlite", pid=PID, version="2024.2.3.38")
    b.add_thread(PID, "python3")
    b.add_memcpy(1_000_000, 1_100_000, 1, 1 << 20, launch=990_000)
    assert pageable_copies.read(str(b.close()), 0, 2**62) is None


def test_a_munmap_that_releases_a_mapped_storage_is_a_release() -> None:
    release = [("__munmap", LIBC), ("at::MapAllocator::close()", TORCH_CPU),
               ("THPStorage_dealloc(_object*)", "libtorch_python.so")]  # fmt: skip
    t = osrt_stacks.TARGETS
    assert t[osrt_stacks.target("munmap", release)[0]] == "release"
    # any other unmapping is no wait and no release: left out
    assert osrt_stacks.target("munmap", [("__munmap", LIBC), ("free", LIBC)])[0] == -1


def test_the_pageable_batch_s_host_side_goes_with_the_copies() -> None:
    """img_pageable: the main thread drops the worker's shared-memory batch right after each
    pageable copy (4.9 ms of munmap a step): claimed for the copies, whose finding costs the
    copies' GPU time plus that (the walls: 11.5 ms a step); img_pinned: none of it."""
    m = analyze_paths([unpacked(DATA / "img_pageable")])
    r = m.ranks[0]
    staging = _ms(r, "copy-staging")
    assert staging > 4.0
    assert r.idle_causes is not None and any(
        "releasing the mapped storage" in c.evidence and "MapAllocator" in c.evidence
        for c in r.idle_causes.causes
        if c.cause == "copy-staging"
    )
    first = advise(m)[0]
    assert first.rule == "host-device-copies" and first.cost_ms is not None
    assert first.cost_ms > staging
    pinned = analyze_paths([unpacked(DATA / "img_pinned")]).ranks[0]
    assert _ms(pinned, "copy-staging") == 0.0


# --- syncs ---------------------------------------------------------------------------------------
class _Loop:
    """A stand-in loop: each kernel launched `gap` after the last launch (a 1 µs runtime call),
    starting 4 µs after its launch or when the GPU is free."""

    def __init__(self, path: Path) -> None:
        self.b = NsysBuilder(path, pid=PID, version="2024.2.3.38")
        self.b.add_thread(PID, "python3")
        self.b.add_cuda_stream(7)
        self.b.add_gpu(0, "NVIDIA H200")
        self.t = 10_000_000
        self.gpu = self.t
        self.idle = 0  # the GPU's idle after its first kernel, by construction
        self.first = True

    def kernels(self, n: int, ns: int, gap: int, name: str = "k") -> None:
        for i in range(n):
            start = max(self.gpu, self.t + 4 * US)
            if not self.first:
                self.idle += start - self.gpu
            self.first = False
            self.b.add_kernel(start, start + ns, f"{name}_{i % 5}", launch=self.t)
            self.gpu = start + ns
            self.t += gap

    def sync(self, host_after: int) -> None:
        """`.item()`: wait until the GPU drains (+5 µs), then `host_after` of Python."""
        end = max(self.t, self.gpu) + 5 * US
        self.b.add_runtime(self.t, end, "cudaStreamSynchronize_v3020", tid=PID)
        self.t = end + host_after


def test_a_sync_costs_the_drain_and_the_late_launches_after_it(tmp_path: Path) -> None:
    """GPU-bound: 100 µs kernels launched every 10 µs (the host far ahead). Every step, four
    `.item()` checks each followed by 30 µs of Python and five 5-µs kernels launched 10 µs apart
    (the host behind until the long kernels queue up again): the idle each leaves is known by
    construction. Without the syncs none of it would be there: the sync class is that idle, not
    only the drain that begins inside the sync call."""
    lp = _Loop(tmp_path / "sync.sqlite")
    syncs = 0
    for _ in range(6):
        for _ in range(4):
            lp.kernels(10, 100 * US, 10 * US)
            lp.sync(30 * US)
            syncs += 1
            lp.kernels(5, 5 * US, 10 * US, name="small")
        lp.kernels(10, 100 * US, 10 * US)
    r = analyze_paths([lp.b.close()]).ranks[0]
    assert r.idle_causes is not None
    got = sum(c.total_ns for c in r.idle_causes.causes if c.cause == "sync")
    # every idle ns of this loop follows a sync (the host is otherwise far ahead)
    assert abs(got - lp.idle) <= 0.2 * lp.idle, (got, lp.idle)
    # the drain alone (the gap that begins in the call: 5 + 30 µs of host, 4 µs of launch)
    assert got > 1.3 * syncs * (5 + 30 + 4) * US


def test_syncs_on_a_launch_bound_loop_give_back_at_most_their_blocking(tmp_path: Path) -> None:
    """Launch-bound: 2 µs kernels launched every 10 µs, a sync after every 100: the host is
    always behind, a sync blocks it ~11 µs; removing the syncs gives back at most that, and the
    launch waits stay launch-bound."""
    lp = _Loop(tmp_path / "launch.sqlite")
    blocked = 0
    for _ in range(6):
        for _ in range(5):
            lp.kernels(100, 2 * US, 10 * US)
            t0 = lp.t
            lp.sync(0)
            blocked += lp.t - t0
    r = analyze_paths([lp.b.close()]).ranks[0]
    assert r.idle_causes is not None
    total = {c.cause: c.total_ns for c in r.idle_causes.causes}
    assert total.get("sync", 0) <= 1.05 * blocked
    assert total["launch-bound"] > 10 * total.get("sync", 0)


# --- input needs loading evidence ------------------------------------------------------------
def test_recurring_host_work_is_input_only_with_loading_in_it() -> None:
    """dl_clean (token ids drawn by one CPU operator, the loop's bookkeeping): recurring host
    work before each copy, no loading in it: no input. hf_w0 (tokenising in the Dataset, a
    tensor built from its Python lists) and img_input_w0 (sleeps in __getitem__): input."""
    clean = analyze_paths([unpacked(DATA / "dl_clean")]).ranks[0]
    assert _ms(clean, "input") == 0.0
    for v in ("hf_w0", "img_input_w0"):
        r = analyze_paths([unpacked(DATA / v)]).ranks[0]
        assert r.steps is not None and r.steps.p50_ns
        assert _ms(r, "input") > 0.25 * r.steps.p50_ns / 1e6


def test_loading_seen_reads_the_preambles_together() -> None:
    """One sample of loading in any preamble marks the steps' recurring work as loading
    (samples are sparse); none anywhere does not."""
    from orchestrator.analysis.families import idle_classes as C
    from orchestrator.analysis.families import idle_evidence as E

    n = 3
    z = np.zeros(n, dtype=np.int64)
    ev = E.Evidence(z, z + 10, z + 10, z.astype(bool), np.zeros((n, len(E.LABELS)), np.int64),
                    z - 1, z, z, np.zeros((n, len(E.AUTOGRAD_KINDS)), np.int64))  # fmt: skip
    ev.ns[:, E.L["s-host"]] = 5
    assert not C.loading_seen(ev, [0, 1, 2])
    ev.ns[2, E.L["s-data"]] = 1
    assert C.loading_seen(ev, [0, 1, 2])
    assert not C.loading_seen(ev, [0, 1])
    ev.ns[0, E.L["sleep"]] = 1
    assert C.loading_seen(ev, [0])
