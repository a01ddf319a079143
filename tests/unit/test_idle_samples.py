"""Why the GPU waits, from the CPU samples of an nsys export (issue 28 item 2): what the main
thread's samples inside each GPU-idle interval ran, and whether the DataLoader's worker threads
ran meanwhile.

On the committed recordings (tests/data/unannotated: nsys 2024.2 with CPU sampling and call
chains; the README says what each holds) and on synthetic exports written here (a SQLite file
with only the sampling tables, beside a synthetic timeline), so that the rules are not fitted to
our four recordings: a main thread blocked in a queue's lock while a worker thread is busy, the
same without a worker, data-loading frames, the launch path.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.analysis.families import idle_causes
from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.readers import cpu_samples
from orchestrator.analysis.timeline import model as T
from tests.fixtures.recordings import unpacked
from tests.unit.test_step_rules import FWD_BWD, MAIN, _gaps, loop, timeline

DATA = Path(__file__).resolve().parents[1] / "data" / "unannotated"
WORKER = (100, 123)


def _counts(evidence: str) -> tuple[int, int]:
    m = re.search(r"samples: (\d+) of (\d+) main-thread samples", evidence)
    assert m is not None, evidence
    return int(m.group(1)), int(m.group(2))


# --- the recordings -----------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["sft_w0", "convnet_w0"])
def test_input_on_the_main_thread_is_answered_by_its_samples(variant: str) -> None:
    """At workers 0 the main thread makes the batch: its samples in the long gaps are host code
    (the interpreter, libc, numpy: what it ran, not for whom), no worker thread ran, and that
    host work recurs before each batch's copy: the recurrence says it is the batch's."""
    r = analyze_paths([unpacked(DATA / "nsys" / variant)]).ranks[0]
    assert r.idle_causes is not None
    top = r.idle_causes.causes[0]
    assert top.cause == "input"
    assert "CPU samples" in r.idle_causes.evidence_read
    assert top.evidence.startswith(f"{top.gaps} intervals: recurs before each batch's copy: ")
    assert "ran host code (`" in top.evidence  # the frames are named
    assert r.idle_causes.preambles >= 3 and r.idle_causes.baseline_ms is not None
    assert abs(r.idle_causes.baseline_ms - top.ms_per_step) < 0.1 * top.ms_per_step
    # what else the window holds is never input: nothing beyond the recurring part
    assert all(c.cause != "host-compute" or c.ms_per_step < 1.0 for c in r.idle_causes.causes)


@pytest.mark.parametrize("variant", ["sft_w4", "convnet_w4"])
def test_at_workers_4_the_samples_find_no_input(variant: str) -> None:
    r = analyze_paths([unpacked(DATA / "nsys" / variant)]).ranks[0]
    assert r.idle_causes is not None
    assert sum(c.ms_per_step for c in r.idle_causes.causes if c.cause == "input") < 2.0


def test_kineto_has_no_samples_and_keeps_its_ranges() -> None:
    r = analyze_paths([DATA / "kineto" / "sft_w0"]).ranks[0]
    assert r.idle_causes is not None
    top = r.idle_causes.causes[0]
    assert top.cause == "input" and "ranges: data loading (`" in top.evidence
    assert "enumerate(DataLoader)" in top.evidence
    assert r.idle_causes.evidence_read == []
    assert all("samples:" not in c.evidence for c in r.idle_causes.causes)


def test_the_reader_matches_sqlite_on_a_recording() -> None:
    """The reader's samples inside a window are the export's rows (a plain SQL count)."""
    path = next(unpacked(DATA / "nsys" / "sft_w0").glob("*.sqlite"))
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        lo, hi = db.execute("SELECT min(start), max(start) FROM COMPOSITE_EVENTS").fetchone()
        mid = (lo + hi) // 2
        want = db.execute(
            "SELECT count(*) FROM COMPOSITE_EVENTS WHERE start >= ? AND start < ?", (lo, mid)
        ).fetchone()[0]
    got = cpu_samples.read(str(path), np.array([lo]), np.array([mid]))
    assert got is not None and got.start.size == want
    assert bool((np.diff(got.start) >= 0).all())
    # one thread's: the same rows as every thread's, kept for that thread
    pid, tid = int(got.pid[0]), int(got.tid[0])
    one = cpu_samples.read(str(path), np.array([lo]), np.array([mid]), thread=(pid, tid))
    mine = (got.pid == pid) & (got.tid == tid)
    assert one is not None and 0 < one.start.size < got.start.size
    assert one.start.tolist() == got.start[mine].tolist()
    assert one.group.tolist() == got.group[mine].tolist()


# --- synthetic exports --------------------------------------------------------------------------
def _export(path: Path, samples: list[tuple[int, tuple[int, int], list[tuple[str, str]]]]) -> None:
    """A SQLite file with nsys's sampling tables only: (time, (pid, tid), frames top first as
    (symbol, module))."""
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        return strings.setdefault(s, len(strings) + 1)

    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE COMPOSITE_EVENTS (id INTEGER PRIMARY KEY, start INTEGER NOT NULL,"
            " cpu INTEGER, threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL)"
        )
        db.execute(
            "CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL,"
            " module INTEGER NOT NULL, stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth))"
        )
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        for i, (t, (pid, tid), frames) in enumerate(samples, start=1):
            db.execute(
                "INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, 0, 1, ?, 1)", (i, t, (pid << 24) | tid)
            )
            for depth, (sym, mod) in enumerate(frames):
                db.execute(
                    "INSERT INTO SAMPLING_CALLCHAINS VALUES (?, ?, ?, ?)",
                    (i, sid(sym), sid(mod), depth),
                )
        db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(v, k) for k, v in strings.items()])


PY = "/usr/lib/libpython3.11.so.1.0"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
QUEUE_WAIT = [("__futex_abstimed_wait_common", LIBC), ("pthread_cond_timedwait", LIBC),
              ("PyThread_acquire_lock_timed", PY), ("_PyEval_EvalFrameDefault", PY)]  # fmt: skip
WORKER_BUSY = [("_PyEval_EvalFrameDefault", PY), ("PyObject_Call", PY)]
DATA_FRAMES = [("ImagingResample", "/site-packages/PIL/_imaging.so"),
               ("_PyEval_EvalFrameDefault", PY)]  # fmt: skip
CUDA = "/usr/lib/libcuda.so.1"
TORCH = "/torch/lib/libtorch_cpu.so"
MPI = [("PMPI_Waitall", "/usr/lib/libmpi.so.40"), ("main", "/app/a.out")]
LAUNCH = [("0x7f0000001000", CUDA), ("cuLaunchKernel", CUDA),
          ("at::_ops::add_Tensor::call(at::Tensor const&)", TORCH)]  # fmt: skip


def _attribute(tmp_path: Path, main_frames: list[tuple[str, str]], worker: bool) -> Any:
    kernels, gaps = loop(4, FWD_BWD, 5_000_000)
    tl = timeline(kernels)
    samples = []
    for a, b in gaps:
        for t in range(a + 250_000, b, 500_000):  # every 0.5 ms: 10 a gap
            samples.append((t, MAIN, main_frames))
            if worker:
                samples.append((t + 1_000, WORKER, WORKER_BUSY))
    path = tmp_path / "export.sqlite"
    _export(path, samples)
    tl.source = T.SourceInfo(path=str(path), kind="nsys-sqlite")
    tl.threads = {MAIN: "python3", WORKER: "pt_data_worker"}
    gs, ge = _gaps(tl)
    return idle_causes.attribute(tl, tl.gpu, gs, ge, int((ge - gs).sum()), [], MAIN)


@pytest.mark.parametrize(
    ("frames", "worker", "cause", "says"),
    [
        (QUEUE_WAIT, True, "input", "the main thread waited while DataLoader worker threads ran"),
        (QUEUE_WAIT, False, "unclassified", "waits with no target or ambiguous host work 100 %"),
        (DATA_FRAMES, False, "input", "samples: data-loading frames (`ImagingResample`)"),
        (LAUNCH, False, "launch-bound", "samples: the launch path (`cuLaunchKernel`)"),
        (MPI, False, "communication", "in communication libraries (`PMPI_Waitall`)"),
    ],
)
def test_the_main_threads_samples_answer_each_interval(
    tmp_path: Path, frames: list[tuple[str, str]], worker: bool, cause: str, says: str
) -> None:
    """No OS-runtime row, no range, no copy after the gaps: only the samples can answer. A wait
    on a queue's lock with no worker running names nothing: no cause is claimed."""
    causes = _attribute(tmp_path, frames, worker)
    assert causes is not None
    top = causes.causes[0]
    assert top.cause == cause and top.gaps == 3
    assert says in top.evidence


