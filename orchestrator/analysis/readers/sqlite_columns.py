"""The integer columns of a big SQLite table, read as numpy arrays: by the compiled reader of the
file's pages (`sqlite_pages`) where it reads a range exactly, else through SQLite.

The table is read in parts of `PART_ROWS` rows that a thread pool reads on every core
(`TableRead`, `PartsRead`; `table_parts`: the rows counted from the b-tree, never taken from the
rowid range, and each part's read checked against that count: a damaged tree is refused, never
read in part). SQLite's path (`fetch_into`): `group_concat` in rowid chunks parsed by numpy, no
Python object per row, one query per chunk. A `Subset` gathers columns of some of the rows in the
same scan (a second scan of a large table saved). Rows whose start or end is not an integer
(text in a numeric column) are left out and counted; other columns are read as SQLite's
`CAST(... AS INTEGER)` reads them, a NULL as -1.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import sqlite_pages
from orchestrator.analysis.readers import table_parts as TP
from orchestrator.analysis.readers.nsys_db import connect_ro
from orchestrator.analysis.readers.sql_integers import a_time, integral
from orchestrator.core.errors import UserError

FETCH_CHUNK_ROWS = 250_000
END = '"end"'  # a keyword of SQL: quoted wherever the column is named
# a big table is read in parts of this many rows, each a job of the reader's thread pool
PART_ROWS = 1_000_000
# the reader's threads: the parts of the big tables (SQLite releases the GIL while it reads)
READ_THREADS = min(max(os.cpu_count() or 2, 2), 4)


def table_shape(path: Path, table: str, conn: sqlite3.Connection | None = None) -> TP.Shape | None:
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
    columns differ in length (neither happens to texts of CAST integers: a guard)."""
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
    synchronisation calls among the runtime rows). The rows: those kept whose column `cond`
    holds one of `values`; their columns: `cols`, each (column or "rowid", its value for NULL).
    Both readers pick the same rows and values: the page reader those whose `cond` is one of the
    integers (a NULL is none), SQLite those whose `cond` CAST to an integer is (a NULL casts to
    NULL); so a caller may match them to the rows read by the `cond` column's values.
    `columns()` holds them after the read."""

    cond: str
    values: tuple[int, ...]
    cols: tuple[tuple[str, int], ...]
    parts: list[list[Any]] = field(default_factory=list)

    @property
    def where(self) -> str:
        """The condition in SQL (an OR list of a few values costs less than an IN list)."""
        cond = f'CAST("{self.cond}" AS INTEGER)'
        if len(self.values) > 8:
            return f"{cond} IN ({','.join(str(int(v)) for v in self.values)})"
        return " OR ".join(f"{cond} = {int(v)}" for v in self.values) or "0"

    @property
    def exprs(self) -> list[str]:
        """The columns in SQL."""
        return [
            c if c == "rowid" else f'CAST(coalesce("{c}", {int(d)}) AS INTEGER)'
            for c, d in self.cols
        ]

    def empty(self) -> Subset:
        """A subset of the same rows and columns, not read yet."""
        return Subset(self.cond, self.values, self.cols)

    def absorb(self, part: Subset) -> None:
        """Take what `part` (one of `empty()`, read over the next rowid range) gathered."""
        self.parts += part.parts
        part.parts = []

    def columns(self) -> list[Any]:
        if not self.parts:
            return [np.zeros(0, dtype=np.int64) for _ in self.cols]
        return [np.concatenate(c) for c in zip(*self.parts, strict=True)]


TEXT_SEP = "\x1f"  # joins the rows' values in a `Text` (SQLite's char(31))
TEXT_MARK = "\x02"  # precedes each non-NULL value in a `Text` (char(2)): "" is a NULL


@dataclass
class Text:
    """One TEXT column of the kept rows, read in the scan that reads a table's integer columns
    (a second scan of a million NVTX names saved): every row's value as `TEXT_MARK` + the
    value, or "" for a NULL, rows joined by `TEXT_SEP`, in the rows' order; what SQLite's
    `group_concat(CASE WHEN c IS NULL THEN '' ELSE char(2) || c END, char(31))` writes, which is
    what the page reader writes too (`sqlite_pages.fetch`'s `text`). `joined()` after the read;
    a value holding `TEXT_SEP` makes the rows miscount: the caller checks the count.

    With `cuts` (byte patterns), the page reader hands back the rows' codes and the distinct
    values, each cut where the first pattern starts (`sqlite_pages.Coded`, in `coded`), instead
    of the joined text; the ranges SQLite reads still come as joined text (`parts`): a caller
    takes `coded` where `parts` is empty, else reads the text."""

    col: str
    parts: list[str] = field(default_factory=list)
    cuts: tuple[bytes, ...] | None = None
    coded: list[sqlite_pages.Coded] = field(default_factory=list)

    @property
    def expr(self) -> str:
        c = f'"{self.col}"'
        return f"group_concat(CASE WHEN {c} IS NULL THEN '' ELSE char(2) || {c} END, char(31))"

    def joined(self) -> str:
        return TEXT_SEP.join(self.parts)


def _parse_into(texts: list[Any], dests: list[Any], n: int, table: str) -> int | None:
    """`_parse` into `dests[i][n:]`, each text dropped from `texts` once parsed (a chunk's texts
    are tens of MB: no more than one of them and its array alive at a time); the rows parsed,
    or None (a guard: texts of CAST integers always parse). More rows than the arrays
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
    subset: Subset | None = None,
    text: Text | None = None,
    whole: tuple[str, ...] = (),
) -> tuple[int, int]:
    """Fill `out[i][:n]` with column i of the rows of a table (or of `part`: a rowid range and
    the rows it holds, `table_parts`) whose integer start <= end, and return (n, rows left out);
    `out` arrays must hold the part's rows. The rows met must be the rows the part holds, else
    `table_parts.DamagedTable` (a damaged b-tree: refused, never a fraction of the table).
    `subset`: columns of some of the rows read, gathered in the same scan; `text`: one TEXT
    column of the rows kept, likewise. `whole`: columns whose rows are left out (and counted)
    when they hold text, a blob or a real that is not an integer, where CAST would read a
    number that is not there (text as 0); a NULL is kept as -1, as the page reader keeps it
    (which leaves every range holding such a value to this path, so both read the same rows).

    With the compiled reader built (`sqlite_pages`) the rows are read from the file's pages, in
    one call for the range. What it leaves to SQLite (a text or real value, a file or table it
    does not read), or every range without it, is read by one query per rowid range of
    `FETCH_CHUNK_ROWS` rows: `group_concat` builds comma-separated text inside SQLite (C speed,
    GIL released) and numpy parses it, no Python object per row. The query is the one that is
    right for every value: rows whose start and end are integers (or reals of an integral
    value) and end >= start, every column CAST to an integer and a NULL as -1: what the page
    reader stores for the integers and NULLs it reads."""
    conn = connect_ro(path)
    try:
        if part is None:
            shape = table_shape(path, table, conn)
            if shape is None:
                return 0, 0
            part = shape.whole()
        if sqlite_pages.available():
            got = _fetch_native(conn, path, table, cols, out, has_times, part, subset, text)
            if got is not None:
                return got
        # the time rule's types: `group_concat` prints the text '7' as it prints the integer 7,
        # and CAST reads a field of white space as 0 (a fuzzed export kept a kernel whose end
        # was a tab, at end 0, where SQLite's own scan leaves it out)
        times = f' AND {a_time("start")} AND {a_time(END)} AND "end" >= start' if has_times else ""
        for col in whole:
            quoted = f'"{col}"'
            times += f" AND (typeof({quoted}) = 'null' OR {integral(quoted)})"
        # the lowest rowid the scan met: a damaged tree can walk SQLite's range scan (a seek by
        # the keys, then leaf after leaf) past the range's lower end (its upper end is checked
        # on every row)
        aggs = ["min(rowid)"] + [
            f'group_concat(CAST(coalesce("{c}", -1) AS INTEGER))' for c in cols
        ]
        if subset is not None:
            aggs += [f"group_concat({e}) FILTER (WHERE {subset.where})" for e in subset.exprs]
        if text is not None:
            aggs.append(text.expr)
        # named parameters, bound from a mapping (Python 3.12 deprecates numbered ones bound
        # from a sequence, and 3.14 refuses them)
        sql = (
            "SELECT " + ", ".join(aggs)
            + f' FROM "{table}" WHERE rowid >= :lo AND rowid <= :hi{times}'
        )  # fmt: skip
        n = seen = 0
        for chunk in TP.chunks(conn, table, part, FETCH_CHUNK_ROWS):
            row = conn.execute(sql, {"lo": chunk.lo, "hi": chunk.hi}).fetchone()
            if text is not None:
                if row[-1] is not None:  # NULL: the chunk kept no row
                    text.parts.append(str(row[-1]))
                row = row[:-1]
            lowest, texts, side = row[0], list(row[1 : 1 + len(cols)]), row[1 + len(cols) :]
            del row  # only `texts` holds the chunk's text, freed as it is parsed
            k = _parse_into(texts, out, n, table)
            gathered = _parse(side) if subset is not None else []
            if k is None or gathered is None:
                raise UserError(f"{path}: {table} holds values gh-run cannot read as integers")
            if subset is not None:
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
                    f'SELECT count(*) FROM "{table}" WHERE rowid >= ? AND rowid <= ?',
                    (chunk.lo, chunk.hi),
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
    text: Text | None = None,
) -> tuple[int, int] | None:
    """`fetch_into` by the compiled reader of the file's pages: (rows, rows left out), or None
    when it left the range to SQLite (which is then checked the same way)."""
    lay = sqlite_pages.layout(conn, path, table)
    if lay is None:
        return None
    read = sqlite_pages.fetch(
        path, lay, (part.lo, part.hi), cols, out, has_times,
        subset.cond if subset is not None else None,
        subset.values if subset is not None else (),
        subset.cols if subset is not None else (),
        text=text.col if text is not None else None,
        cuts=text.cuts if text is not None else None,
    )  # fmt: skip
    if read is None:
        return None
    TP.check(table, part, read.seen)
    if subset is not None:
        subset.parts.append(read.subset)
    if text is not None and read.coded is not None:
        text.coded.append(read.coded)
    elif text is not None and read.kept:
        # decoded as the connection decodes text (`nsys_db.connect_ro`: bad bytes as U+FFFD)
        text.parts.append((read.text or b"").decode("utf-8", "replace"))
    return read.kept, read.seen - read.kept


