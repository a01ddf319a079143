"""What a host thread waited for in its OS-runtime calls, from an nsys export's call stacks
(issue 35 item 1): `OSRT_API.callchainId` -> `OSRT_CALLCHAINS` (frames top first, their symbol
and module names in `StringIds`). nsys records a stack for each OS-runtime call that lasts
longer than `--osrt-backtrace-threshold` (80 µs by default) when CPU sampling is on; shorter
calls, and exports without sampling, have none (`callchainId` 0 or no such row).

Read only for the threads and windows asked (the GPU-idle intervals `idle_evidence` examines),
straight from the file, like `cpu_samples`: the timeline keeps no call stacks.

Each call gets a target (`TARGETS`), first rule that matches:
- `autograd`: the thread runs `backward()` and waits for autograd's engine
  (`torch::autograd::Engine::execute`, `ReadyQueue::pop` under `THPEngine_run_backward`): the
  main thread waiting for autograd's device threads to run the backward pass;
- `sync`: a CUDA synchronisation below the wait (`cuStreamSynchronize`, `cudaDeviceSynchronize`,
  `_local_scalar_dense`, ...);
- `comm`: a collective library below it (NCCL, gloo, `c10d::`, MPI);
- `sleep`: the call is a sleep (`nanosleep`, `clock_nanosleep`, `usleep`, `sleep`): the thread
  chose to wait (a Python `time.sleep`, a rate limit, a storage retry);
- `io`: a read of a file or socket (`read`, `pread`, `recv`, `open`, ...) with no lock below it;
- `python`: a wait the Python interpreter makes for a lock, a pipe or a queue
  (`PyThread_acquire_lock`, `select`/`poll` called from the interpreter's modules): what it
  waits for is named only by Python frames, which nsys 2024.2 does not export; a DataLoader's
  queue is one such wait;
- `lock`: any other wait on a condition variable, semaphore, mutex, poll or join;
- `release`: an unmapping (`munmap`) that releases a tensor's storage mapped from shared memory
  or a file (`at::MapAllocator`, `THPStorage_dealloc` below it): a batch a DataLoader worker
  process made, dropped by the thread that holds it. Other unmappings are not read (the thread
  runs: its scheduling says so).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.readers import export_tables
from orchestrator.analysis.readers.cpu_samples import COMM, SYNC, short
from orchestrator.analysis.readers.sql_integers import a_time, int_or, integral

TARGETS = ("autograd", "sync", "comm", "sleep", "io", "python", "lock", "release")
DEPTH = 48
CHUNK = 500
MAX_CALLS = 20_000  # calls whose stacks are read per export
SLEEPS = frozenset({"nanosleep", "clock_nanosleep", "usleep", "sleep"})
IO = frozenset({"read", "pread", "pread64", "readv", "preadv", "recv", "recvfrom", "recvmsg",
                "open", "open64", "openat", "fread", "fopen", "fopen64"})  # fmt: skip
WAITS = frozenset(
    {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait", "sem_wait",
     "sem_timedwait", "sem_clockwait", "pthread_mutex_lock", "pthread_mutex_timedlock",
     "pthread_join", "poll", "ppoll", "select", "pselect", "pselect6", "epoll_wait",
     "epoll_pwait", "futex", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock"}
)  # fmt: skip
RELEASES = frozenset({"munmap"})
STORAGE_RELEASE = re.compile(r"MapAllocator|THPStorage_dealloc|StorageImpl::release_resources")
AUTOGRAD = re.compile(r"torch::autograd::(Engine::execute|Engine::thread_main|ReadyQueue::pop)")
PYTHON_WAIT = re.compile(
    r"PyThread_acquire_lock|acquire_timed|lock_PyThread|select_poll|select_select|poll_poll"
    r"|_multiprocessing|Connection|_queue|queue_get"
)
INTERPRETER = re.compile(r"\[(libpython[\d.]*\.so[\d.]*|python[\d.]*)\]$|^_?Py[A-Z]")


@dataclass
class Calls:
    """OS-runtime calls of some threads inside some windows, sorted by start."""

    start: Any  # int64 ns
    end: Any
    pid: Any
    tid: Any
    target: Any  # int8: index into TARGETS
    func: list[str]
    frame: list[str]  # the frame that decided the target ('' when the call's name did)


def _open(path: str) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


_TABLES = ("OSRT_API", "OSRT_CALLCHAINS", "StringIds")


def _tables(db: sqlite3.Connection) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The columns of each table read (by gh-run's key) and the export's name for it: each
    table by whatever name the export gives it (a versioned name, another case), as the main
    reader resolves them (`export_tables`)."""
    schema = export_tables.read_schema(db, _TABLES)
    names = {k: schema.name(k) for k in _TABLES if k in schema}
    return {k: {c[1] for c in db.execute(f'PRAGMA table_info("{n}")')}
            for k, n in names.items()}, names  # fmt: skip


