"""Reader of `nsys export --type sqlite` files → one `RankTimeline` per process that ran GPU work.

The file is opened read-only (`mode=ro` URI) and every string in it is data. A file that is not
an nsys export (no table an export has, or an empty file) is refused in one sentence. Tables and
columns that a trace option did not produce, or that an nsys version names differently, are
tolerated: what they feed is left empty and the table is listed in `SourceInfo.missing`. Rows
whose start or end is not an integer (text in a numeric column) are left out and counted in a
note; other numeric columns are read through `CAST(... AS INTEGER)`.

Tables read (documented export schema):
- GPU work: CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId,
  globalPid, demangledName/shortName → StringIds), CUPTI_ACTIVITY_KIND_MEMCPY (copyKind per
  ENUM_CUDA_MEMCPY_OPER: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, 11/12/13 Unified HtoD/DtoH/DtoD,
  bytes), CUPTI_ACTIVITY_KIND_MEMSET; memcpys and memsets are named `Memcpy HtoD`, `Memset` in
  the timeline (so HTA's name rules class them as memory);
- CUPTI_ACTIVITY_KIND_RUNTIME: the launch time of every GPU activity (same correlationId: HTA's
  idle-time breakdown needs it) and the synchronisation calls;
- NVTX_EVENTS (eventType 59 push/pop, 60 start/end, 70 NVtx push/pop ranges; name = text or
  StringIds[textId]), OSRT_API, ThreadNames;
- CUDA_UM_CPU_PAGE_FAULT_EVENTS (one row per fault, no `end` column: counted, never timed),
  CUDA_UM_GPU_PAGE_FAULT_EVENTS (numberOfPageFaults, faultAccessType), the UM copies'
  `migrationCause` (ENUM_CUDA_UNIF_MEM_MIGRATION), CUDA_GPU_MEMORY_USAGE_EVENTS (`memKind` per
  ENUM_CUDA_MEM_KIND: device memory for the peak, pinned host and managed memory apart);
- TARGET_INFO_GPU (device names), TARGET_INFO_CUDA_STREAM / TARGET_INFO_CUDA_CONTEXT_INFO (the
  processes that own CUDA streams: their main thread is the one whose waits are measured),
  TARGET_INFO_SYSTEM_ENV (`DeviceEnvironment`: the rank variables of the profiled job,
  `env_rank`), META_DATA_EXPORT (or EXPORT_META_DATA in older exports).

Ranks: each process with GPU work (the `globalPid` of the GPU tables) becomes a rank, ordered by
its first device, then pid. Host rows of other processes (launchers, data-loader workers) stay
with the first rank.

Speed: the big tables (kernels, memcpys, memsets, runtime calls) are read once each, as
columns, in parts of equal rows that a thread pool reads on every core (`TableRead`,
`PartsRead`; `table_parts`: the rows counted from the b-tree, never taken from the rowid range,
and each part's read checked against that count: a damaged tree is refused, never read in
part); a
part is read from the file's pages by the compiled reader (`sqlite_pages`) where it reads it
exactly, else through SQLite (`fetch_into`: `group_concat` in rowid chunks parsed by numpy, no
Python object per row). What else is wanted of those tables comes from the same reads (the
rowids of the synchronisation calls, the UM copies' migration causes; on SQLite's path also
whether deviceId and globalPid hold one value); the rest are small queries.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis import core
from orchestrator.analysis.families import gpu_metrics, library_ranges
from orchestrator.analysis.readers import capture_health, export_schema, sqlite_pages
from orchestrator.analysis.readers import table_parts as TP
from orchestrator.analysis.timeline import model as T
from orchestrator.errors import RuntimeFailure, UserError

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
UM_CPU = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"
UM_GPU = "CUDA_UM_GPU_PAGE_FAULT_EVENTS"
GPU_MEM = "CUDA_GPU_MEMORY_USAGE_EVENTS"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"
# CUDA_GPU_MEMORY_USAGE_EVENTS.memKind (ENUM_CUDA_MEM_KIND): 0 pageable, 1 pinned, 2 device,
# 3 array, 4 managed, 5 device static, 6 managed static, 7 unknown. Peak GPU memory counts the
# device kinds only: pinned host buffers (activation offloading) and managed memory (whose pages
# may live on either side) are peaks of their own.
MEM_CLASSES = {1: "pinned", 2: "device", 3: "device", 4: "managed", 5: "device", 6: "managed"}

# any of these makes an SQLite file an nsys export
EXPORT_TABLES = frozenset(
    {
        "StringIds",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        KERNEL,
        MEMCPY,
        MEMSET,
        RUNTIME,
        NVTX,
        OSRT,
        "TARGET_INFO_GPU",
        "ThreadNames",
    }
)
COPY_KIND = {k: v for k, v in T.COPY_NAMES.items() if k > 0}
UM_KINDS = T.UM_COPIES
NVTX_RANGE_TYPES = (59, 60, 70)
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
FETCH_CHUNK_ROWS = 250_000
END = '"end"'  # a keyword of SQL: quoted wherever the column is named
# a big table is read in parts of this many rows, each a job of the reader's thread pool
PART_ROWS = 1_000_000
# the reader's threads: the parts of the big tables (SQLite releases the GIL while it reads)
READ_THREADS = min(max(os.cpu_count() or 2, 2), 4)
# GPU-table columns often one value for the whole table (one process, one GPU): probed while
# reading (`fetch_into`), filled instead of read where they hold it
CONSTANT_PROBES = ("deviceId", "globalPid")
_INT_MAX = 9223372036854775807
# rank variables of launchers and MPI implementations, most specific first
RANK_VARS = ("RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
             "MV2_COMM_WORLD_RANK")  # fmt: skip


# what SQLite raises on a damaged file: its error, or, where its message quotes bytes that are
# not UTF-8 (a damaged schema), Python's failure to decode that message
DAMAGED = (sqlite3.DatabaseError, UnicodeDecodeError)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def connect_ro(path: Path) -> sqlite3.Connection:
    """Open an SQLite file read-only (never creates or modifies it)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file; pass an nsys SQLite export (.sqlite)")
    if path.stat().st_size == 0:
        raise UserError(
            f"{path}: empty file, not an nsys export; export the report again with"
            " `nsys export --type sqlite`"
        )
    conn = None
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        # text that is not UTF-8 (a blob where a number or a name belongs) reads with U+FFFD in
        # place of the bad bytes, instead of failing the whole query
        conn.text_factory = _text
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except DAMAGED as exc:
        if conn is not None:  # closed here: Python 3.13 warns of a connection never closed
            conn.close()
        journal = Path(f"{path}-journal")
        if journal.is_file() and journal.stat().st_size > 0:
            # SQLite must roll a hot journal back before reading, which a read-only
            # connection cannot (SQLITE_READONLY_ROLLBACK: "attempt to write a readonly
            # database")
            raise UserError(
                f"{path}: a rollback journal lies beside it ({journal.name}): a write to the"
                " file stopped midway, and SQLite must undo that write before the file can be"
                " read, which gh-run does not do (it never writes to an export); run `sqlite3"
                f" {path} 'PRAGMA quick_check'` once to undo it (copy both files first to keep"
                " them as they are), or export the report again with `nsys export --type sqlite`"
            ) from exc
        raise UserError(
            f"{path}: not a readable SQLite file ({exc}); export it with"
            " `nsys export --type sqlite`"
        ) from exc
    return conn