def test_without_samples_nothing_is_claimed(tmp_path: Path) -> None:
    """An export without the sampling tables: the reader reads nothing, and with no other
    evidence the intervals stay unclassified (the old rules inferred host compute)."""
    path = tmp_path / "plain.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    assert cpu_samples.read(str(path), np.array([0]), np.array([10])) is None
    kernels, _ = loop(4, FWD_BWD, 5_000_000)
    tl = timeline(kernels)
    tl.source = T.SourceInfo(path=str(path), kind="nsys-sqlite")
    gs, ge = _gaps(tl)
    causes = idle_causes.attribute(tl, tl.gpu, gs, ge, int((ge - gs).sum()), [], MAIN)
    assert causes is not None and causes.causes[0].cause == "unclassified"
    assert "nothing recorded" in causes.causes[0].evidence


def test_frames_group_by_what_they_ran() -> None:
    g = cpu_samples.GROUPS
    mods = lambda fs: [(s, m.rsplit("/", 1)[-1]) for s, m in fs]  # noqa: E731
    assert g[cpu_samples.group(mods(QUEUE_WAIT))[0]] == "wait"
    assert g[cpu_samples.group(mods(DATA_FRAMES))[0]] == "data"
    assert g[cpu_samples.group(mods(LAUNCH))[0]] == "launch"
    # numerical libraries are what ran, not whose: a loss's logging runs them as an augmentation
    numpy = [("npy_quicksort", "_multiarray_umath.cpython-312-x86_64-linux-gnu.so")]
    assert g[cpu_samples.group(numpy)[0]] == "other"
    # torch's dispatcher without the CUDA libraries runs a CPU operator, not a launch
    assert g[cpu_samples.group([("at::_ops::stack::call", "libtorch_cpu.so")])[0]] == "other"
    assert g[cpu_samples.group(mods(WORKER_BUSY))[0]] == "interpreter"
    sync = [("0x1", "libcuda.so.1"), ("cuStreamSynchronize", "libcuda.so.1")]
    assert g[cpu_samples.group(sync)[0]] == "sync"
    assert g[cpu_samples.group([("at::native::add_kernel", "libtorch_cpu.so")])[0]] == "other"
    assert (
        g[cpu_samples.group([("cxip_cq_progress", "libfabric.so.1"), ("main", "a")])[0]] == "comm"
    )
    # a Python frame (where an export names them) counts by its function's name
    assert g[cpu_samples.group([("collate", "worker.py"), ("x", "y")])[0]] == "data"
    assert cpu_samples.short("void at::native::f<a<b>, c>(at::T&, long)") == "at::native::f"
    assert cpu_samples.workers({(1, 2): "pt_data_worker", (1, 3): "python3"}) == {(1, 2)}