def target(func: str, frames: list[tuple[str, str]]) -> tuple[int, str]:
    """(index into TARGETS, the deciding frame) of one call: its function and its stack, top
    first, as (symbol, module file name) pairs; -1 for an unmapping that releases no tensor
    storage (not a wait: left out)."""
    if func in RELEASES:
        got = next((sym for sym, _ in frames if STORAGE_RELEASE.search(sym)), None)
        return (TARGETS.index("release"), got) if got else (-1, "")
    for sym, _ in frames:
        if AUTOGRAD.search(sym):
            return 0, sym
    for gi, rx in ((1, SYNC), (2, COMM)):
        for sym, _ in frames:
            if rx.search(sym):
                return gi, sym
    if func in SLEEPS:
        return 3, ""
    texts = [f"{s} [{m}]" for s, m in frames]
    python = next((s for (s, _), t in zip(frames, texts, strict=True)
                   if PYTHON_WAIT.search(s) or INTERPRETER.search(t)), None)  # fmt: skip
    if func in IO and python is None:
        return 4, ""
    if python is not None and (func in WAITS or func in IO):
        return 5, python
    return 6, ""


def read(
    path: str, starts: Any, ends: Any, threads: set[tuple[int, int]], min_ns: int = 0
) -> Calls | None:
    """The blocking, sleeping, reading and storage-releasing OS-runtime calls (`WAITS`,
    `SLEEPS`, `IO`, `RELEASES`) of
    `threads` (pid, tid) that overlap the windows [starts[i], ends[i]) and last at least
    `min_ns`, each with its target; None when the export has no OS-runtime table. The stacks of
    at most `MAX_CALLS` calls are read (the longest first); the others keep the target their
    function name gives."""
    if starts.size == 0 or not threads:
        return None
    try:
        with _open(path) as db:
            cols, table = _tables(db)
            api = cols.get("OSRT_API", set())
            if not {"start", "end", "globalTid", "nameId"} <= api or "StringIds" not in cols:
                return None
            wanted = sorted(WAITS | SLEEPS | IO | RELEASES)
            marks = ",".join("?" * len(wanted))
            ids = {int(i): str(v) for i, v in db.execute(
                f'SELECT id, value FROM "{table["StringIds"]}" WHERE value IN ({marks})'
                f" AND {integral('id')}",
                wanted)}  # fmt: skip
            if not ids:
                return _empty()
            # a hostile export's value of another kind: its call is left out (times, thread),
            # or has no stack (its callchain id)
            chain = int_or("callchainId", 0) if "callchainId" in api else "0"
            # (nameId is matched against integers below: nothing else passes)
            whole = " AND ".join((a_time("start"), a_time('"end"'), integral("globalTid")))
            lo, hi = int(starts.min()), int(ends.max())
            tids = sorted({t for _, t in threads})
            rows = db.execute(
                f'SELECT start, "end", globalTid, nameId, {chain} FROM "{table["OSRT_API"]}"'
                f" WHERE nameId IN ({','.join(str(i) for i in ids)}) AND {whole}"
                f' AND "end" > ? AND start < ? AND "end" - start >= ?'
                f" AND (globalTid & 16777215) IN ({','.join(str(t) for t in tids)})"
                " ORDER BY start",
                (lo, hi, int(min_ns)),
            ).fetchall()
            if not rows:
                return _empty()
            arr = np.array([r[:3] for r in rows], dtype=np.int64)
            pid, tid = (arr[:, 2] >> 24) & 0xFFFFFF, arr[:, 2] & 0xFFFFFF
            keep = np.fromiter(((int(p), int(t)) in threads for p, t in zip(pid, tid, strict=True)),
                               dtype=bool, count=pid.size)  # fmt: skip
            s, e = arr[:, 0], arr[:, 1]
            order = np.argsort(starts, kind="stable")
            ws, we = starts[order], ends[order]
            # the windows are disjoint: a call meets one when the last window that starts
            # before the call ends has not ended before the call starts
            k = np.searchsorted(ws, e, side="left") - 1
            inside = (k >= 0) & (we[np.maximum(k, 0)] > s)
            sel = np.flatnonzero(keep & inside)
            funcs = [ids[int(rows[i][3])] for i in sel.tolist()]
            chain_ids = [int(rows[i][4] or 0) for i in sel.tolist()]
            frames = _chains(db, cols, table, chain_ids, e[sel] - s[sel])
    except sqlite3.Error:
        return None
    tgt = np.empty(sel.size, dtype=np.int8)
    decided: list[str] = []
    for j, (f, cid) in enumerate(zip(funcs, chain_ids, strict=True)):
        g, why = target(f, frames.get(cid, []))
        tgt[j] = g
        decided.append(short(why) if why else "")
    ok = tgt >= 0
    idx = sel[ok]
    return Calls(
        s[idx], e[idx], pid[idx], tid[idx], tgt[ok],
        [f for f, k in zip(funcs, ok.tolist(), strict=True) if k],
        [d for d, k in zip(decided, ok.tolist(), strict=True) if k],
    )  # fmt: skip


