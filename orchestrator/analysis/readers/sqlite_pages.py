"""The compiled reader of SQLite table pages (`_sqlite_pages.c`), loaded with ctypes.

`sqlite_columns.fetch_into` has SQLite print a table's integer columns as `group_concat` text that
numpy parses: no Python object per row, yet on the 5 M-kernel benchmark that is most of the
reader's time, and stepping the rows through SQLite's C API instead still spends about 250 ns a
row in SQLite's virtual machine. This walks the table's b-tree in the file and decodes the
records' integers into the same arrays, at a fraction of that (bench/bench_analyze.py); and,
asked, one TEXT column of the kept rows copied out as SQLite's `group_concat` would join it (the
NVTX names of a PyTorch-annotated capture: a million in one scan, bench/bench_torch_ops.py). It
reads only what it can read exactly (integers and NULLs, UTF-8 text in that one column, in a
plain rowid table, in a file not in WAL mode) and gives the rest back (`None`): the SQLite path
then reads it, so what a table gives does not depend on which reader read it
(tests/unit/test_sqlite_pages.py checks both on the same files, hostile ones included). A build
of other calling conventions (an install not rebuilt since the C file changed) answers another
`sqlite_pages_abi()` and is left unused.

The C file is built when gh-run is installed (setup.py: an optional extension; without a C
compiler the install still works and `available()` is False). GH_RUN_NO_NATIVE_SCAN=1 turns it
off, as it does the Kineto scan.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import native

GIVE_UP = -1
NO_ROOM = -2
ROWID = "rowid"


def library_path() -> Path | None:
    """The built reader beside this file, if the install built it."""
    return native.library_path("_sqlite_pages")


_I32, _I64 = ctypes.c_int32, ctypes.c_int64
_P32, _P64 = ctypes.POINTER(_I32), ctypes.POINTER(_I64)
_PVOID, _PP64 = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_P64)
_PU8 = ctypes.POINTER(ctypes.c_uint8)
# The C functions of _sqlite_pages.c as ctypes calls them (checked against the C prototypes by
# tests/unit/test_native_boundary.py).
SIGNATURES = {
    "sqlite_pages_fetch": native.Signature(
        _I64,
        (
            ctypes.c_char_p, _I64, _I64, _I64,  # path, root page, rowid range
            _I32, _P32, _P32, _PVOID, _I64,  # dests: count, columns, widths
            _I32, _I32,  # start, end columns
            _I32, _P64, _I32,  # subset: condition column, its values
            _I32, _P32, _P64, _PP64, _P64,  # subset columns, NULL defaults, arrays, counts
            _I32, _PU8, _I64, _P64,  # text column, its buffer, capacity, length
            _PU8, _I64, _P32, _P64, _PU8, _P64,  # codes: cut patterns, codes, distinct values
            _P64,  # rows seen
        ),
    ),
    "sqlite_pages_shape": native.Signature(
        _I64, (ctypes.c_char_p, _I64, _I64, _P64, _I64, _P64, _P64, _P64)
    ),
    "sqlite_pages_abi": native.Signature(_I32, ()),
}  # fmt: skip
# `sqlite_pages_abi()` of a build whose functions take the arguments declared here (2: the text
# column of `fetch`; 3: its codes and distinct values); a stale build (an install not rebuilt
# since) answers otherwise or lacks it
ABI = 3


def _library() -> Any | None:
    lib = native.load("_sqlite_pages", SIGNATURES)
    if lib is not None and lib.sqlite_pages_abi() != ABI:
        return None  # built from another version of the C file: SQLite's path serves
    return lib


_LIB = _library()


def available() -> bool:
    """Whether the compiled reader is built and loads."""
    return _LIB is not None


@dataclass(frozen=True)
class Layout:
    """Where a table is in its file: the root page of its b-tree and each column's place in its
    records."""

    root: int
    index: dict[str, int]

    def col(self, name: str) -> int:
        return -1 if name == ROWID else self.index[name]


def layout(conn: sqlite3.Connection, path: Path, table: str) -> Layout | None:
    """The layout of a plain rowid table whose every column is stored in its records, in a file
    this reader may read by itself (no -wal or -journal file beside it that SQLite would read
    too); None otherwise."""
    for side in ("-wal", "-journal"):
        f = Path(f"{path}{side}")
        if f.exists() and (side == "-journal" or f.stat().st_size > 0):
            return None
    row = conn.execute(
        "SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if row is None or not isinstance(row[0], int) or row[0] < 1:
        return None
    if not isinstance(row[1], str) or "WITHOUT ROWID" in row[1].upper():
        return None
    index: dict[str, int] = {}
    # table_xinfo: cid is the place in the record; `hidden` marks generated columns (a virtual
    # one is not stored) and `pk` an INTEGER PRIMARY KEY (stored as NULL: the rowid is its value)
    for cid, name, decl, _, _, pk, hidden in conn.execute(f'PRAGMA table_xinfo("{table}")'):
        if hidden or (pk and str(decl).upper() == "INTEGER"):
            return None
        if str(name).lower() in ("rowid", "oid", "_rowid_"):  # SQL's `rowid` would mean it
            return None
        index[str(name)] = int(cid)
    return Layout(int(row[0]), index)


@dataclass(frozen=True)
class TreeShape:
    """What a table's b-tree holds, found by walking every page by its child pointers (keys
    ascending and bounding their children, rows within their bounds and ascending, no page
    twice): its rows, the rowid of every `step`-th row (row 0 first) and of the last."""

    rows: int
    marks: tuple[int, ...]
    last: int


def shape(path: Path, lay: Layout, step: int) -> TreeShape | None:
    """The table's `TreeShape`, or None where a check failed (a damaged tree, or a file this
    reader does not read alone: SQLite's count and rowid bounds then serve)."""
    assert _LIB is not None
    # a row takes at least 4 bytes of its page (its 2-byte cell pointer, a payload length and
    # a rowid), so the file's size bounds the rows and with them the marks
    size = path.stat().st_size
    cap = max(size // 4 // max(step, 1) + 2, 2)
    marks = (ctypes.c_int64 * cap)()
    nmarks, rows, last = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    got = _LIB.sqlite_pages_shape(
        os.fsencode(path), lay.root, step, marks, cap, *map(ctypes.byref, (nmarks, rows, last))
    )
    if got != 0:
        return None
    return TreeShape(int(rows.value), tuple(marks[: nmarks.value]), int(last.value))


@dataclass(frozen=True)
class Coded:
    """A TEXT column of the kept rows as codes (`fetch`'s `cuts`): each row's code (int32;
    -1 a NULL); the distinct values in order of first appearance, each after its cut, as UTF-8
    bytes back to back in `data` (value k ends at `ends[k]`); whether each was cut (`cut`,
    bool)."""

    codes: Any
    data: bytes
    ends: Any
    cut: Any

    def values(self) -> list[bytes]:
        """The distinct values' bytes."""
        return [self.data[a:b] for a, b in itertools.pairwise([0, *self.ends.tolist()])]

    def texts(self) -> list[str]:
        """The distinct values as text, each decoded on its own as the connection decodes text
        (bad bytes as U+FFFD): all ASCII (the common case), one decode of the whole and
        slices of it."""
        bounds = itertools.pairwise([0, *self.ends.tolist()])
        if self.data.isascii():
            whole = self.data.decode("ascii")
            return [whole[a:b] for a, b in bounds]
        return [self.data[a:b].decode("utf-8", "replace") for a, b in bounds]


@dataclass
class Read:
    """What one call read: rows kept, rows the range held, the subset's columns, the text
    column's values (`fetch`'s `text`; None: none asked), or their codes (`fetch`'s `cuts`)."""

    kept: int
    seen: int
    subset: list[Any]
    text: bytes | None = None
    coded: Coded | None = None


def fetch(
    path: Path,
    lay: Layout,
    bounds: tuple[int, int],
    cols: list[str],
    out: list[Any],
    has_times: bool,
    cond: str | None = None,
    values: tuple[int, ...] = (),
    sub: tuple[tuple[str, int], ...] = (),
    text: str | None = None,
    cuts: tuple[bytes, ...] | None = None,
) -> Read | None:
    """The rows with bounds[0] <= rowid <= bounds[1] into `out` (column i of `cols` into out[i]:
    1-D contiguous integer arrays that hold the range); with `has_times`, only the rows whose
    start and end are integers and end >= start. With `cond`: the subset, rows whose `cond`
    column holds one of `values`, with the columns of `sub` (name, its value for NULL). With
    `text`: that TEXT column of the kept rows, as SQLite's `group_concat(CASE WHEN c IS NULL THEN
    '' ELSE char(2) || c END, char(31))` writes it (UTF-8 bytes); with `cuts` too, that column
    as codes instead (`Coded`: each value cut where the first of the `cuts` patterns starts,
    then interned; a million PyTorch operator names touched once per distinct operator in
    Python). None when the range holds what this reader leaves to SQLite (see the module
    docstring)."""
    assert _LIB is not None
    cap = min(a.size for a in out) if out else 0
    for a in out:
        if a.dtype.kind != "i" or a.dtype.itemsize not in (1, 2, 4, 8) or a.ndim != 1:
            raise ValueError(f"cannot store into an array of {a.dtype}, {a.ndim}-D")
        if not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError("cannot store into a strided or read-only array")
    try:
        src = [lay.col(c) for c in cols]
        times = (lay.col("start"), lay.col("end")) if has_times else (-1, -1)
        cond_col = lay.col(cond) if cond is not None else -1
        sub_src = [lay.col(c) for c, _ in sub]
        text_col = lay.col(text) if text is not None else -1
    except KeyError:
        return None  # a column the table lacks: SQLite names it
    if text is not None and text_col < 0:
        return None  # the rowid is no text
    if cuts is not None and (text is None or any(not c or b"\0" in c for c in cuts)):
        raise ValueError("cut patterns need a text column, and are non-empty without a 0 byte")
    pats = b"".join(c + b"\0" for c in cuts or ())
    i32, i64 = ctypes.c_int32, ctypes.c_int64
    p64 = ctypes.POINTER(i64)

    def arr(ctype: Any, items: list[Any]) -> Any:
        return (ctype * max(len(items), 1))(*items)

    nsub = len(sub) if cond is not None else 0
    # the text's room: a row's separator and prefix and its bytes, which the file's size bounds;
    # doubled while too small (NO_ROOM), up to that bound
    room = min(path.stat().st_size + 2 * cap + 1, 64 * cap + (1 << 20)) if text else 0
    while True:
        subs = [np.empty(cap, dtype=np.int64) for _ in range(nsub)]
        subn = arr(i64, [0] * nsub)
        seen, tlen = i64(), i64()
        # numpy's empty: no page of the room is written before the reader writes it
        tbuf = np.empty(max(room, 1), dtype=np.uint8) if text else None
        coding = cuts is not None
        codes = np.empty(max(cap, 1) if coding else 0, dtype=np.int32)
        ends = np.empty(max(cap, 1) if coding else 0, dtype=np.int64)
        was_cut = np.empty(max(cap, 1) if coding else 0, dtype=np.uint8)
        nnames = i64()
        kept = _LIB.sqlite_pages_fetch(
            os.fsencode(path), lay.root, bounds[0], bounds[1],
            len(out), arr(i32, src), arr(i32, [a.dtype.itemsize for a in out]),
            arr(ctypes.c_void_p, [a.ctypes.data for a in out]), cap, *times,
            cond_col, arr(i64, list(values)), len(values),
            nsub, arr(i32, sub_src), arr(i64, [d for _, d in sub]),
            arr(p64, [s.ctypes.data_as(p64) for s in subs]), subn,
            text_col, tbuf.ctypes.data_as(_PU8) if tbuf is not None else None, room,
            ctypes.byref(tlen),
            ctypes.cast(ctypes.c_char_p(pats), _PU8) if pats else None, len(pats),
            codes.ctypes.data_as(_P32) if coding else None,
            ends.ctypes.data_as(_P64) if coding else None,
            was_cut.ctypes.data_as(_PU8) if coding else None,
            ctypes.byref(nnames), ctypes.byref(seen),
        )  # fmt: skip
        bound = path.stat().st_size + 2 * cap + 1
        if kept == NO_ROOM and text and room < bound:
            room = min(2 * room, bound)
            continue
        break
    if kept < 0:
        return None
    subset = [s[: subn[j]].copy() for j, s in enumerate(subs)]
    if tbuf is not None and cuts is not None:
        k = int(nnames.value)
        data = tbuf[: tlen.value].tobytes()
        coded = Coded(codes[:kept].copy(), data, ends[:k].copy(), was_cut[:k].astype(bool))
        return Read(int(kept), int(seen.value), subset, coded=coded)
    got = tbuf[: tlen.value].tobytes() if tbuf is not None else None
    return Read(int(kept), int(seen.value), subset, got)
