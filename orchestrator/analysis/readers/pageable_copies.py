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


def read(path: str, lo: int, hi: int) -> Copies | None:
    """The pageable copies whose call overlaps [lo, hi); None where the export cannot say
    (no memory-kind enum, no srcKind/dstKind, no runtime rows)."""
    try:
        with _open(path) as db:
            mem = _cols(db, "CUPTI_ACTIVITY_KIND_MEMCPY")
            rt = _cols(db, "CUPTI_ACTIVITY_KIND_RUNTIME")
            enum = _cols(db, "ENUM_CUDA_MEM_KIND")
            need = {"start", "end", "correlationId", "copyKind", "srcKind", "dstKind", "bytes"}
            if not need <= mem or not {"start", "end", "correlationId", "globalTid"} <= rt:
                return None
            if not {"id", "name"} <= enum:
                return None
            q = "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE upper(name) LIKE '%PAGEABLE%'"
            ids = [int(r[0]) for r in db.execute(q)]
            if len(ids) != 1:
                return None
            pg = ids[0]
            pid_m = "m.globalPid" if "globalPid" in mem else "NULL"
            rows = db.execute(
                f'SELECT r.start, r."end", r.globalTid, m.start, m."end", m.bytes, m.copyKind,'
                f" {pid_m} FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r"
                " ON r.correlationId = m.correlationId"
                " WHERE ((m.copyKind = ? AND m.srcKind = ?) OR (m.copyKind = ? AND m.dstKind = ?))"
                ' AND r."end" > ? AND r.start < ? ORDER BY r.start',
                (HTOD, pg, DTOH, pg, int(lo), int(hi)),
            ).fetchall()
    except sqlite3.Error:
        return None
    if not rows:
        z = np.zeros(0, dtype=np.int64)
        return Copies(z, z, z, z, z, z, z, np.zeros(0, dtype=bool))
    arr = np.array([r[:7] for r in rows], dtype=np.int64)
    gtid = arr[:, 2]
    pid = (gtid >> 24) & 0xFFFFFF
    # a correlationId is unique within a process: where the copy names its process, keep the
    # call of that process (two processes' ids may coincide)
    gpid = np.array([-1 if r[7] is None else int(r[7]) for r in rows], dtype=np.int64)
    same = (gpid < 0) | (((gpid >> 24) & 0xFFFFFF) == pid)
    arr, pid = arr[same], pid[same]
    return Copies(
        arr[:, 0], arr[:, 1], pid, arr[:, 2] & 0xFFFFFF, arr[:, 3], arr[:, 4], arr[:, 5],
        arr[:, 6] == HTOD,
    )  # fmt: skip
