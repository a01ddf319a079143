"""Whether an nsys export lost data the workload made: such an export is a failed capture.

Two kinds of evidence, each read from the export itself (cheap queries, before the big tables):
- **Kernels lost.** The export holds no kernel row, yet its CUDA runtime table records calls
  that launch kernels or look them up to launch (`cudaLaunchKernel`, `cuLaunchKernel`, graph
  launches, `cuKernelGetAttribute`, `cudaGetFuncBySymbol`, ...). Measured: nsys 2023.4's
  importer stops at a CUDA 12.5+ call it does not know (`cudaGetDriverEntryPointByVersion`,
  "Unknown runtime API function index: 468") and keeps what it read before: the DDP reports
  of tests/data/ddp_h200/nsys kept their kernel lookups and no kernel (issue 24).
- **nsys says so.** `DIAGNOSTIC_EVENT` (2024.2 and later: nsys's own diagnostics) holds a
  message of severity Error, or one that says events were dropped or lost. Its warnings that
  only say "might" (`Not all NVTX events might have been collected.`, written for every
  process of a normal capture) are not evidence.
- **Only the host's samples lost.** A loss message whose own breakdown names only the Linux perf
  source (`Some events (3) were lost (including Perf: 3). Certain charts (including CPU
  utilization) ...`, met on a loaded 2-core CI machine under 2024.2) lost CPU samples and
  context switches, not a CUDA, NVTX or OS-runtime event: the GPU's figures stand. Such an
  export is read, with a note (`cpu_side_losses`) saying the sampled evidence of what the host
  ran is short by that many events. A loss message that names no source, or any other, is a loss.
A capture range that never opened leaves no report at all (measured with 2024.2: `nsys profile
--capture-range=cudaProfilerApi` of a program that never calls cudaProfilerStart exits 0 and
writes nothing): the job's post-processing names that case (templates/sbatch/nsys_post.sh.j2).

`GH_RUN_ACCEPT_LOST_DATA=1` reads such an export anyway, with the finding as a note.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from orchestrator.analysis.readers.export_tables import Schema

KERNEL_CALLS = (
    "cudaLaunch%",
    "cuLaunch%",
    "cudaGraphLaunch%",
    "cuGraphLaunch%",
    "cuKernelGetAttribute%",
    "cuKernelGetFunction%",
    "cudaGetFuncBySymbol%",
    "cudaFuncGetAttributes%",
    "cuModuleGetFunction%",
    "cuLibraryGetKernel%",
)
_LOST_WORDS = re.compile(r"\b(dropped|lost|discarded|overflow(ed)?)\b", re.IGNORECASE)
_BREAKDOWN = re.compile(r"\(including ([^)]*)\)", re.IGNORECASE)
_SOURCE = re.compile(r"([A-Za-z][\w .+/-]*?)\s*:\s*(\d+)")
# the Linux perf subsystem: CPU IP samples, their callchains and context switches
CPU_SIDE_SOURCES = frozenset({"perf"})
ACCEPT_ENV = "GH_RUN_ACCEPT_LOST_DATA"


def accept_lost() -> bool:
    return os.environ.get(ACCEPT_ENV) == "1"


def lost_kernels(conn: sqlite3.Connection, tables: Schema) -> str | None:
    """Why the export lost its kernels (one phrase), or None. `tables`: the export's tables,
    resolved (`export_tables`)."""
    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if runtime not in tables or "StringIds" not in tables:
        return None
    if (
        kernel in tables
        and conn.execute(f'SELECT 1 FROM "{tables.name(kernel)}" LIMIT 1').fetchone()
    ):
        return None
    where = " OR ".join("value LIKE ?" for _ in KERNEL_CALLS)
    ids = {
        int(i): str(v)
        for i, v in conn.execute(
            f'SELECT id, value FROM "{tables.name("StringIds")}" WHERE {where}', KERNEL_CALLS
        )
        if isinstance(i, int)
    }
    if not ids:
        return None
    marks = ",".join(str(i) for i in ids)
    rows = conn.execute(
        f'SELECT nameId, count(*) FROM "{tables.name(runtime)}" WHERE nameId IN ({marks})'
        " GROUP BY nameId"
    ).fetchall()
    if not rows:
        return None
    total = sum(int(n) for _, n in rows)
    named = ", ".join(sorted({ids[int(i)].split("_v")[0] for i, _ in rows}))
    return (
        f"its CUDA runtime calls include {total} that launch or look up kernels ({named}) but it "
        "holds no kernel"
    )


def cpu_side_only(text: str) -> int | None:
    """How many events a loss message says were lost, when its breakdown names only CPU-side
    sources (`CPU_SIDE_SOURCES`); None when it names none or any other."""
    found = _BREAKDOWN.search(text)
    if not found:
        return None
    named = _SOURCE.findall(found.group(1))
    if not named or any(name.strip().lower() not in CPU_SIDE_SOURCES for name, _ in named):
        return None
    return sum(int(n) for _, n in named)


def _diagnostic_rows(conn: sqlite3.Connection, tables: Schema) -> list[tuple[Any, str]]:
    rows: list[tuple[Any, ...]] = conn.execute(
        f'SELECT severity, text FROM "{tables.name("DIAGNOSTIC_EVENT")}" ORDER BY timestamp, rowid'
    ).fetchall()
    return [(sev, text) for sev, text in rows if isinstance(text, str)]


def cpu_side_losses(conn: sqlite3.Connection, tables: Schema) -> str | None:
    """A note for diagnostics that lost only the host's samples (None: none did)."""
    if "DIAGNOSTIC_EVENT" not in tables:
        return None
    lost = [n for _, text in _diagnostic_rows(conn, tables) if (n := cpu_side_only(text))]
    if not lost:
        return None
    return (
        f"nsys lost {sum(lost)} of the host's sampled events (Linux perf: CPU samples and context"
        " switches) and no CUDA, NVTX or OS-runtime event: the GPU's figures stand, what the"
        " samples say the host ran is short by that many"
    )