def fetch_columns(
    path: Path,
    table: str,
    cols: list[str],
    has_times: bool = True,
    subset: Subset | None = None,
) -> list[Any]:
    """`fetch_into` new int64 arrays (sized by the table's rows), trimmed to the rows read."""
    return fetch_columns_counted(path, table, cols, has_times, subset)[0]


def fetch_columns_counted(
    path: Path,
    table: str,
    cols: list[str],
    has_times: bool = True,
    subset: Subset | None = None,
    whole: tuple[str, ...] = (),
) -> tuple[list[Any], int]:
    """`fetch_columns`, and the number of rows left out (by the time rule, or by `whole`)."""
    shape = table_shape(path, table)
    if shape is None:
        return [np.zeros(0, dtype=np.int64) for _ in cols], 0
    out = [np.empty(shape.rows, dtype=np.int64) for _ in cols]
    n, left = fetch_into(path, table, cols, out, has_times, shape.whole(), subset, whole=whole)
    return [a[:n] for a in out], left


def _parts(path: Path, shape: TP.Shape) -> list[TP.Part]:
    """The parts of `PART_ROWS` rows (whole chunks) of a big table, for `TableRead` and
    `PartsRead`."""
    if shape.dense or shape.marks is not None:
        return shape.parts()
    conn = connect_ro(path)
    try:
        return shape.parts(conn)
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
        parts = _parts(path, shape)
        self.parts: list[tuple[int, Subset | None, Any]] = []
        for part in parts:
            off = part.offset
            sub = subset.empty() if subset else None
            # each part writes its own rows' slice only (a damaged tree cannot spill into the next)
            dests = [a[off : off + part.rows] for a in out]
            fut = pool.submit(fetch_into, path, table, cols, dests, has_times, part, sub)
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
        shape = table_shape(path, table)
        if shape is None:
            return
        parts = _parts(path, shape)
        for part in parts:
            out = [np.empty(part.rows, dtype=np.int64) for _ in cols]
            sub = subset.empty() if subset else None
            fut = pool.submit(fetch_into, path, table, cols, out, has_times, part, sub)
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
