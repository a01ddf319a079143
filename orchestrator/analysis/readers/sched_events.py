"""When a host thread was on a CPU, from an nsys export's thread scheduling (`SCHED_EVENTS`:
one row per switch in or out of a CPU, recorded with `--cpuctxsw`). Read for one thread and one
window, straight from the file (like `cpu_samples`): a thread that was on a CPU ran code (its
samples may say which), one that was off it waited (its OS-runtime calls may say for what).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import numpy as np

from orchestrator.analysis.readers import export_tables


def on_cpu(path: str, thread: tuple[int, int], lo: int, hi: int) -> tuple[Any, Any] | None:
    """The intervals of [lo, hi) in which `thread` (pid, tid) was on a CPU, sorted and
    disjoint; None when the export recorded no scheduling (or none of this thread)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            # by whatever name the export gives the table (a versioned name, another case)
            table = export_tables.read_schema(db, ("SCHED_EVENTS",)).name("SCHED_EVENTS")
            cols = {c[1] for c in db.execute(f'PRAGMA table_info("{table}")')}
            if not {"start", "isSchedIn", "globalTid"} <= cols:
                return None
            where = "(globalTid >> 24) & 16777215 = ? AND globalTid & 16777215 = ?"
            before = db.execute(
                f'SELECT isSchedIn FROM "{table}" WHERE {where} AND start < ?'
                " ORDER BY start DESC LIMIT 1",
                (*thread, lo),
            ).fetchone()
            rows = db.execute(
                f'SELECT start, isSchedIn FROM "{table}" WHERE {where}'
                " AND start >= ? AND start < ? ORDER BY start",
                (*thread, lo, hi),
            ).fetchall()
    except sqlite3.Error:
        return None
    if before is None and not rows:
        return None
    t = np.array([lo] + [int(r[0]) for r in rows] + [hi], dtype=np.int64)
    state = np.array([bool(before[0]) if before else not (rows and rows[0][1])]
                     + [bool(r[1]) for r in rows], dtype=bool)  # fmt: skip
    s, e = t[:-1][state], t[1:][state]
    keep = e > s
    return s[keep], e[keep]