class _Db:
    """Schema probing and string lookups on one read-only connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect_ro(path)
        try:
            self.tables = {
                r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except DAMAGED as exc:
            self.conn.close()
            raise UserError(f"{path}: not a readable SQLite file ({exc})") from exc
        self._cols: dict[str, set[str]] = {}

    def check_export(self) -> None:
        if not self.tables & EXPORT_TABLES:
            self.conn.close()
            shown = ", ".join(sorted(self.tables)[:5]) or "none"
            raise UserError(
                f"{self.path}: an SQLite file but not an nsys export (tables: {shown}); pass the"
                " file `nsys export --type sqlite` wrote for the report"
            )

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = (
                {r[1] for r in self.conn.execute(f'PRAGMA table_info("{table}")')}
                if table in self.tables
                else set()
            )
        return self._cols[table]

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and all(c in self.cols(table) for c in cols)

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def strings(self, ids: Iterable[int]) -> dict[int, str]:
        want = sorted({i for i in ids if isinstance(i, int)})
        out: dict[int, str] = {}
        if "StringIds" not in self.tables:
            return out
        for i in range(0, len(want), 500):
            chunk = want[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(
                (int(k), str(v))
                for k, v in self.q(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", chunk)
                if isinstance(k, int)
            )
        return out

    def kernel_name_col(self) -> str | None:
        for c in ("demangledName", "shortName", "name"):
            if c in self.cols(KERNEL):
                return c
        return None


def _shape(path: Path, table: str, conn: sqlite3.Connection | None = None) -> TP.Shape | None:
    """The table's rows and where they are (`table_parts.shape`: counted, never taken from the
    rowid range), in parts of `PART_ROWS`; None when it holds none. On `conn`, else on a
    connection of the calling thread's own."""
    if conn is not None:
        return TP.shape(conn, path, table, _part_step())
    own = connect_ro(path)
    try:
        return TP.shape(own, path, table, _part_step())
    finally:
        own.close()