def _chains(
    db: sqlite3.Connection,
    cols: dict[str, set[str]],
    table: dict[str, str],
    ids: list[int],
    lens: Any,
) -> dict[int, list[tuple[str, str]]]:
    """Frames (symbol, module file name) of the callchains `ids`, the longest calls' first."""
    if (
        "OSRT_CALLCHAINS" not in cols
        or not {"id", "symbol", "module", "stackDepth"} <= cols["OSRT_CALLCHAINS"]
    ):
        return {}
    picked: dict[int, None] = {}
    for i in np.argsort(-np.asarray(lens), kind="stable").tolist():
        if ids[i] and len(picked) < MAX_CALLS:
            picked.setdefault(ids[i])
    want = sorted(picked)
    raw: dict[int, list[tuple[int, int]]] = {}
    for i in range(0, len(want), CHUNK):
        part = want[i : i + CHUNK]
        marks = ",".join("?" * len(part))
        for cid, sym, mod in db.execute(
            f"SELECT id, {int_or('symbol', -1)}, {int_or('module', -1)}"
            f' FROM "{table["OSRT_CALLCHAINS"]}" WHERE id IN ({marks})'
            f" AND stackDepth < {DEPTH} ORDER BY id, stackDepth",
            part,
        ):
            raw.setdefault(int(cid), []).append((int(sym), int(mod)))
    need = sorted({x for c in raw.values() for pair in c for x in pair})
    strings: dict[int, str] = {}
    for i in range(0, len(need), CHUNK):
        part = need[i : i + CHUNK]
        marks = ",".join("?" * len(part))
        strings.update((int(a), str(b)) for a, b in db.execute(
            f'SELECT id, value FROM "{table["StringIds"]}" WHERE id IN ({marks})'
            " AND typeof(value) = 'text'",
            part))  # fmt: skip
    return {
        cid: [(strings.get(s, ""), strings.get(m, "").rsplit("/", 1)[-1]) for s, m in frames]
        for cid, frames in raw.items()
    }


def _empty() -> Calls:
    z = np.zeros(0, dtype=np.int64)
    return Calls(z, z, z, z, np.zeros(0, dtype=np.int8), [], [])