def diagnostics(conn: sqlite3.Connection, tables: Schema) -> str | None:
    """The first of nsys's own diagnostics that says data was lost or an error occurred (a loss
    of the host's samples alone is not: `cpu_side_losses`)."""
    if "DIAGNOSTIC_EVENT" not in tables:
        return None
    error = 3  # ENUM_DIAGNOSTIC_SEVERITY_LEVEL: 1 Info, 2 Warning, 3 Error (2024.2)
    if "ENUM_DIAGNOSTIC_SEVERITY_LEVEL" in tables:
        found = conn.execute(
            f'SELECT id FROM "{tables.name("ENUM_DIAGNOSTIC_SEVERITY_LEVEL")}"'
            " WHERE name = 'Error'"
        ).fetchone()
        error = int(found[0]) if found and isinstance(found[0], int) else error
    for severity, text in _diagnostic_rows(conn, tables):
        if cpu_side_only(text) is not None:
            continue
        if severity == error or (_LOST_WORDS.search(text) and "might" not in text.lower()):
            return f"nsys's own diagnostics say {text.strip()[:200]!r}"
    return None


def lost_data(conn: sqlite3.Connection, tables: Schema) -> str | None:
    """The evidence that this export lost data the workload made (None: none found)."""
    return lost_kernels(conn, tables) or diagnostics(conn, tables)


def main(argv: list[str]) -> int:
    """What the job's post-processing runs after each export (templates/sbatch/nsys_post.sh.j2,
    through `python3 -c`: the package imports this module, so `-m` would warn). One line on
    stderr per export that lost data; 1 if any did, 2 if one cannot be read, else 0. An export
    that lost only the host's samples gets its note on stderr and does not fail the job."""
    import sys

    from orchestrator.analysis.readers.export_tables import read_schema
    from orchestrator.analysis.readers.nsys_db import KEYS, connect_ro
    from orchestrator.core.errors import UserError

    status = 0
    for name in argv:
        path = Path(name)
        try:
            conn = connect_ro(path)
            try:
                tables = read_schema(conn, KEYS)
                why = lost_data(conn, tables)
                partial = cpu_side_losses(conn, tables)
            finally:
                conn.close()
        except (UserError, sqlite3.DatabaseError) as exc:
            print(f"gh-run: {exc}", file=sys.stderr)
            status = max(status, 2)
            continue
        if partial is not None:
            print(f"gh-run: {path}: {partial}", file=sys.stderr)
        if why is not None:
            print(f"gh-run: {path}: this capture lost data ({why})", file=sys.stderr)
            status = max(status, 1)
    return status
