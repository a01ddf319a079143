"""The host side of an nsys export: the CUDA synchronisation calls, NVTX ranges, OS-runtime
calls and thread names, into one `HostTable`; and which processes the trace recorded.

- CUPTI_ACTIVITY_KIND_RUNTIME: the synchronisation calls (and the profiler's start and stop),
  their rowids gathered by the runtime table's read (`sync_subset`);
- NVTX_EVENTS (`nsys_nvtx`: the workload's, libraries' and PyTorch's operator ranges),
  OSRT_API, ThreadNames;
- TARGET_INFO_CUDA_STREAM / TARGET_INFO_CUDA_CONTEXT_INFO (the processes that own CUDA streams:
  their main thread is the one whose waits are measured).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from orchestrator.analysis.readers import nsys_nvtx
from orchestrator.analysis.readers.nsys_db import (
    KERNEL,
    MEMCPY,
    MEMSET,
    NVTX,
    OSRT,
    RUNTIME,
    Db,
    Export,
    map_ids,
    pid_tid,
)
from orchestrator.analysis.readers.sql_integers import a_time
from orchestrator.analysis.readers.sqlite_columns import END, Subset, fetch_columns
from orchestrator.analysis.timeline import columns
from orchestrator.analysis.timeline import model as T

# the runtime calls kept as host rows: the synchronisation calls, and the profiler's start and
# stop (a cudaProfilerApi capture's window: `step_rules`), gathered in one scan
SYNC_PATTERNS = (
    "cuda%Synchronize%",
    "cu%Synchronize%",
    "cudaStreamWaitEvent%",
    "cuStreamWaitEvent%",
    "cudaProfilerStart%",
    "cuProfilerStart%",
    "cudaProfilerStop%",
    "cuProfilerStop%",
)


def read(
    ex: Export, seen: set[int], sync: Any
) -> tuple[T.HostTable, dict[tuple[int, int], str], bool]:
    """Synchronisation calls (`sync()`: the HostTable, once the runtime read that gathers
    them is done), NVTX ranges and OS-runtime calls; thread names; whether the export traced
    OS-runtime calls. `seen`: processes already known to be traced (CUDA contexts, GPU
    rows)."""
    os_calls, osrt_traced = osrt(ex)
    host = T.concat_host([sync(), nvtx(ex), os_calls])
    seen = seen | {int(p) for p in np.unique(host.pid).tolist()}
    return host, thread_names(ex, seen - {0}), osrt_traced


def sync_ids(ex: Export) -> dict[int, str]:
    """StringIds of the CUDA synchronisation functions (SYNC_PATTERNS) -> their names."""
    db = ex.db
    if not db.has(RUNTIME, "start", "end", "nameId") or "StringIds" not in db.tables:
        return {}
    where = " OR ".join("value LIKE ?" for _ in SYNC_PATTERNS)
    return {
        int(i): str(v)
        for i, v in db.q(
            f'SELECT id, value FROM "{db.name("StringIds")}" WHERE {where}', SYNC_PATTERNS
        )
        if isinstance(i, int)
    }


def sync_subset(ids: dict[int, str]) -> Subset:
    """The rowids of the synchronisation calls, gathered by the runtime read (`fetch_into`):
    one condition a row in that scan costs less than a scan of its own."""
    return Subset("nameId", tuple(sorted(ids)), (("rowid", 0),))


def sync_calls(ex: Export, ids: dict[int, str], rowids: Any) -> T.HostTable:
    """The CUDA synchronisation calls (runtime rows whose function is one of SYNC_PATTERNS)
    among `rowids` (gathered by the runtime read: `sync_subset`)."""
    if not ids or not rowids.size:
        return T.HostTable.empty()
    tid = "globalTid" if "globalTid" in ex.db.cols(RUNTIME) else "0"
    sql = (
        'SELECT CAST(start AS INTEGER), CAST("end" AS INTEGER),'
        f' CAST(coalesce({tid}, 0) AS INTEGER), nameId FROM "{ex.table(RUNTIME)}"'
        f" WHERE nameId IN ({','.join(str(int(i)) for i in ids)})"
        f' AND {a_time("start")} AND {a_time(END)} AND "end" >= start'
    )
    rows = ex.db.q(
        sql + " AND rowid IN (SELECT value FROM json_each(?))"
        ' ORDER BY start, "end", 3, nameId',  # time, never the stored order
        (json.dumps(rowids.tolist()),),
    )
    return host_rows(ex, rows, T.CUDA_API, lambda v: ids.get(v, str(v)))


def host_rows(ex: Export, rows: list[tuple[Any, ...]], kind: int, name: Any) -> T.HostTable:
    """A HostTable of (start, end, globalTid, name value) rows; `name` maps a value to text."""
    if not rows:
        return T.HostTable.empty()
    s, e, gt, nm = zip(*rows, strict=True)
    pid, tid = pid_tid(np.array(gt, dtype=np.int64))
    ids = ex.names.id
    for text in sorted({name(x) for x in nm}):  # ids in name order, not row order
        ids(text)
    return T.HostTable(
        start=np.array(s, dtype=np.int64),
        end=np.array(e, dtype=np.int64),
        pid=pid,
        tid=tid,
        kind=np.full(len(s), kind, dtype=np.int8),
        name=np.fromiter((ids(name(x)) for x in nm), np.int32, len(nm)),
    )


def nvtx(ex: Export) -> T.HostTable:
    """NVTX ranges: the workload's (ANNOTATION), a library's (LIBRARY_ANNOTATION) and PyTorch's
    operators (CPU_OP): `nsys_nvtx`."""
    return nsys_nvtx.ranges(ex)


def osrt(ex: Export) -> tuple[T.HostTable, bool]:
    db = ex.db
    if not db.has(OSRT, "start", "end", "globalTid", "nameId"):
        ex.missing.append(OSRT)
        return T.HostTable.empty(), False
    s, e, gt, nid = fetch_columns(ex.path, ex.table(OSRT), ["start", "end", "globalTid", "nameId"])
    distinct = columns.distinct(nid)
    strs = db.strings(distinct)
    lut = {i: ex.names.id(strs.get(i, str(i))) for i in distinct}
    pid, tid = pid_tid(gt)
    del gt
    # tid 0 is no thread of the process: nsys puts its own markers there ("OS runtime
    # libraries profiling started"), which would list a "thread 0"
    real = tid != 0
    if not bool(real.all()):
        s, e, pid, tid, nid = s[real], e[real], pid[real], tid[real], nid[real]
    kind = np.full(s.size, T.OSRT, dtype=np.int8)
    return T.HostTable(s, e, pid, tid, kind, map_ids(nid, lut)), True


def thread_names(ex: Export, seen: set[int]) -> dict[tuple[int, int], str]:
    """ThreadNames, and every thread with OS-runtime calls (listed even without a name).
    When every named process is among `seen` (traced processes already read: a subset of
    `traced_pids`) none is left out, so the scans of `traced_pids` (seconds on a large
    export) are only made when a name may belong to an untraced process."""
    db = ex.db
    out: dict[tuple[int, int], str] = {}
    if db.has("ThreadNames", "nameId", "globalTid"):
        # a thread named twice: the name of the highest priority, then the lowest string id
        # (never the first row stored: row order is storage, not time); nsys's launcher's name
        # only where the thread has no other (`_launcher_last`)
        order = "priority DESC, " if "priority" in db.cols("ThreadNames") else ""
        rows = [r for r in db.q(f'SELECT globalTid, nameId FROM "{db.name("ThreadNames")}"'
                                f" ORDER BY globalTid, {order}nameId")
                if isinstance(r[0], int)]  # fmt: skip
        strs = db.strings(r[1] for r in rows)
        named = {int(pid_tid(gtid)[0]) for gtid, _ in rows}
        traced = seen if named <= seen else traced_pids(ex.db)
        for gtid, nid in _launcher_last(rows, strs):
            p, t = pid_tid(gtid)
            if traced and int(p) not in traced:
                continue
            out.setdefault((int(p), int(t)), strs.get(nid, ""))
        _exec_names(db, out)
    return out


def _exec_names(db: Db, out: dict[tuple[int, int], str]) -> None:
    """A main thread (tid == pid) named only `NSYS_LAUNCHER` was named before its exec and never
    again (under load, nsys 2022.4 and 2024.2 recordings of one small workload, seen here). The
    kernel names a thread at exec after the file it runs (its basename, cut to 15 bytes:
    TASK_COMM_LEN), and PROCESSES holds that file: so that name, where PROCESSES names another
    program for the process. Without PROCESSES, or naming the launcher, the name stays."""
    launched = [k for k, name in out.items() if name == NSYS_LAUNCHER and k[0] == k[1]]
    if not launched or not db.has("PROCESSES", "pid", "name"):
        return
    table = db.name("PROCESSES")
    for key in launched:
        row = next(iter(db.q(f'SELECT name FROM "{table}" WHERE pid = ? LIMIT 1', (key[0],))), None)
        exe = row[0].rstrip("/").rsplit("/", 1)[-1] if row and isinstance(row[0], str) else ""
        if exe and exe != NSYS_LAUNCHER:
            out[key] = exe.encode()[:15].decode(errors="ignore")


# nsys starts the workload through its launcher: a child of `nsys-launcher` carries that name
# until it execs the workload, so an export may name the workload's main thread both ways,
# under one priority and in either string order. (Seen here: under load, nsys 2022.4 and 2023.4
# recordings of one small workload sometimes had gh-run name its main thread `nsys-launcher`;
# twelve quiet recordings named it once, as the interpreter.)
NSYS_LAUNCHER = "nsys-launcher"


def _launcher_last(rows: list[tuple[int, int]], strs: dict[int, str]) -> list[tuple[int, int]]:
    """`rows` (globalTid, nameId) in their order, except that a thread's `NSYS_LAUNCHER` name
    comes after its other names: the name before exec is never the thread's when it has the
    one after. A thread named only so keeps it (the launcher process itself)."""
    return sorted(rows, key=lambda r: (r[0], strs.get(r[1]) == NSYS_LAUNCHER))


def traced_pids(db: Db) -> set[int]:
    """Processes the trace recorded calls of (OS runtime, NVTX, CUDA API, GPU work, CUDA
    contexts). Real exports name far more: with CPU sampling or context-switch tracing,
    ThreadNames lists every thread of the machine (kernel workers, shells, nsys's own
    daemons, other users' python3 processes: measured with nsys 2022.4 and 2023.4), so the
    threads and the main thread are looked for among the traced processes only."""
    pids = cuda_pids(db)
    for table, col in (
        (OSRT, "globalTid"),
        (NVTX, "globalTid"),
        (RUNTIME, "globalTid"),
        (KERNEL, "globalPid"),
        (MEMCPY, "globalPid"),
        (MEMSET, "globalPid"),
    ):
        if db.has(table, col):
            pids |= {
                int(p)
                for (p,) in db.q(
                    f'SELECT DISTINCT ({col} >> 24) & 16777215 FROM "{db.name(table)}"'
                )
                if isinstance(p, int) and p
            }
    return pids


def context_devices(db: Db) -> dict[int, int]:
    """Process -> its first device, from TARGET_INFO_CUDA_CONTEXT_INFO."""
    table = "TARGET_INFO_CUDA_CONTEXT_INFO"
    if not db.has(table, "processId", "deviceId"):
        return {}
    return {
        int(p): int(d)
        for p, d in db.q(
            f'SELECT processId, min(deviceId) FROM "{db.name(table)}" GROUP BY processId'
        )
        if isinstance(p, int) and isinstance(d, int) and p
    }


def cuda_pids(db: Db) -> set[int]:
    """Processes that own CUDA contexts or streams (TARGET_INFO tables)."""
    pids: set[int] = set()
    for table in ("TARGET_INFO_CUDA_CONTEXT_INFO", "TARGET_INFO_CUDA_STREAM"):
        if db.has(table, "processId"):
            pids |= {
                int(p)
                for (p,) in db.q(f'SELECT DISTINCT processId FROM "{db.name(table)}"')
                if isinstance(p, int) and p
            }
    return pids
