"""Host-device copies whose host side is pageable memory, with the CUDA call that issued each
(issue 35: the host's share of a pageable copy), straight from an nsys export like
`osrt_stacks` and `cpu_samples`: the timeline keeps each copy's GPU span and kind, not the
memory kind of its host side nor the call's own span.

`CUPTI_ACTIVITY_KIND_MEMCPY.srcKind` / `dstKind` reference `ENUM_CUDA_MEM_KIND`, whose ids
differ from CUPTI's own enum (nsys numbers pageable 0, CUPTI 1): the id is read from the
export's enum table by its name, and an export without that table or those columns gives None
(no guess). The issuing call is the `CUPTI_ACTIVITY_KIND_RUNTIME` row of the same process with
the copy's `correlationId` (cudaMemcpy*, cudaMemcpyAsync*, cuMemcpy*).

A pageable copy costs the host more than the GPU shows: the driver stages it through a pinned
bounce buffer inside the call (a synchronous return for a host-to-device copy of any size), and
the pageable memory is the host's to release afterwards (a DataLoader batch from worker
processes lives in shared memory that the main thread unmaps when it drops the batch, where
`pin_memory=True` hands that to the pinning thread).
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.readers import export_tables
from orchestrator.analysis.readers.sql_integers import a_size, a_time, int_or, integral

MEMCPY, RUNTIME, MEM_KIND = (
    "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "ENUM_CUDA_MEM_KIND",
)  # fmt: skip
HTOD, DTOH = 1, 2  # ENUM_CUDA_MEMCPY_OPER ids nsys writes (the timeline's COPY_CODES agree)


@dataclass
class Copies:
    """Pageable host-device copies, sorted by the call's start; arrays of one length."""

    call_start: Any  # int64 ns: the issuing CUDA call on the host
    call_end: Any
    pid: Any
    tid: Any
    start: Any  # the copy on the GPU
    end: Any
    nbytes: Any
    htod: Any  # bool: host to device (else device to host)


def _open(path: str) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def _cols(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(c[1]) for c in db.execute(f'PRAGMA table_info("{table}")')}


MAX_COPIES = 20_000  # pageable copies whose calls are looked up per read
# the runtime table is scanned for the calls (no index on correlationId): over this many rows the
# reader steps aside (None: the evidence is not read) rather than add seconds to an analysis;
# the main reader's own runtime scan keeping the copies' calls would lift it
MAX_RUNTIME_ROWS = 2_000_000
CALL_BEFORE_NS = 1_000_000_000  # a copy's call starts at most this long before the copy does