def _part_step() -> int:
    """Rows per part: whole chunks of the SQLite path."""
    return max(PART_ROWS // FETCH_CHUNK_ROWS, 1) * FETCH_CHUNK_ROWS


def _integral(col: str) -> str:
    """SQL: the column holds an integer, or a real with an integral value in int64's range (what
    `CAST(col AS INTEGER)` keeps unchanged: a column declared REAL holds its integers so). Rows
    whose start or end is anything else are left out, on both paths alike (the page reader
    applies the same rule to the values it decodes)."""
    real = f"typeof({col}) = 'real' AND CAST({col} AS INTEGER) = {col}"
    return f"(typeof({col}) = 'integer' OR ({real}))"


_INT = re.compile(r"-?[0-9]+")


def _ints(text: Any) -> Any | None:
    """The comma-separated integers of one `group_concat` text, or None when it does not parse
    whole (a NULL, text or real value somewhere).

    No warning filter is changed here: `warnings.catch_warnings` changes the whole process's
    filters, and this runs in the reader's worker threads (it turned other threads' warnings
    into errors: Python 3.12's DeprecationWarnings stopped `analyze`). numpy stops at the first
    byte that does not parse: it raises ValueError, or (older numpy) warns and returns what it
    read, which the count of commas shows, unless the stop is in the last number: that one is
    checked. numpy also reads a lone minus as 0: refused. (What else numpy takes, a plus sign or
    blanks around a number, SQLite's CAST reads the same way; in nsys's INTEGER columns SQLite
    stores such text as the integer anyway.) No copy of the text is made: a few megabytes of
    new memory per chunk cost more in page faults than the parse."""
    if not isinstance(text, str):
        return None
    try:
        a = np.fromstring(text, sep=",", dtype=np.int64)
    except (ValueError, DeprecationWarning):  # DeprecationWarning: where warnings are errors
        return None
    if a.size != text.count(",") + 1 or not _INT.fullmatch(text, text.rfind(",") + 1):
        return None
    if "-" in text and "-," in text:  # a lone minus before the last number
        return None
    return a


def _parse(texts: tuple[Any, ...]) -> list[Any] | None:
    """`_ints` of each `group_concat` text, or None when one does not parse whole or the
    columns differ in length."""
    if texts[0] is None:
        return (
            [np.zeros(0, dtype=np.int64) for _ in texts] if all(t is None for t in texts) else None
        )
    out: list[Any] = []
    for text in texts:
        a = _ints(text)
        if a is None or (out and a.size != out[0].size):
            return None
        out.append(a)
    return out


@dataclass
class Subset:
    """Columns of the rows that match a condition, read in the scan that reads a table's
    columns (aggregates with a FILTER clause): a second scan of a large table is saved (the
    synchronisation calls among the runtime rows). The rows: those whose column `cond` holds one
    of `values`; their columns: `cols`, each (column or "rowid", its value for NULL).
    `columns()` holds them after the read, or None when some did not parse."""

    cond: str
    values: tuple[int, ...]
    cols: tuple[tuple[str, int], ...]
    # the caller matches the subset's rows to the rows read (as `cond` picks them among the
    # values read): a chunk read the robust way (CAST values) fails it
    aligned: bool = False
    parts: list[list[Any]] = field(default_factory=list)
    failed: bool = False

    @property
    def where(self) -> str:
        """The condition in SQL (an OR list of a few values costs less than an IN list)."""
        if len(self.values) > 8:
            return f'"{self.cond}" IN ({",".join(str(int(v)) for v in self.values)})'
        return " OR ".join(f'"{self.cond}" = {int(v)}' for v in self.values) or "0"

    @property
    def exprs(self) -> list[str]:
        """The columns in SQL."""
        return [c if c == "rowid" else f'coalesce("{c}", {int(d)})' for c, d in self.cols]

    def empty(self) -> Subset:
        """A subset of the same rows and columns, not read yet."""
        return Subset(self.cond, self.values, self.cols, self.aligned)

    def absorb(self, part: Subset) -> None:
        """Take what `part` (one of `empty()`, read over the next rowid range) gathered."""
        self.failed |= part.failed
        self.parts += part.parts
        part.parts = []

    def columns(self) -> list[Any] | None:
        if self.failed:
            return None
        if not self.parts:
            return [np.zeros(0, dtype=np.int64) for _ in self.cols]
        return [np.concatenate(c) for c in zip(*self.parts, strict=True)]


def _parse_into(texts: list[Any], dests: list[Any], n: int, table: str) -> int | None:
    """`_parse` into `dests[i][n:]`, each text dropped from `texts` once parsed (a chunk's texts
    are tens of MB: no more than one of them and its array alive at a time); the rows parsed,
    or None (what was written past n is then to be overwritten). More rows than the arrays
    hold (sized by the rows the table's tree holds): `table_parts.DamagedTable`."""
    if all(t is None for t in texts):
        return 0
    k = -1
    for i, text in enumerate(texts):
        texts[i] = None
        a = _ints(text)
        del text
        if a is None or (k >= 0 and a.size != k):
            return None
        if n + a.size > dests[i].size:
            raise TP.DamagedTable(
                table, f"{n + a.size} rows found by rowid where its tree holds {dests[i].size}"
            )
        dests[i][n : n + a.size] = a
        k = a.size
        del a
    return k


def fetch_into(
    path: Path,
    table: str,
    cols: list[str],
    out: list[Any],
    has_times: bool = True,
    part: TP.Part | None = None,
    probe: dict[str, int] | None = None,
    subset: Subset | None = None,
) -> tuple[int, int]:
    """Fill `out[i][:n]` with column i of the rows of a table (or of `part`: a rowid range and
    the rows it holds, `table_parts`) whose integer start <= end, and return (n, rows left out);
    `out` arrays must hold the part's rows. The rows met must be the rows the part holds, else
    `table_parts.DamagedTable` (a damaged b-tree: refused, never a fraction of the table).

    No Python object per row: `group_concat` builds comma-separated text inside SQLite (C speed,
    GIL released) for one rowid range of `FETCH_CHUNK_ROWS` rows at a time and numpy parses it.
    A chunk whose text does not parse whole (a NULL, text or real value in a numeric column) is
    read again with every value CAST to an integer and only integer starts and ends.

    `probe`: columns of `cols` with the integer they likely hold in every row (the first row's:
    one process, one GPU). Such a column is filled, not read, while every row of a chunk holds
    it (`IS NOT` also finds NULLs, text and non-integral reals, so what is filled is what
    reading gives): a count in the same scan costs less than the column's text, and less than
    a scan of its own. From the first chunk where a row differs on, the column is read.
    `subset`: columns of some of the rows read, gathered in the same scan.

    With the compiled reader built (`sqlite_pages`) the rows are read from the file's pages
    instead, in one call for the range; what it leaves to SQLite (a text or real value, a file
    or table it does not read) is read as above."""
    conn = connect_ro(path)
    try:
        if part is None:
            shape = _shape(path, table, conn)
            if shape is None:
                return 0, 0
            part = shape.whole()
        if sqlite_pages.available():
            got = _fetch_native(conn, path, table, cols, out, has_times, part, subset)
            if got is not None:
                return got
        dest = dict(zip(cols, out, strict=True))
        fill = {c: v for c, v in (probe or {}).items() if c in dest}
        # the time rule's types in both queries: `group_concat` prints the text '7' as it prints
        # the integer 7, and numpy reads a field of white space as 0 (a fuzzed export kept a
        # kernel whose end was a tab, at end 0, where SQLite's own scan leaves it out)
        typed = f" AND {_integral('start')} AND {_integral(END)}" if has_times else ""
        times = typed + (' AND "end" >= start' if has_times else "")
        where = {False: times, True: times}  # fast, robust

        def run(bounds: tuple[int, int], robust: bool) -> tuple[list[str], tuple[Any, ...]]:
            """(columns read, (min rowid, texts, probe count, subset texts))."""
            read = [c for c in cols if c not in fill]
            # the lowest rowid the scan met: a damaged tree can walk SQLite's range scan (a seek
            # by the keys, then leaf after leaf) past the range's lower end (its upper end is
            # checked on every row)
            aggs = ["min(rowid)"] + [
                f'group_concat(CAST(coalesce("{c}", -1) AS INTEGER))' if robust
                else f'group_concat("{c}")' for c in read
            ]  # fmt: skip
            # named parameters, bound from a mapping (Python 3.12 deprecates numbered ones bound
            # from a sequence, and 3.14 refuses them): :lo, :hi the rowid range, :p0... the
            # probed values
            if fill:
                differ = " OR ".join(f'"{c}" IS NOT :p{i}' for i, c in enumerate(fill))
                aggs.append(f"count(*) FILTER (WHERE {differ})")
            if subset is not None:
                aggs += [f"group_concat({e}) FILTER (WHERE {subset.where})" for e in subset.exprs]
            sql = (
                "SELECT " + ", ".join(aggs)
                + f' FROM "{table}" WHERE rowid >= :lo AND rowid <= :hi{where[robust]}'
            )  # fmt: skip
            params = {"lo": bounds[0], "hi": bounds[1]}
            params |= {f"p{i}": v for i, v in enumerate(fill.values())}
            return read, conn.execute(sql, params).fetchone()

        n = seen = 0
        for chunk in TP.chunks(conn, table, part, FETCH_CHUNK_ROWS):
            bounds = (chunk.lo, chunk.hi)
            k = None
            for robust in (False, True):
                read, row = run(bounds, robust)
                if fill and row[1 + len(read)]:  # a probed column differs here: read it from now on
                    fill = {
                        c: v
                        for c, v in fill.items()
                        if not conn.execute(
                            f'SELECT EXISTS (SELECT 1 FROM "{table}" WHERE rowid >= :lo'
                            f' AND rowid <= :hi{where[robust]} AND "{c}" IS NOT :v)',
                            {"lo": bounds[0], "hi": bounds[1], "v": v},
                        ).fetchone()[0]
                    }
                    read, row = run(bounds, robust)
                lowest, row = row[0], row[1:]
                texts = list(row[: len(read)])
                side = row[len(row) - len(subset.exprs) :] if subset is not None else ()
                del row  # only `texts` holds the chunk's text, freed as it is parsed
                k = _parse_into(texts, [dest[c] for c in read], n, table)
                if k is not None:
                    break
            if k is None:
                raise UserError(f"{path}: {table} holds values gh-run cannot read as integers")
            for c, v in fill.items():
                dest[c][n : n + k] = v
            if subset is not None and not subset.failed:
                gathered = _parse(side)
                if gathered is None or (robust and subset.aligned):
                    subset.failed = True
                else:
                    subset.parts.append(gathered)
            if k and lowest < chunk.lo:
                raise TP.DamagedTable(
                    table, f"a scan of rowids {chunk.lo} to {chunk.hi} met rowid {lowest}"
                )
            n += k
            # the rows the chunk's scan met (kept or left out by their times), counted by the
            # same scan (the same seek and end): a count of the whole part would seek elsewhere
            seen += k if k == chunk.hi - chunk.lo + 1 else int(
                conn.execute(
                    f'SELECT count(*) FROM "{table}" WHERE rowid >= ? AND rowid <= ?', bounds
                ).fetchone()[0]
            )  # fmt: skip
        TP.check(table, part, seen)
        return n, seen - n
    finally:
        conn.close()


def _fetch_native(
    conn: sqlite3.Connection,
    path: Path,
    table: str,
    cols: list[str],
    out: list[Any],
    has_times: bool,
    part: TP.Part,
    subset: Subset | None,
) -> tuple[int, int] | None:
    """`fetch_into` by the compiled reader of the file's pages: (rows, rows left out), or None
    when it left the range to SQLite (which is then checked the same way)."""
    lay = sqlite_pages.layout(conn, path, table)
    if lay is None:
        return None
    sub = (subset.cond, subset.values, subset.cols) if subset is not None else (None, (), ())
    read = sqlite_pages.fetch(path, lay, (part.lo, part.hi), cols, out, has_times, *sub)
    if read is None:
        return None
    TP.check(table, part, read.seen)
    if subset is not None:
        subset.parts.append(read.subset)
    return read.kept, read.seen - read.kept


def fetch_columns(
    path: Path,
    table: str,
    cols: list[str],
    has_times: bool = True,
    probe: dict[str, int] | None = None,
    subset: Subset | None = None,
) -> list[Any]:
    """`fetch_into` new int64 arrays (sized by the table's rows), trimmed to the rows read."""
    shape = _shape(path, table)
    if shape is None:
        return [np.zeros(0, dtype=np.int64) for _ in cols]
    out = [np.empty(shape.rows, dtype=np.int64) for _ in cols]
    n, _ = fetch_into(path, table, cols, out, has_times, shape.whole(), probe, subset)
    return [a[:n] for a in out]


def _parts(
    path: Path, table: str, cols: list[str], shape: TP.Shape
) -> tuple[dict[str, int] | None, list[TP.Part]]:
    """The probe (`fetch_into`) and the parts of `PART_ROWS` rows (whole chunks) of a big
    table, for `TableRead` and `PartsRead`."""
    # the probe serves the Python reader only (the compiled one reads every column fast)
    probe = None if sqlite_pages.available() else first_ints(
        path, table, [c for c in cols if c in CONSTANT_PROBES]
    )  # fmt: skip
    if shape.dense or shape.marks is not None:
        return probe, shape.parts()
    conn = connect_ro(path)
    try:
        return probe, shape.parts(conn)
    finally:
        conn.close()


class TableRead:
    """`fetch_into` of a table (its `table_parts.Shape`) in parts of `PART_ROWS` rows, each a job
    of `pool`:
    SQLite and the compiled reader release the GIL, so the parts of every big table run on
    every core at once. `result()` waits for the parts and returns (rows, rows left
    out), the rows in table order at the front of `out`; a subset gathers in part order."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        path: Path,
        table: str,
        cols: list[str],
        out: list[Any],
        shape: TP.Shape,
        has_times: bool = True,
        subset: Subset | None = None,
    ) -> None:
        self.out = out
        self.subset = subset
        probe, parts = _parts(path, table, cols, shape)
        self.parts: list[tuple[int, Subset | None, Any]] = []
        for part in parts:
            off = part.offset
            sub = subset.empty() if subset else None
            # each part writes its own rows' slice only (a damaged tree cannot spill into the next)
            dests = [a[off : off + part.rows] for a in out]
            fut = pool.submit(fetch_into, path, table, cols, dests, has_times, part, probe, sub)
            self.parts.append((off, sub, fut))

    def result(self) -> tuple[int, int]:
        n = skipped = 0
        for off, sub, fut in self.parts:
            got, left = fut.result()
            if n != off:  # close the gap that rows left out of earlier parts leave
                for a in self.out:
                    a[n : n + got] = a[off : off + got]
            n += got
            skipped += left
            if self.subset is not None and sub is not None:
                self.subset.absorb(sub)
        return n, skipped


class PartsRead:
    """`fetch_columns` of a table in parts of `PART_ROWS` rows, each a job of `pool` with arrays
    of its own (see `TableRead`): the caller takes the parts in table order and lets each go
    once used (`take`), so the whole columns never exist at once (the runtime calls: two columns
    of 8 bytes for every call, at the reader's peak of memory)."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        path: Path,
        table: str,
        cols: list[str],
        has_times: bool = True,
        subset: Subset | None = None,
    ) -> None:
        self.cols = cols
        self.subset = subset
        self.parts: deque[tuple[list[Any], Subset | None, Any]] = deque()
        shape = _shape(path, table)
        if shape is None:
            return
        probe, parts = _parts(path, table, cols, shape)
        for part in parts:
            out = [np.empty(part.rows, dtype=np.int64) for _ in cols]
            sub = subset.empty() if subset else None
            fut = pool.submit(fetch_into, path, table, cols, out, has_times, part, probe, sub)
            self.parts.append((out, sub, fut))

    def wait(self) -> None:
        """Every part read, and the subset gathered."""
        for _, sub, fut in self.parts:
            fut.result()
            if self.subset is not None and sub is not None:
                self.subset.absorb(sub)

    def take(self) -> Iterator[dict[str, Any]]:
        """Each part's columns (column name -> the rows read), in table order; a part is let go
        once the next is asked for."""
        while self.parts:
            out, _, fut = self.parts.popleft()
            got, _ = fut.result()
            part = {c: a[:got] for c, a in zip(self.cols, out, strict=True)}
            del out
            yield part
            del part


def first_ints(path: Path, table: str, cols: list[str]) -> dict[str, int]:
    """The columns among `cols` whose first row holds an integer, with it: the values to probe
    (`fetch_into`) where a table often holds one value throughout (CONSTANT_PROBES)."""
    if not cols:
        return {}
    conn = connect_ro(path)
    try:
        first = conn.execute(
            "SELECT " + ", ".join(f'"{c}"' for c in cols) + f' FROM "{table}" LIMIT 1'
        ).fetchone()
    finally:
        conn.close()
    if first is None:
        return {}
    return {c: v for c, v in zip(cols, first, strict=True) if type(v) is int}


def env_rank(db: _Db) -> tuple[int, str] | None:
    """(rank, variable) from the environment nsys recorded for the profiled job
    (`TARGET_INFO_SYSTEM_ENV.DeviceEnvironment`: NUL- or `;`-separated NAME=value pairs)."""
    if not db.has(SYSTEM_ENV, "name", "value"):
        return None
    for (value,) in db.q(
        f"SELECT value FROM {SYSTEM_ENV} WHERE name = 'DeviceEnvironment' ORDER BY value"
    ):
        if not isinstance(value, str):
            continue
        found: dict[str, int] = {}
        for m in re.finditer(r"(?:^|[;\x00])([A-Z_]+)=(\d{1,7})(?=[;\x00]|$)", value):
            if m.group(1) in RANK_VARS:
                found.setdefault(m.group(1), int(m.group(2)))
        for var in RANK_VARS:
            if var in found:
                return found[var], var
    return None


def _pid_tid(gtid: Any) -> tuple[Any, Any]:
    """(pid, tid) of serialized nsys GlobalIds: `(vmId << 48) | (pid << 24) | tid`."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


@dataclass
class _GpuReads:
    """The GPU table being read (`_Reader._gpu_reads`): per table (name, columns, its slice of
    the table, the column of kernel name ids or copy kinds, the UM subset, the read)."""

    gpu: T.GpuTable
    pid: Any
    reads: list[tuple[str, list[str], slice, Any, Subset | None, TableRead | None]]


class _Reader:
    """One export → timelines (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = _Db(path)
        self.db.check_export()
        self.names = T.Names()
        self.missing: list[str] = []
        self.notes: list[str] = []
        # the UM migrations grouped from the memcpy read (`_um_migration_groups`)
        self._um_found: list[tuple[int, ...]] | None = None

    # ---- GPU work
    def _gpu_plan(self) -> list[tuple[str, list[str], TP.Shape | None, int]]:
        """(table, columns, its rows (`table_parts.Shape`; None: no row), offset) of the GPU
        tables present."""
        db = self.db
        plan = []
        offset = 0
        name_col = db.kernel_name_col()
        for table, extra in ((KERNEL, ()), (MEMCPY, ("copyKind", "bytes")), (MEMSET, ("bytes",))):
            if not db.has(table, "start", "end", "deviceId") or (table == KERNEL and not name_col):
                if table not in db.tables:
                    self.missing.append(table)
                continue
            cols = ["start", "end", "deviceId", *self._opt(table, "streamId", "correlationId")]
            cols += [name_col] if table == KERNEL and name_col else list(self._opt(table, *extra))
            shape = _shape(self.path, table, db.conn)
            plan.append((table, cols, shape, offset))
            offset += shape.rows if shape else 0
        return plan

    def _gpu_reads(self, pool: ThreadPoolExecutor, by_pid: bool) -> _GpuReads:
        """Kernels, memcpys and memsets into one preallocated table, queued on `pool` in parts
        (`TableRead`); `_gpu` waits for them. `by_pid`: read each row's process too."""
        plan = self._gpu_plan()
        total = sum(p[2].rows for p in plan if p[2] is not None)
        gpu = T.GpuTable(*(np.empty(total, dtype=t) for t in T.GPU_DTYPES))
        gpu.stream.fill(T.NONE)
        gpu.corr.fill(T.NONE)
        # no memory until `_launches` has the runtime calls (it allocates the column once the
        # runtime columns are let go: a peak of memory otherwise)
        gpu.launch = T.constant(T.NONE, total, np.int64)
        # zeros from calloc: pages no row writes (the kernels' bytes and copy kinds) take no
        # memory
        gpu.nbytes = np.zeros(total, dtype=gpu.nbytes.dtype)
        gpu.copy = np.full(total, T.COPY_NONE, dtype=gpu.copy.dtype) if T.COPY_NONE else (
            np.zeros(total, dtype=gpu.copy.dtype)
        )  # fmt: skip
        pid = np.zeros(total, dtype=np.int64) if by_pid else None
        reads = []
        for table, cols, shape, offset in plan:
            count = shape.rows if shape else 0
            cols = cols + (["globalPid"] if by_pid and "globalPid" in self.db.cols(table) else [])
            sl = slice(offset, offset + count)
            extra = np.empty(count, dtype=np.int64)  # kernel name ids or copy kinds
            targets: dict[str, Any] = {
                "start": gpu.start[sl],
                "end": gpu.end[sl],
                "deviceId": gpu.device[sl],
                "streamId": gpu.stream[sl],
                "correlationId": gpu.corr[sl],
                "bytes": gpu.nbytes[sl],
                "globalPid": pid[sl] if pid is not None else None,
            }
            sub = None
            if table == MEMCPY and self._um_migrations():
                # the migration cause of the UM copies, in the same scan (`_um`)
                sub = Subset("copyKind", tuple(UM_KINDS), (("migrationCause", 0),), aligned=True)
            out = [targets.get(c, extra) for c in cols]
            read = TableRead(pool, self.path, table, cols, out, shape, True, sub) if shape else None
            reads.append((table, cols, sl, extra, sub, read))
        return _GpuReads(gpu, pid, reads)

    def _gpu(self, pending: _GpuReads) -> tuple[T.GpuTable, Any]:
        """The GPU table of `_gpu_reads` once read, and the pid of every row when the export
        holds several processes with CUDA work."""
        gpu, pid = pending.gpu, pending.pid
        keep = []
        for table, cols, sl, extra, sub, read in pending.reads:
            got, skipped = read.result() if read is not None else (0, 0)
            extra = extra[:got]
            if sub is not None:
                self._um_found = self._um_migration_groups(
                    gpu, slice(sl.start, sl.start + got), extra,
                    pid if "globalPid" in cols else None, sub,
                )  # fmt: skip
            if skipped:
                self.notes.append(
                    f"{skipped} rows of {table} left out: start or end missing, not an integer,"
                    " or end before start"
                )
            rows = slice(sl.start, sl.start + got)
            keep.append(rows)
            kind = {KERNEL: T.KERNEL, MEMCPY: T.MEMCPY, MEMSET: T.MEMSET}[table]
            gpu.kind[rows] = kind
            if table == KERNEL:
                gpu.name[rows] = self._kernel_names(extra, self.db.kernel_name_col())
            elif table == MEMCPY:
                code = extra if "copyKind" in cols else np.zeros(got, dtype=np.int64)
                lut = {
                    k: self.names.id(f"Memcpy {T.copy_name(int(k))}")
                    for k in np.unique(code).tolist()
                }
                gpu.name[rows] = _map(code, lut)
                gpu.copy[rows] = code.astype(np.int8)
            else:
                gpu.name[rows] = self.names.id("Memset")
            del extra
        pending.reads.clear()  # the `extra` columns go
        total = gpu.size
        if sum(r.stop - r.start for r in keep) != total:  # rows left out: close the holes
            idx = np.concatenate([np.arange(r.start, r.stop) for r in keep])
            gpu = gpu.take(idx)
            pid = pid[idx] if pid is not None else None
        if pid is not None:  # the process part of the GlobalIds (`_pid_tid`), in place
            np.right_shift(pid, 24, out=pid)
            np.bitwise_and(pid, 0xFFFFFF, out=pid)
        return gpu, pid

    def _opt(self, table: str, *cols: str) -> list[str]:
        return [c for c in cols if c in self.db.cols(table)]

    def _kernel_names(self, ids: Any, name_col: str | None) -> Any:
        """Timeline name ids of kernel rows (StringIds ids, or the `name` column's values)."""
        if ids.size == 0:
            return np.zeros(0, dtype=np.int32)
        distinct = core.distinct(ids)
        strs = self.db.strings(distinct) if name_col != "name" else {}
        lut = {i: self.names.id(strs.get(i, str(i))) for i in distinct}
        return _map(ids, lut)

    def _launches(self, gpu: T.GpuTable, gpu_pid: Any, rt: Iterator[dict[str, Any]]) -> None:
        """GpuTable.launch: the start of the runtime call with the same correlationId (of the
        same process when the export holds several). Of several calls with one id (a runtime
        call and the driver call inside it, or a tracing layer's wrapper and the call: the
        2022.2 export in tests/data/nsys), the latest start: what the table's last row gave in
        the exports met, and the same whatever order the rows are stored in. `rt`: the runtime
        columns (start, correlationId, globalTid) in parts."""
        if gpu.size == 0:
            return
        gc = gpu.corr
        hi = int(gc.max())
        if gpu_pid is None and 0 <= hi < 4 * gpu.size + (1 << 20):
            # dense ids: a lookup table filled part by part, each part let go once in it
            table = np.empty(hi + 1, dtype=np.int64)
            found = np.zeros(hi + 1, dtype=bool)
            for part in rt:
                rc, rs = part["correlationId"], part["start"]
                del part
                inside = (rc >= 0) & (rc <= hi)
                if not inside.all():
                    rc, rs = rc[inside], rs[inside]
                seen = found[rc]
                earlier = table[rc[seen]] if seen.any() else None
                table[rc] = rs
                if (table[rc] != rs).any():  # an id twice in this part: the latest start
                    np.maximum.at(table, rc, rs)
                if earlier is not None:  # an id of an earlier part: the latest start
                    np.maximum.at(table, rc[seen], earlier)
                found[rc] = True
                del rc, rs, inside, seen, earlier
            launch = np.take(table, gc, mode="clip")  # ids below 0 clipped, then set to NONE
            del table
            launch[(gc < 0) | ~np.take(found, gc, mode="clip")] = T.NONE
            gpu.launch = launch
            self._drop_corr(gpu)
            return
        parts = list(rt)
        if not parts or "correlationId" not in parts[0]:
            return
        rc = np.concatenate([p["correlationId"] for p in parts])
        rs = np.concatenate([p["start"] for p in parts])
        if gpu_pid is not None and "globalTid" in parts[0]:
            pid = _pid_tid(np.concatenate([p["globalTid"] for p in parts]))[0]
            rc = (pid << 40) | (rc & ((1 << 40) - 1))
            gc = (gpu_pid << 40) | (gc & ((1 << 40) - 1))
        del parts
        if rc.size == 0:
            return
        order = np.lexsort((rs, rc))  # by id, then start: the last of each id starts latest
        rc = rc[order]
        rs = rs[order]
        del order
        last = np.ones(rc.size, dtype=bool)
        last[:-1] = rc[1:] != rc[:-1]
        rc, rs = rc[last], rs[last]
        j = np.searchsorted(rc, gc)
        np.minimum(j, rc.size - 1, out=j)
        hit = (rc[j] == gc) & (gpu.corr != T.NONE)
        gpu.launch = np.where(hit, rs[j], T.NONE)
        self._drop_corr(gpu)

    @staticmethod
    def _drop_corr(gpu: T.GpuTable) -> None:
        """Once launches are known nothing reads nsys correlation ids (HTA's last-step filter is
        for Kineto traces): a constant column in their place saves 8 bytes a row."""
        gpu.corr = T.constant(T.NONE, gpu.size, np.int64)

    def _runtime_cols(self, by_pid: bool) -> list[str]:
        """Runtime columns for the launch times: start and correlationId (and globalTid, to
        tell processes apart)."""
        if not self.db.has(RUNTIME, "start", "end", "correlationId"):
            if RUNTIME not in self.db.tables:
                self.missing.append(RUNTIME)
            return []
        return ["start", "correlationId", *(["globalTid"] if by_pid else [])]

    def _host(
        self, seen: set[int], sync: Any
    ) -> tuple[T.HostTable, dict[tuple[int, int], str], bool]:
        """Synchronisation calls (`sync()`: the HostTable, once the runtime read that gathers
        them is done), NVTX ranges and OS-runtime calls; thread names; whether the export traced
        OS-runtime calls. `seen`: processes already known to be traced (CUDA contexts, GPU
        rows)."""
        osrt, osrt_traced = self._osrt()
        host = T.concat_host([sync(), self._nvtx(), osrt])
        seen = seen | {int(p) for p in np.unique(host.pid).tolist()}
        return host, self._thread_names(seen - {0}), osrt_traced

    def _sync_ids(self) -> dict[int, str]:
        """StringIds of the CUDA synchronisation functions (SYNC_PATTERNS) -> their names."""
        db = self.db
        if not db.has(RUNTIME, "start", "end", "nameId") or "StringIds" not in db.tables:
            return {}
        where = " OR ".join("value LIKE ?" for _ in SYNC_PATTERNS)
        return {
            int(i): str(v)
            for i, v in db.q(f"SELECT id, value FROM StringIds WHERE {where}", SYNC_PATTERNS)
            if isinstance(i, int)
        }

    def _sync_subset(self, ids: dict[int, str]) -> Subset:
        """The rowids of the synchronisation calls, gathered by the runtime read (`fetch_into`):
        one condition a row in that scan costs less than a scan of its own."""
        return Subset("nameId", tuple(sorted(ids)), (("rowid", 0),))

    def _sync_calls(self, ids: dict[int, str], rowids: Any | None) -> T.HostTable:
        """The CUDA synchronisation calls (runtime rows whose function is one of SYNC_PATTERNS):
        those among `rowids` (`_sync_subset`), or among all rows (a scan) when None."""
        if not ids:
            return T.HostTable.empty()
        tid = "globalTid" if "globalTid" in self.db.cols(RUNTIME) else "0"
        sql = (
            'SELECT CAST(start AS INTEGER), CAST("end" AS INTEGER),'
            f" CAST(coalesce({tid}, 0) AS INTEGER), nameId FROM {RUNTIME}"
            f" WHERE nameId IN ({','.join(str(int(i)) for i in ids)})"
            f' AND {_integral("start")} AND {_integral(END)} AND "end" >= start'
        )
        if rowids is None:
            rows = self.db.q(sql + ' ORDER BY start, "end", 3, nameId')
        elif rowids.size:
            rows = self.db.q(
                sql + " AND rowid IN (SELECT value FROM json_each(?))"
                ' ORDER BY start, "end", 3, nameId',  # time, never the stored order
                (json.dumps(rowids.tolist()),),
            )
        else:
            return T.HostTable.empty()
        return self._host_rows(rows, T.CUDA_API, lambda v: ids.get(v, str(v)))

    def _host_rows(self, rows: list[tuple[Any, ...]], kind: int, name: Any) -> T.HostTable:
        """A HostTable of (start, end, globalTid, name value) rows; `name` maps a value to text."""
        if not rows:
            return T.HostTable.empty()
        s, e, gt, nm = zip(*rows, strict=True)
        pid, tid = _pid_tid(np.array(gt, dtype=np.int64))
        ids = self.names.id
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

    def _nvtx(self) -> T.HostTable:
        """NVTX ranges: the workload's as ANNOTATION rows, a library's (any domain but the
        default one, or a library's name: `library_ranges`) as LIBRARY_ANNOTATION rows."""
        db = self.db
        if not db.has(NVTX, "start", "end", "eventType"):
            self.missing.append(NVTX)
            return T.HostTable.empty()
        cols = db.cols(NVTX)
        text = "n.text" if "text" in cols else "NULL"
        tid = "n.globalTid" if "globalTid" in cols else "0"
        domain = "CAST(coalesce(n.domainId, 0) AS INTEGER)" if "domainId" in cols else "0"
        if "textId" in cols and "StringIds" in db.tables:
            name = f"coalesce({text}, s.value)"
            join = "LEFT JOIN StringIds s ON s.id = n.textId"
        else:
            name, join = text, ""
        types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
        rows = db.q(
            f'SELECT CAST(n.start AS INTEGER), CAST(n."end" AS INTEGER),'
            f" CAST(coalesce({tid}, 0) AS INTEGER), {name}, {domain}"
            f" FROM {NVTX} n {join} WHERE n.eventType IN ({types})"
            f" AND {_integral('n.start')} AND {_integral('n.' + END)}"
            ' AND n."end" >= n.start ORDER BY n.start, n."end", 3, 4'  # never the stored order
        )
        if not rows:
            return T.HostTable.empty()

        def label(v: Any) -> str:
            return str(v) if v is not None else "(unnamed)"

        lib = [library_ranges.is_library_range(d, label(v)) for *_, v, d in rows]
        table = self._host_rows([r[:4] for r in rows], T.ANNOTATION, label)
        table.kind[np.array(lib, dtype=bool)] = T.LIBRARY_ANNOTATION
        return table

    def _osrt(self) -> tuple[T.HostTable, bool]:
        db = self.db
        if not db.has(OSRT, "start", "end", "globalTid", "nameId"):
            self.missing.append(OSRT)
            return T.HostTable.empty(), False
        s, e, gt, nid = fetch_columns(self.path, OSRT, ["start", "end", "globalTid", "nameId"])
        distinct = core.distinct(nid)
        strs = db.strings(distinct)
        lut = {i: self.names.id(strs.get(i, str(i))) for i in distinct}
        pid, tid = _pid_tid(gt)
        del gt
        # tid 0 is no thread of the process: nsys puts its own markers there ("OS runtime
        # libraries profiling started"), which would list a "thread 0"
        real = tid != 0
        if not bool(real.all()):
            s, e, pid, tid, nid = s[real], e[real], pid[real], tid[real], nid[real]
        kind = np.full(s.size, T.OSRT, dtype=np.int8)
        return T.HostTable(s, e, pid, tid, kind, _map(nid, lut)), True

    def _thread_names(self, seen: set[int]) -> dict[tuple[int, int], str]:
        """ThreadNames, and every thread with OS-runtime calls (listed even without a name).
        When every named process is among `seen` (traced processes already read: a subset of
        `_traced_pids`) none is left out, so the scans of `_traced_pids` (seconds on a large
        export) are only made when a name may belong to an untraced process."""
        db = self.db
        out: dict[tuple[int, int], str] = {}
        if db.has("ThreadNames", "nameId", "globalTid"):
            # a thread named twice: the name of the highest priority, then the lowest string id
            # (never the first row stored: row order is storage, not time)
            order = "priority DESC, " if "priority" in db.cols("ThreadNames") else ""
            rows = [r for r in db.q("SELECT globalTid, nameId FROM ThreadNames"
                                    f" ORDER BY globalTid, {order}nameId")
                    if isinstance(r[0], int)]  # fmt: skip
            strs = db.strings(r[1] for r in rows)
            named = {int(_pid_tid(gtid)[0]) for gtid, _ in rows}
            traced = seen if named <= seen else self._traced_pids()
            for gtid, nid in rows:
                p, t = _pid_tid(gtid)
                if traced and int(p) not in traced:
                    continue
                out.setdefault((int(p), int(t)), strs.get(nid, ""))
        return out

    def _traced_pids(self) -> set[int]:
        """Processes the trace recorded calls of (OS runtime, NVTX, CUDA API, GPU work, CUDA
        contexts). Real exports name far more: with CPU sampling or context-switch tracing,
        ThreadNames lists every thread of the machine (kernel workers, shells, nsys's own
        daemons, other users' python3 processes: measured with nsys 2022.4 and 2023.4), so the
        threads and the main thread are looked for among the traced processes only."""
        db = self.db
        pids = self._cuda_pids()
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
                    for (p,) in db.q(f"SELECT DISTINCT ({col} >> 24) & 16777215 FROM {table}")
                    if isinstance(p, int) and p
                }
        return pids

    def _context_devices(self) -> dict[int, int]:
        """Process -> its first device, from TARGET_INFO_CUDA_CONTEXT_INFO."""
        table = "TARGET_INFO_CUDA_CONTEXT_INFO"
        if not self.db.has(table, "processId", "deviceId"):
            return {}
        return {
            int(p): int(d)
            for p, d in self.db.q(
                f"SELECT processId, min(deviceId) FROM {table} GROUP BY processId"
            )
            if isinstance(p, int) and isinstance(d, int) and p
        }

    def _cuda_pids(self) -> set[int]:
        """Processes that own CUDA contexts or streams (TARGET_INFO tables)."""
        pids: set[int] = set()
        for table in ("TARGET_INFO_CUDA_CONTEXT_INFO", "TARGET_INFO_CUDA_STREAM"):
            if self.db.has(table, "processId"):
                pids |= {
                    int(p)
                    for (p,) in self.db.q(f"SELECT DISTINCT processId FROM {table}")
                    if isinstance(p, int) and p
                }
        return pids

    def _um_migrations(self) -> bool:
        """Whether the memcpy table says why Unified-Memory pages moved."""
        return self.db.has(MEMCPY, "deviceId", "copyKind", "bytes", "migrationCause")

    @staticmethod
    def _um_migration_groups(
        gpu: T.GpuTable, rows: slice, copy: Any, pid: Any, sub: Subset
    ) -> list[tuple[int, ...]] | None:
        """(globalPid, device, kind, cause, count, summed bytes, summed ns) of the UM copies
        among the memcpy rows just read, per (globalPid, device, kind, cause) ascending (what the
        SQL of `_um` gives); None when their causes could not be gathered. `copy`: the copy
        kinds as read; `pid`: the rows' globalPid (None: -1, the table has none)."""
        found = sub.columns()
        if found is None:
            return None
        um = np.flatnonzero(np.isin(copy, list(UM_KINDS)))
        (cause,) = found
        if um.size != cause.size:
            return None
        if um.size == 0:
            return []
        at = um + rows.start
        cols = [
            pid[at] if pid is not None else np.full(um.size, -1, dtype=np.int64),
            gpu.device[at].astype(np.int64),
            copy[um],
            cause,
        ]
        keys, inv = _unique_rows(cols)
        n = np.bincount(inv, minlength=len(keys))
        nbytes = np.zeros(len(keys), dtype=np.int64)
        np.add.at(nbytes, inv, gpu.nbytes[at])
        ns = np.zeros(len(keys), dtype=np.int64)
        np.add.at(ns, inv, gpu.end[at] - gpu.start[at])
        return [
            (*k, c, b, t)
            for k, c, b, t in zip(keys, n.tolist(), nbytes.tolist(), ns.tolist(),
                                  strict=True)
        ]  # fmt: skip

    def _um(
        self, um_copies: bool
    ) -> tuple[T.UnifiedMemoryEvents, dict[int, T.UnifiedMemoryEvents]]:
        """Unified-Memory events of the whole file and per process (pid; -1 where a table has no
        globalPid): CPU page faults (rows: the table has no `end`), GPU page faults (groups =
        rows, faults = sum of numberOfPageFaults) by device and access type, and, when the GPU
        table holds UM copies, the migrations by device, copy kind and `migrationCause`."""
        db = self.db
        whole = T.UnifiedMemoryEvents()
        per: dict[int, T.UnifiedMemoryEvents] = {}

        def both(gp: Any) -> tuple[T.UnifiedMemoryEvents, T.UnifiedMemoryEvents]:
            p = int(_pid_tid(gp)[0]) if isinstance(gp, int) and gp >= 0 else -1
            return whole, per.setdefault(p, T.UnifiedMemoryEvents())

        if db.has(UM_CPU):
            whole.cpu_faults = int(db.q(f"SELECT count(*) FROM {UM_CPU}")[0][0])
            if "globalPid" in db.cols(UM_CPU):
                for gp, n in db.q(f"SELECT globalPid, count(*) FROM {UM_CPU} GROUP BY globalPid"):
                    both(gp)[1].cpu_faults = int(n)
        else:
            self.missing.append(UM_CPU)
        if db.has(UM_GPU, "deviceId"):
            whole.gpu_faults = {}
            cols = db.cols(UM_GPU)
            count = "sum(numberOfPageFaults)" if "numberOfPageFaults" in cols else "count(*)"
            pid = "globalPid" if "globalPid" in cols else "-1"
            access = "faultAccessType" if "faultAccessType" in cols else "0"
            for gp, dev, acc, groups, faults in db.q(
                f"SELECT {pid}, deviceId, {access}, count(*), {count} FROM {UM_GPU}"
                f" GROUP BY {pid}, deviceId, {access}"
            ):
                if not isinstance(dev, int):
                    continue
                for ev in both(gp):
                    ev.add_gpu_faults(dev, _as_int(acc), int(groups), _as_int(faults))
        else:
            self.missing.append(UM_GPU)
        # only when the copies read hold UM kinds: grouped from the memcpy read, else (values
        # that are not all integers) a query, which scans the memcpy table
        if um_copies and self._um_migrations():
            groups = self._um_found
            if groups is None:
                pid = "globalPid" if "globalPid" in db.cols(MEMCPY) else "-1"
                kinds = ",".join(str(k) for k in UM_KINDS)
                groups = db.q(
                    f"SELECT {pid}, deviceId, copyKind, coalesce(migrationCause, 0), count(*),"
                    f' sum(bytes), sum("end" - start) FROM {MEMCPY} WHERE copyKind IN ({kinds})'
                    f" AND {_integral('start')} AND {_integral(END)}"
                    ' AND "end" >= start GROUP BY 1, 2, 3, 4'
                )
            for gp, dev, kind, cause, n, nbytes, ns in groups:
                if not isinstance(dev, int) or not isinstance(kind, int):
                    continue
                for ev in both(gp):
                    ev.add_migrations(
                        dev, kind, _as_int(cause), int(n), _as_int(nbytes), _as_int(ns)
                    )
        return whole, per

    def _peak_memory(self) -> tuple[dict[int, dict[str, dict[int, int]]], str | None]:
        """Peak of the running sum of allocations - frees per memory class (`MEM_CLASSES`: device
        memory, and apart pinned host and managed memory) and device: for the whole file (key
        -1) and per process (the pid of `globalPid`: in a report holding several ranks each
        counts its own allocations); and its source text (None without the table)."""
        db = self.db
        peaks: dict[int, dict[str, dict[int, int]]] = {}
        if not db.has(GPU_MEM, "deviceId", "bytes", "memoryOperationType"):
            return peaks, None
        cols = db.cols(GPU_MEM)
        has_kind = "memKind" in cols
        kind = "memKind" if has_kind else "2"
        pid = "globalPid" if "globalPid" in cols else "-1"
        cur: dict[tuple[int, str, int], int] = {}
        starts: set[int] = set()
        for gp, dev, nbytes, op, k, start in db.conn.execute(
            f"SELECT {pid}, deviceId, bytes, memoryOperationType, {kind}, start FROM {GPU_MEM}"
            # in time; at one nanosecond frees first (no export met has such ties), then the
            # rest of the row: never the stored order
            f" ORDER BY start, memoryOperationType DESC, deviceId, bytes, {kind}, {pid}"
        ):
            cls = MEM_CLASSES.get(k) if isinstance(k, int) else None
            if cls is None or not isinstance(dev, int) or not isinstance(nbytes, int):
                continue
            if cls == "device" and isinstance(start, int):
                starts.add(start)
            p = int(_pid_tid(gp)[0]) if isinstance(gp, int) and gp >= 0 else -2
            for who in (-1, p):
                key = (who, cls, dev)
                cur[key] = cur.get(key, 0) + (-nbytes if op == 1 else nbytes)
                per = peaks.setdefault(who, {}).setdefault(cls, {})
                if cur[key] > per.get(dev, 0):
                    per[dev] = cur[key]
        # short: the CLI prints it on one line; docs/metrics.md says the rest (pinned host and
        # managed memory are peaks of their own)
        kinds = "device memory (memKind 2,3,5)" if has_kind else "every memKind (no such column)"
        # nsys writes the allocations alive when the capture opens as rows at start 0; with no
        # other row the peak is what was held then (torch's caching allocator reuses its pool
        # without calling cudaMalloc), not a peak measured inside the window
        when = "held at capture start" if starts <= {0} else "peak in the window"
        return peaks, f"nsys memory-usage events: {kinds}, {when}"

    def _version(self) -> str | None:
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.db.has(meta, "name", "value"):
                r = self.db.q(f"SELECT value FROM {meta} WHERE name = 'EXPORT_PRODUCT_VERSION'")
                return str(r[0][0]) if r else None
        return None

    def _check_capture(self) -> None:
        """Refuse (exit 1) an export that lost data the workload made (`capture_health`), unless
        GH_RUN_ACCEPT_LOST_DATA=1 asks to read it anyway (then a note)."""
        why = capture_health.lost_data(self.db.conn, self.db.tables)
        if why is None:
            return
        if capture_health.accept_lost():
            self.notes.append(f"this capture lost data: {why}")
            return
        raise RuntimeFailure(
            f"{self.path}: this capture lost data ({why}), so its GPU figures would be wrong;"
            " record it again (nsys 2024.2 or later keeps CUDA 12.5+ kernels that 2023.4 drops),"
            f" or set {capture_health.ACCEPT_ENV}=1 to read what it kept"
        )

    def _schema_note(self) -> None:
        """One note when the export's schema is newer than those gh-run has met (it is read
        for what it has: tables and columns by name)."""
        found = None
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.db.has(meta, "name", "value"):
                r = self.db.q(f"SELECT value FROM {meta} WHERE name = 'EXPORT_SCHEMA_VERSION'")
                found = str(r[0][0]) if r and r[0][0] is not None else None
                break
        note = export_schema.note(found)
        if note:
            self.notes.append(note)

    def read(self) -> list[T.RankTimeline]:
        db = self.db
        try:
            self._check_capture()
            self._schema_note()
            cuda_pids = self._cuda_pids()
            # several processes with CUDA work, or no table that says: read each row's pid
            by_pid = len(cuda_pids) != 1 and any(
                db.has(t, "globalPid") for t in (KERNEL, MEMCPY, MEMSET)
            )
            # the big tables in parts on every core, all queued at once (GPU tables first);
            # the host tables in this thread meanwhile
            pool = ThreadPoolExecutor(max_workers=READ_THREADS)
            try:
                pending = self._gpu_reads(pool, by_pid)
                # the runtime calls' process only matters with several processes (a column of
                # 8 bytes a call otherwise)
                rt_cols = self._runtime_cols(by_pid)
                # the synchronisation calls are gathered in the same scan of the runtime table
                sync_ids = self._sync_ids()
                sync_sub = self._sync_subset(sync_ids) if sync_ids and rt_cols else None
                rt = (
                    PartsRead(pool, self.path, RUNTIME, rt_cols, True, sync_sub)
                    if rt_cols
                    else None
                )
                gpu, gpu_pid = self._gpu(pending)
                del pending
                pids = _ranked_pids(gpu_pid, gpu, self._context_devices())
                if len(pids) > 1 and gpu_pid is None:
                    if gpu.size:  # GPU rows without their process: one rank after all
                        pids = pids[:1]
                    else:
                        gpu_pid = np.zeros(0, dtype=np.int64)
                multi = len(pids) > 1
                seen = set(cuda_pids)
                if gpu_pid is not None and gpu_pid.size:
                    lo, hi = int(gpu_pid.min()), int(gpu_pid.max())
                    seen |= {lo} if lo == hi else {int(p) for p in np.unique(gpu_pid).tolist()}
                if not multi:  # one rank: nothing reads the rows' pids any more
                    gpu_pid = None

                def sync() -> T.HostTable:
                    if rt is not None:
                        rt.wait()
                    got = sync_sub.columns() if sync_sub else None
                    return self._sync_calls(sync_ids, got[0] if got else None)

                host, threads, osrt_traced = self._host(seen, sync)
            finally:
                # parts still queued (a part failed: the error is on its way) are not read
                pool.shutdown(cancel_futures=True)
            self._launches(gpu, gpu_pid if multi else None, rt.take() if rt else iter(()))
            rt = None  # the parts taken are let go
            um_copies = bool(np.isin(gpu.copy, list(UM_KINDS)).any())
            um_whole, um_per_pid = self._um(um_copies)
            peak, peak_source = self._peak_memory()
            gpu_names: dict[int, str] = {}
            if db.has("TARGET_INFO_GPU", "id", "name"):
                gpu_names = {
                    int(i): str(n)
                    for i, n in db.q("SELECT id, name FROM TARGET_INFO_GPU")
                    if isinstance(i, int)
                }
            version = self._version()
            rank_env = env_rank(db)
            samples = gpu_metrics.read(self.path, db.conn)
        finally:
            db.conn.close()
        source = T.SourceInfo(
            path=str(self.path),
            kind="nsys-sqlite",
            tool_version=version,
            missing=sorted(set(self.missing)),
        )
        base = T.RankTimeline(
            source=source,
            names=self.names.table(),
            gpu=gpu,
            host=host,
            threads=threads,
            cuda_pids=cuda_pids,
            single_main_rule="tid == pid (the only process)",
            osrt_traced=osrt_traced,
            device_names=gpu_names,
            peak_memory_source=peak_source,
            hta=T.HtaClock(unit_ns=1, rounds=False, step_filter=False),
            split_devices=True,
            notes=[*self.notes, *samples.notes],
            gpu_samples=samples,
        )
        if rank_env is not None:
            base.rank, base.rank_rule = rank_env[0], f"{rank_env[1]} in the profiled environment"
        if not multi:
            base.pid = pids[0] if pids else (next(iter(cuda_pids)) if len(cuda_pids) == 1 else None)
            base.um = um_whole
            _set_peaks(base, peak.get(-1, {}))
            return [base]
        assert gpu_pid is not None
        out = _split(base, gpu_pid, pids, um_whole, um_per_pid)
        for tl in out:
            _set_peaks(tl, peak.get(tl.pid if tl.pid is not None else -1, {}))
        return out


def _ranked_pids(gpu_pid: Any, gpu: T.GpuTable, contexts: dict[int, int]) -> list[int]:
    """Processes with GPU work or a CUDA context on a device, ordered by their first device,
    then pid: the ranks of a file (a report that stopped before any kernel still names the
    processes of each GPU in TARGET_INFO_CUDA_CONTEXT_INFO)."""
    found: dict[int, int] = dict(contexts)
    if gpu_pid is not None and gpu_pid.size:
        lo, hi = int(gpu_pid.min()), int(gpu_pid.max())
        for p in [lo] if lo == hi else np.unique(gpu_pid).tolist():
            dev = int(gpu.device[gpu_pid == p].min()) if lo != hi else int(gpu.device.min())
            found[int(p)] = min(found.get(int(p), dev), dev)
    return sorted(found, key=lambda p: (found[p], p))


def _split(
    base: T.RankTimeline,
    gpu_pid: Any,
    pids: list[int],
    um_whole: T.UnifiedMemoryEvents,
    um_per_pid: dict[int, T.UnifiedMemoryEvents],
) -> list[T.RankTimeline]:
    """One timeline per process; host rows of processes without GPU work go to the first."""
    out = []
    others = ~np.isin(base.host.pid, pids)
    for i, pid in enumerate(pids):
        hm = base.host.pid == pid
        if i == 0:
            hm |= others
        threads = {
            k: v for k, v in base.threads.items() if k[0] == pid or (i == 0 and k[0] not in pids)
        }
        tl = T.RankTimeline(
            source=base.source,
            names=base.names,
            gpu=base.gpu.take(gpu_pid == pid),
            host=base.host.take(hm),
            rank=base.rank,
            rank_rule=base.rank_rule,
            threads=threads,
            cuda_pids=base.cuda_pids,
            single_main_rule=base.single_main_rule,
            osrt_traced=base.osrt_traced,
            device_names=base.device_names,
            peak_memory_source=base.peak_memory_source,
            um=_um_of(pid, um_whole, um_per_pid),
            hta=base.hta,
            split_devices=True,
            pid=pid,
            process_index=i,
            processes=len(pids),
            notes=base.notes,
            gpu_samples=base.gpu_samples,
        )
        out.append(tl)
    return out


def _set_peaks(tl: T.RankTimeline, peaks: dict[str, dict[int, int]]) -> None:
    tl.peak_memory = peaks.get("device", {})
    tl.peak_pinned_memory = peaks.get("pinned", {})
    tl.peak_managed_memory = peaks.get("managed", {})


def _um_of(
    pid: int, whole: T.UnifiedMemoryEvents, per_pid: dict[int, T.UnifiedMemoryEvents]
) -> T.UnifiedMemoryEvents:
    """One process's UM events: zero faults (not None) where the file traced them."""
    um = per_pid.get(pid, T.UnifiedMemoryEvents())
    if um.cpu_faults is None and whole.cpu_faults is not None:
        um.cpu_faults = 0
    if um.gpu_faults is None and whole.gpu_faults is not None:
        um.gpu_faults = {}
    return um


def _unique_rows(cols: list[Any]) -> tuple[list[tuple[int, ...]], Any]:
    """The distinct rows of equal-length integer columns in ascending (lexicographic) order,
    and each row's index among them: `np.unique(np.stack(cols, 1), axis=0, return_inverse=
    True)` at a fraction of its cost (each column coded by its own sorted values, the codes
    packed into one integer; the few distinct values of each column keep it small)."""
    code = np.zeros(cols[0].size, dtype=np.int64)
    values = []
    room = 1
    for c in cols:
        vals, inv = np.unique(c, return_inverse=True)
        room *= max(vals.size, 1)
        if room >= 1 << 62:  # too many distinct values to pack: the slow way
            rows, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
            return [tuple(k) for k in rows.tolist()], inv.reshape(-1)
        code = code * vals.size + inv.reshape(-1)
        values.append(vals)
    uniq, inv = np.unique(code, return_inverse=True)
    keys: list[tuple[int, ...]] = []
    for k in uniq.tolist():
        row = []
        for vals in reversed(values):
            k, i = divmod(k, vals.size)
            row.append(int(vals[i]))
        keys.append(tuple(reversed(row)))
    return keys, inv.reshape(-1)


def _as_int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) else 0


