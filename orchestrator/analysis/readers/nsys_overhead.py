"""What Nsight Systems says it cost the profiled process (issue 35 item 6): its overhead tables,
read for one process and one window, straight from the file (like `cpu_samples`).

- `PROFILER_OVERHEAD` (every version here: start, end, globalTid, nameId -> StringIds): the
  profiler's own work on the process's threads (`CUDA profiling data flush`, `CUPTI: Buffer
  flush`, `TLS allocation`, ...), what nsys's `gpu_gaps` and `gpu_time_util` rules add to the GPU
  timeline as time the user cannot address;
- `CUPTI_ACTIVITY_KIND_OVERHEAD` (newer exports: start, end, globalTid, nameId or
  overheadType): CUPTI's and the driver's overhead records.
Columns are looked up by name; a table or column an export lacks is skipped.
"""

from __future__ import annotations

import contextlib
import sqlite3

TABLES = ("PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_OVERHEAD")


def read(path: str, pid: int | None, lo: int, hi: int) -> list[tuple[int, int, str]] | None:
    """(start, end, name) of the overhead records of process `pid` (every process when None)
    that overlap [lo, hi), clipped to it; None when the export has neither table."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            found = [t for t in TABLES if t in have]
            if not found:
                return None
            strings = "StringIds" in have
            out: list[tuple[int, int, str]] = []
            for table in found:
                cols = {c[1] for c in db.execute(f'PRAGMA table_info("{table}")')}
                if not {"start", "end"} <= cols:
                    continue
                if "nameId" in cols and strings:
                    name = "coalesce(s.value, 'overhead')"
                    join = "LEFT JOIN StringIds s ON s.id = o.nameId"
                elif "overheadType" in cols:
                    name, join = "'CUPTI overhead ' || o.overheadType", ""
                else:
                    name, join = f"'{table}'", ""
                where = 'o."end" > ? AND o.start < ?'
                args: tuple[int, ...] = (lo, hi)
                if pid is not None and "globalTid" in cols:
                    where += " AND ((o.globalTid >> 24) & 16777215) = ?"
                    args += (pid,)
                for s, e, n in db.execute(
                    f'SELECT o.start, o."end", {name} FROM "{table}" o {join} WHERE {where}',
                    args,
                ):
                    if isinstance(s, int) and isinstance(e, int) and e > s:
                        out.append((max(s, lo), min(e, hi), str(n)))
            return out
    except sqlite3.Error:
        return None
