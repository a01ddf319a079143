"""One nsys export opened for reading: the read-only connection, the tables and columns it has,
its string ids, and what the read of its tables gathers besides the timelines (`Export`).

The file is opened read-only (`mode=ro` URI) and every string in it is data. A file that is not
an nsys export (no table an export has, or an empty file) is refused in one sentence. Tables and
columns that a trace option did not produce, or that an nsys version names differently, are
tolerated: what they feed is left empty and the table is listed in `SourceInfo.missing`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import export_schema, export_tables
from orchestrator.analysis.timeline import model as T
from orchestrator.core.errors import UserError

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
# whole CUDA graph executions (nsys --cuda-graph-trace=graph, its default): one row a launch
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
UM_CPU = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"
UM_GPU = "CUDA_UM_GPU_PAGE_FAULT_EVENTS"
GPU_MEM = "CUDA_GPU_MEMORY_USAGE_EVENTS"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"

# every table gh-run reads, by the name it knows it by (`export_tables` finds each in an export)
KEYS = frozenset(
    {
        *export_schema.READ_COLUMNS,
        "META_DATA_EXPORT",
        "META_DATA_CAPTURE",
        UM_CPU,
        "TARGET_INFO_SESSION_START_TIME",
        "ENUM_DIAGNOSTIC_SEVERITY_LEVEL",
        "ANALYSIS_DETAILS",
        "GPU_METRICS",
        "TARGET_INFO_GPU_METRICS",
        "COMPOSITE_EVENTS",
        "SAMPLING_CALLCHAINS",
    }
)

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


class Db:
    """Schema probing and string lookups on one read-only connection. Tables are asked for by
    the name gh-run knows them by (`KEYS`); `name(key)` is the table the export holds for it
    (`export_tables`: versioned and older names, any case), the name every query uses."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect_ro(path)
        try:
            self.schema = export_tables.read_schema(self.conn, KEYS)
        except DAMAGED as exc:
            self.conn.close()
            raise UserError(f"{path}: not a readable SQLite file ({exc})") from exc
        self.tables = self.schema.keys()
        self._cols: dict[str, set[str]] = {}

    def check_export(self) -> None:
        if not self.tables & EXPORT_TABLES:
            self.conn.close()
            shown = ", ".join(sorted(self.tables)[:5]) or "none"
            raise UserError(
                f"{self.path}: an SQLite file but not an nsys export (tables: {shown}); pass the"
                " file `nsys export --type sqlite` wrote for the report"
            )

    def name(self, table: str) -> str:
        """The export's table for `table` (a key, or a name no key resolves)."""
        return self.schema.name(table)

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = (
                {r[1] for r in self.conn.execute(f'PRAGMA table_info("{self.name(table)}")')}
                if table in self.tables
                else set()
            )
        return self._cols[table]

    def col(self, table: str, col: str) -> str | None:
        """The table's spelling of column `col` (`export_tables.column`), None without it."""
        return export_tables.column(self.cols(table), table, col)

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and all(self.col(table, c) is not None for c in cols)

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def strings(self, ids: Iterable[int]) -> dict[int, str]:
        want = sorted({i for i in ids if isinstance(i, int)})
        out: dict[int, str] = {}
        if "StringIds" not in self.tables:
            return out
        table = self.name("StringIds")
        for i in range(0, len(want), 500):
            chunk = want[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(
                (int(k), str(v))
                for k, v in self.q(f'SELECT id, value FROM "{table}" WHERE id IN ({marks})', chunk)
                if isinstance(k, int)
            )
        return out

    def kernel_name_col(self) -> str | None:
        return self.col(KERNEL, "name")

    def schema_notes(self) -> list[str]:
        """What the reader should say about the tables and columns it resolved: a versioned
        table read in another's place, a table renamed beyond what gh-run knows, and columns
        gh-run reads that a present table holds under no spelling it knows."""
        out = self.schema.notes(KEYS)
        for key, wanted in sorted(export_schema.READ_COLUMNS.items()):
            if key not in self.tables:
                continue
            lacking = [c for c in wanted if self.col(key, c) is None]
            if key == KERNEL and self.kernel_name_col() is not None:
                # one name column of several is enough (older exports have fewer)
                lacking = [c for c in lacking if c not in ("demangledName", "shortName")]
            if lacking:
                where = self.name(key)
                shown = f"{key} (as {where})" if where != key else key
                out.append(
                    f"{shown} has no column {', '.join(lacking)} (renamed or dropped in this"
                    " schema): what it feeds is read without it"
                )
        return out


@dataclass
class Export:
    """One export being read (`nsys_sqlite`): its connection, the names of the timeline, and
    what the read of its tables finds besides rows: tables it lacks, notes for the user."""

    path: Path
    db: Db
    names: T.Names = field(default_factory=T.Names)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def opt(self, table: str, *cols: str) -> list[str]:
        """The columns among `cols` that the table has."""
        return [c for c in cols if c in self.db.cols(table)]

    def table(self, key: str) -> str:
        """The export's table for `key` (`Db.name`)."""
        return self.db.name(key)


def pid_tid(gtid: Any) -> tuple[Any, Any]:
    """(pid, tid) of serialized nsys GlobalIds: `(vmId << 48) | (pid << 24) | tid`."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


def as_int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) else 0


def map_ids(ids: Any, lut: dict[int, int]) -> Any:
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