def read(path: str, lo: int, hi: int, near: tuple[Any, Any, int] | None = None) -> Copies | None:
    """The pageable copies whose call overlaps [lo, hi); None where the export cannot say
    (no memory-kind enum, no srcKind/dstKind, no runtime rows). The copies are found first (the
    memcpy table, filtered by kind); the runtime table, many times larger, is read only where
    there are some, once, for their correlation ids (a scan of it: the export has no index on
    them), and not at all past MAX_RUNTIME_ROWS (None). `near` (starts, ends, reach): only
    the copies within `reach` of one of these windows (the idle intervals asked about), at most
    MAX_COPIES of them."""
    try:
        with _open(path) as db:
            # each table by whatever name the export gives it (versioned names, another case)
            name = export_tables.read_schema(db, (MEMCPY, RUNTIME, MEM_KIND)).name
            mem = _cols(db, name(MEMCPY))
            rt = _cols(db, name(RUNTIME))
            enum = _cols(db, name(MEM_KIND))
            need = {"start", "end", "correlationId", "copyKind", "srcKind", "dstKind", "bytes"}
            if not need <= mem or not {"start", "end", "correlationId", "globalTid"} <= rt:
                return None
            if not {"id", "name"} <= enum:
                return None
            q = (
                f"SELECT id FROM \"{name(MEM_KIND)}\" WHERE upper(name) LIKE '%PAGEABLE%'"
                f" AND {integral('id')}"
            )
            ids = [int(r[0]) for r in db.execute(q)]
            if len(ids) != 1:
                return None
            pg = ids[0]
            (last,) = db.execute(f'SELECT max(rowid) FROM "{name(RUNTIME)}"').fetchone()
            if last is not None and int(last) > MAX_RUNTIME_ROWS:
                return None
            # a hostile export's value of another kind: its copy or call is left out (times,
            # correlation id, thread), or reads as unknown (its process, its size: 0)
            pid_m = int_or("globalPid", None) if "globalPid" in mem else "NULL"
            whole = " AND ".join((a_time("start"), a_time('"end"'), integral("correlationId")))
            # the call overlaps [lo, hi): its copy starts after the call does (before hi + the
            # call's reach) and ends after the call starts
            copies = db.execute(
                f'SELECT correlationId, {pid_m}, start, "end", {a_size("bytes")}, copyKind'
                f' FROM "{name(MEMCPY)}" WHERE ((copyKind = ? AND srcKind = ?)'
                ' OR (copyKind = ? AND dstKind = ?)) AND "end" > ? AND start < ?'
                f" AND {whole}",
                (HTOD, pg, DTOH, pg, int(lo) - CALL_BEFORE_NS, int(hi) + CALL_BEFORE_NS),
            ).fetchall()
            if near is not None and copies:
                copies = _near(copies, *near)
            if not copies:
                return _empty()
            copies = copies[:MAX_COPIES]
            corr = sorted({int(r[0]) for r in copies})
            marks = ",".join("?" * len(corr))
            calls: dict[int, list[tuple[int, int, int]]] = {}
            for c, s, e, g in db.execute(
                f'SELECT correlationId, start, "end", globalTid FROM "{name(RUNTIME)}"'
                f" WHERE correlationId IN ({marks}) AND "
                + " AND ".join((a_time("start"), a_time('"end"'), integral("globalTid"))),
                corr,
            ):
                calls.setdefault(int(c), []).append((int(s), int(e), int(g)))
    except sqlite3.Error:
        return None
    rows = []
    for c, gpid, s, e, nbytes, kind in copies:
        for cs, ce, g in calls.get(int(c), []):
            pid = (g >> 24) & 0xFFFFFF
            # a correlation id is unique within a process: where the copy names its process,
            # the call of that process (two processes' ids may coincide)
            if gpid is not None and ((int(gpid) >> 24) & 0xFFFFFF) != pid:
                continue
            if ce > lo and cs < hi:
                rows.append((cs, ce, pid, g & 0xFFFFFF, int(s), int(e), int(nbytes), int(kind)))
    if not rows:
        return _empty()
    arr = np.array(sorted(rows), dtype=np.int64)
    return Copies(
        arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4], arr[:, 5], arr[:, 6],
        arr[:, 7] == HTOD,
    )  # fmt: skip


def _near(copies: list[Any], starts: Any, ends: Any, reach: int) -> list[Any]:
    """The copies whose [start - reach, end + reach] meets one of the windows [starts, ends)."""
    if np.size(starts) == 0:
        return []
    order = np.argsort(starts, kind="stable")
    ws = np.asarray(starts, dtype=np.int64)[order]
    we = np.maximum.accumulate(np.asarray(ends, dtype=np.int64)[order])
    cs = np.array([int(r[2]) for r in copies], dtype=np.int64) - reach
    ce = np.array([int(r[3]) for r in copies], dtype=np.int64) + reach
    k = np.searchsorted(ws, ce, side="right") - 1  # the last window starting before the end
    ok = (k >= 0) & (we[np.maximum(k, 0)] > cs)
    return [r for r, keep in zip(copies, ok.tolist(), strict=True) if keep]


def _empty() -> Copies:
    z = np.zeros(0, dtype=np.int64)
    return Copies(z, z, z, z, z, z, z, np.zeros(0, dtype=bool))