def _map(ids: Any, lut: dict[int, int]) -> Any:
    """ids → lut[ids] as int32 (a lookup array for small non-negative ids, else np.unique)."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int32)
    lo, hi = int(ids.min()), int(ids.max())
    if lo >= 0 and hi < 1 << 24:
        table = np.zeros(hi + 1, dtype=np.int32)
        for k, v in lut.items():
            if 0 <= k <= hi:
                table[k] = v
        return table[ids]
    keys, inv = np.unique(ids, return_inverse=True)
    vals = np.array([lut[int(k)] for k in keys.tolist()], dtype=np.int32)
    return vals[inv.reshape(-1)]


def read_timelines(path: Path) -> list[T.RankTimeline]:
    """Read one nsys SQLite export: a timeline per process with GPU work (one, with no GPU work
    at all, for the host side)."""
    try:
        return _Reader(path).read()
    except TP.DamagedTable as exc:  # a b-tree that contradicts itself: never a fraction of it
        raise UserError(
            f"{path}: {exc.table} is damaged: {exc.detail}; copy the file again, or export the"
            " report again with `nsys export --type sqlite` (`sqlite3 FILE 'PRAGMA"
            " integrity_check'` lists the damage)"
        ) from exc
    except DAMAGED as exc:  # a damaged file, found partway through the reading
        raise UserError(
            f"{path}: SQLite cannot read this file ({exc}); it is damaged or was cut short:"
            " copy it again, or export the report again with `nsys export --type sqlite`"
        ) from exc
