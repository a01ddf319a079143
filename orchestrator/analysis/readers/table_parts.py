"""A big table's rows in parts that the reader proves it read: counted, never assumed from the
rowid range.

Rowids are storage, not a row count: an export's tables usually hold rowids 1..N, but a table
may have gaps, a single row at rowid 3e7, or a damaged b-tree whose interior keys or right-most
child point to the wrong place (issue 26: the page reader then found 167 of 2,294 kernels, and
SQLite's own range queries, which seek by the same keys, 2,238). So:

- `shape` says how many rows a table holds and where every `step`-th of them is: from the
  compiled reader's walk of the whole tree by its child pointers, in which every key is checked
  against its neighbours and its parent's bounds and every row against the keys above it
  (`sqlite_pages.shape`); else from SQLite's `count(*)` (which also counts by child pointers,
  never by keys) and `min`/`max(rowid)`;
- `Shape.parts` cuts the table into rowid ranges of a known number of rows at known offsets, so
  the reader's arrays are sized by rows (a row at rowid 2^40 costs one row of memory);
- `check`: each part's reader must have met exactly the rows the shape gave the part (rows kept
  and rows its time rule left out), else the table is damaged (`DamagedTable`) and the reader
  refuses the file in one sentence instead of giving a fraction of it.
"""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from orchestrator.analysis.readers import sqlite_pages


class DamagedTable(Exception):
    """A table whose b-tree does not agree with itself: its rows counted one way and found
    another."""

    def __init__(self, table: str, detail: str) -> None:
        super().__init__(f"table {table}: {detail}")
        self.table = table
        self.detail = detail


@dataclass(frozen=True)
class Part:
    """Rowids lo..hi (both included) of a table, holding `rows` rows, the first of them row
    `offset` of the table."""

    lo: int
    hi: int
    rows: int
    offset: int = 0


@dataclass(frozen=True)
class Shape:
    """A table's rows: how many, the first and last rowid, and (from the compiled reader's walk)
    the rowid of every `step`-th row."""

    table: str
    rows: int
    lo: int
    hi: int
    step: int
    marks: tuple[int, ...] | None = None

    @property
    def dense(self) -> bool:
        """Every rowid from lo to hi holds a row (what exports usually are)."""
        return self.hi - self.lo + 1 == self.rows

    def whole(self) -> Part:
        return Part(self.lo, self.hi, self.rows, 0)

    def parts(self, conn: sqlite3.Connection | None = None) -> list[Part]:
        """The table in parts of `step` rows (the last: the rest), in rowid order; `conn` is
        asked where the rows are when the table has gaps and no marks."""
        if self.dense:
            return arithmetic(self.whole(), self.step)
        if self.marks is not None:
            edges = [*self.marks, self.hi + 1]
            return [
                Part(a, b - 1, min(self.step, self.rows - k * self.step), k * self.step)
                for k, (a, b) in enumerate(itertools.pairwise(edges))
            ]
        if conn is None:
            raise ValueError("a table with gaps in its rowids needs a connection to find its parts")
        return row_bounds(conn, self.table, self.whole(), self.step)


def arithmetic(part: Part, step: int) -> list[Part]:
    """A dense part (every rowid holds a row) in parts of `step` rows."""
    last = part.hi
    return [
        Part(lo, min(lo + step - 1, last), min(step, last - lo + 1), part.offset + lo - part.lo)
        for lo in range(part.lo, last + 1, step)
    ]


def row_bounds(conn: sqlite3.Connection, table: str, part: Part, step: int) -> list[Part]:
    """A part whose rowids have gaps in parts of `step` rows, the rowid where each begins asked
    of SQLite (`OFFSET` steps over rows, not rowids): for tables that are not dense, where
    rowid arithmetic would make parts of no rows or far too many."""
    out: list[Part] = []
    start, done = part.lo, 0
    while part.rows - done > step:
        row = conn.execute(
            f'SELECT rowid FROM "{table}" WHERE rowid >= ? AND rowid <= ? ORDER BY rowid'
            " LIMIT 1 OFFSET ?",
            (start, part.hi, step),
        ).fetchone()
        if row is None or not isinstance(row[0], int) or row[0] <= start:
            raise DamagedTable(
                table,
                f"{part.rows} rows counted between rowids {part.lo} and {part.hi}, fewer found"
                " there in rowid order",
            )
        out.append(Part(start, row[0] - 1, step, part.offset + done))
        start, done = row[0], done + step
    out.append(Part(start, part.hi, part.rows - done, part.offset + done))
    return out


def chunks(conn: sqlite3.Connection, table: str, part: Part, step: int) -> list[Part]:
    """A part in chunks of about `step` rows for SQLite's path: by rowid arithmetic where the
    part is at least half full (each chunk then holds up to `step` rows; at most twice as many
    chunks as rows need), else by rows (`row_bounds`)."""
    if part.hi - part.lo + 1 <= 2 * part.rows + step:
        return [
            Part(lo, min(lo + step - 1, part.hi), 0, 0) for lo in range(part.lo, part.hi + 1, step)
        ]
    return row_bounds(conn, table, part, step)


def shape(conn: sqlite3.Connection, path: Path, table: str, step: int) -> Shape | None:
    """The table's `Shape` (None when it holds no row); `DamagedTable` when SQLite's count and
    rowid bounds contradict each other."""
    lay = sqlite_pages.layout(conn, path, table) if sqlite_pages.available() else None
    if lay is not None:
        tree = sqlite_pages.shape(path, lay, step)
        if tree is not None:
            if tree.rows == 0:
                return None
            return Shape(table, tree.rows, tree.marks[0], tree.last, step, tree.marks)
    # SQLite's count(*) walks the tree by its child pointers and reads each leaf's cell count;
    # min and max come from the tree's edges (two queries: one would scan the table)
    (rows,) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    if not rows:
        return None
    (lo,) = conn.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()
    (hi,) = conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()
    if not isinstance(lo, int) or not isinstance(hi, int) or hi - lo + 1 < rows:
        raise DamagedTable(table, f"{rows} rows counted, but its rowids only run from {lo} to {hi}")
    return Shape(table, int(rows), lo, hi, step)


def check(table: str, part: Part, seen: int) -> None:
    """The part's reader met the rows the shape gave the part, else `DamagedTable`."""
    if seen != part.rows:
        raise DamagedTable(
            table,
            f"its tree holds {part.rows} rows between rowids {part.lo} and {part.hi}, but"
            f" {seen} were found there by rowid",
        )
