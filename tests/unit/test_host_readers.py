"""The readers of what the host did (issue 35 items 1 and 6): what an OS-runtime call waited for
by its stack (`osrt_stacks`), when a thread was on a CPU (`sched_events`), and the profiler's own
overhead records (`nsys_overhead`), on a real export (tests/data/unannotated, nsys 2024.2.3 with
stacks and scheduling) and on small SQLite files written here in the export's schema (newer
exports' CUPTI_ACTIVITY_KIND_OVERHEAD included), checked against plain SQL."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import numpy as np

from orchestrator.analysis.readers import nsys_overhead, osrt_stacks, sched_events
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "unannotated"
LIBC, PY, TORCH = "libc.so.6", "python3.12", "libtorch_cpu.so"


def test_targets_by_stack() -> None:
    t = osrt_stacks.TARGETS
    autograd = [("pthread_cond_wait", LIBC), ("torch::autograd::ReadyQueue::pop()", TORCH),
                ("torch::autograd::Engine::execute", TORCH)]  # fmt: skip
    assert t[osrt_stacks.target("pthread_cond_wait", autograd)[0]] == "autograd"
    sync = [("pthread_cond_wait", LIBC), ("cuStreamSynchronize", "libcuda.so.1")]
    assert t[osrt_stacks.target("pthread_cond_wait", sync)[0]] == "sync"
    assert t[osrt_stacks.target("clock_nanosleep", [("clock_nanosleep", LIBC)])[0]] == "sleep"
    assert t[osrt_stacks.target("read", [("read", LIBC), ("main", "a.out")])[0]] == "io"
    queue = [("poll", LIBC), ("select_poll_poll", PY), ("_PyEval_EvalFrameDefault", PY)]
    assert t[osrt_stacks.target("poll", queue)[0]] == "python"
    assert t[osrt_stacks.target("pthread_mutex_lock", [("x", "libapp.so")])[0]] == "lock"
    # no stack: the call's name alone
    assert t[osrt_stacks.target("nanosleep", [])[0]] == "sleep"
    assert t[osrt_stacks.target("pthread_cond_wait", [])[0]] == "lock"


def test_the_main_threads_backward_waits_on_a_recording() -> None:
    """sft_w0's main thread waits in backward() for autograd's device thread: its stacks say so
    (the export's own rows, counted with plain SQL)."""
    path = next(unpacked(DATA / "nsys" / "sft_w0").glob("*.sqlite"))
    with contextlib.closing(sqlite3.connect(path)) as db:
        pid = db.execute(
            "SELECT DISTINCT (globalTid >> 24) & 16777215 FROM OSRT_API WHERE"
            " (globalTid >> 24) & 16777215 = globalTid & 16777215"
        ).fetchone()[0]
        want = db.execute(
            "SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId WHERE"
            " s.value = 'pthread_cond_wait' AND (o.globalTid & 16777215) = ?"
            ' AND o."end" - o.start >= 100000',
            (pid,),
        ).fetchone()[0]
    calls = osrt_stacks.read(str(path), np.array([0]), np.array([1 << 60]), {(pid, pid)}, 100_000)
    assert calls is not None
    waits = [f for f in calls.func if f == "pthread_cond_wait"]
    assert len(waits) == want > 0
    autograd = osrt_stacks.TARGETS.index("autograd")
    assert int((calls.target == autograd).sum()) >= 1
    assert any("ReadyQueue::pop" in f for f in calls.frame)


def test_on_cpu_follows_the_switches(tmp_path: Path) -> None:
    path = tmp_path / "sched.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE SCHED_EVENTS (start INTEGER, cpu INTEGER, isSchedIn INTEGER,"
                   " globalTid INTEGER)")  # fmt: skip
        g = (7 << 24) | 9
        db.executemany("INSERT INTO SCHED_EVENTS VALUES (?,0,?,?)",
                       [(100, 1, g), (200, 0, g), (300, 1, g), (450, 0, g)])  # fmt: skip
    s, e = sched_events.on_cpu(str(path), (7, 9), 150, 500) or (None, None)
    assert s is not None and e is not None
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == [(150, 200), (300, 450)]
    assert sched_events.on_cpu(str(path), (7, 10), 0, 500) is None


def test_overhead_tables_old_and_new(tmp_path: Path) -> None:
    """PROFILER_OVERHEAD (every version here) and CUPTI_ACTIVITY_KIND_OVERHEAD (2025 exports:
    start, end, eventClass, globalTid, correlationId, nameId, overheadType), clipped to the
    window, of the process asked."""
    path = tmp_path / "over.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        db.executemany("INSERT INTO StringIds VALUES (?,?)",
                       [(1, "CUPTI: Buffer flush"), (2, "CUPTI overhead")])  # fmt: skip
        db.execute('CREATE TABLE PROFILER_OVERHEAD (start INTEGER, "end" INTEGER,'
                   " globalTid INTEGER, nameId INTEGER, returnValue INTEGER)")  # fmt: skip
        db.execute('CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (start INTEGER, "end" INTEGER,'
                   " eventClass INTEGER, globalTid INTEGER, correlationId INTEGER,"
                   " nameId INTEGER, overheadType INTEGER)")  # fmt: skip
        mine, other = (5 << 24) | 5, (6 << 24) | 6
        db.executemany("INSERT INTO PROFILER_OVERHEAD VALUES (?,?,?,1,0)",
                       [(50, 150, mine), (200, 300, other)])  # fmt: skip
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_OVERHEAD VALUES (400, 600, 0, ?, 0, 2, 1)",
                   (mine,))  # fmt: skip
    rows = nsys_overhead.read(str(path), 5, 100, 500)
    assert rows == [(100, 150, "CUPTI: Buffer flush"), (400, 500, "CUPTI overhead")]
    assert nsys_overhead.read(str(tmp_path / "none.sqlite"), 5, 0, 1) is None
