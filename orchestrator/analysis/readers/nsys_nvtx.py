"""The NVTX ranges of an nsys export into a `HostTable`: the workload's ranges (`ANNOTATION`),
a library's (`LIBRARY_ANNOTATION`: `library_ranges`) and PyTorch's operators (`CPU_OP`, named
by the operator: `torch_ranges`).

`NVTX_EVENTS` (any name `export_tables` resolves): eventType 59 push/pop, 60 start/end and 70
NVtx push/pop ranges are intervals; marks, domain creations and the rest are not, and their
`end` is NULL (nullable in NVIDIA's schema). A range's name is `text` (per row) or
`StringIds[textId]` (registered strings), `text` first.

How it is read (a PyTorch-annotated step holds thousands of ranges, nearly every name unique):
- the integer columns (times, event type, thread, domain, string id, rowid) by the big-table
  reader (`sqlite_columns`: the compiled page reader where it reads exactly, else SQLite); rows
  whose start or end is missing, not an integer, or ends before it starts are no intervals and
  are left out there (a NULL end: a mark; a range type without one gets a note);
- the `text` names of the range rows in chunks of rows, one `group_concat` text each (joined
  by U+001F; a chunk whose names hold that character is read row by row), matched to the rows
  by rowid; PyTorch's suffixes stripped in one pass over each chunk's text
  (`torch_ranges.strip_joined`), names turned into codes by C-level passes: no Python code per
  row;
- the name rules (library, PyTorch operator, step, data wait) run once per distinct name.
Rows are ordered by (start, end, thread, name), names interned in name order: never the stored
order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.families import library_ranges, torch_ranges
from orchestrator.analysis.readers.nsys_db import NVTX, Export, map_ids, pid_tid
from orchestrator.analysis.readers.sqlite_columns import fetch_into, table_shape
from orchestrator.analysis.timeline import model as T

RANGE_TYPES = (59, 60, 70)
UNNAMED = "(unnamed)"
TEXT_CHUNK_ROWS = 250_000
_SEP = "\x1f"  # joins a chunk's names (SQLite's char(31))
_MARK = "\x1e"  # follows a PyTorch operator's name in `_texts`' names
_TEXT = "\x02"  # precedes a name in `_texts`' keys (SQLite's char(2)): "" is a NULL text


def ranges(ex: Export) -> T.HostTable:
    """The NVTX ranges of the export (see the module docstring)."""
    db = ex.db
    if not db.has(NVTX, "start", "end", "eventType"):
        ex.missing.append(NVTX)
        return T.HostTable.empty()
    table = ex.table(NVTX)
    shape = table_shape(ex.path, table, db.conn)
    if shape is None:
        return T.HostTable.empty()
    opt = [c for c in ("globalTid", "domainId", "textId") if db.col(NVTX, c) is not None]
    cols = ["start", "end", "eventType", "rowid", *[str(db.col(NVTX, c)) for c in opt]]
    out = [np.empty(shape.rows, dtype=np.int64) for _ in cols]
    n, skipped = fetch_into(ex.path, table, cols, out, True, shape.whole())
    got = dict(zip(["start", "end", "eventType", "rowid", *opt], (a[:n] for a in out), strict=True))
    del out
    keep = np.isin(got["eventType"], RANGE_TYPES)
    every_row = not skipped and bool(keep.all())  # the rows read are the table's every row
    if not every_row:
        got = {k: v[keep] for k, v in got.items()}
    if skipped:  # rows without a usable end: marks, or ranges never closed
        _note_open_ranges(ex, table, int(keep.sum()))
    rows = got["start"].size
    if rows == 0:
        return T.HostTable.empty()
    none = np.full(rows, -1, dtype=np.int64)
    named = _names(ex, table, got["rowid"], got.get("textId", none), every_row)
    domain = got.get("domainId", np.zeros(rows, dtype=np.int64))
    gtid = got.get("globalTid", np.zeros(rows, dtype=np.int64))
    gtid[gtid < 0] = 0  # NULL: thread unknown, as coalesce(globalTid, 0) reads it
    domain[domain == -1] = 0  # NULL: the default domain
    return _table(ex, got["start"], got["end"], gtid, domain, named)


def _note_open_ranges(ex: Export, table: str, kept: int) -> None:
    """A note for range rows (push/pop, start/end) without a usable end: a range still open
    when the capture stopped, or a damaged row. Marks and other NULL-end rows are no ranges."""
    types = ",".join(map(str, RANGE_TYPES))
    (total,) = ex.db.q(f'SELECT count(*) FROM "{table}" WHERE eventType IN ({types})')[0]
    if int(total) > kept:
        ex.notes.append(
            f"{int(total) - kept} NVTX ranges of {NVTX} left out: no end (still open when the"
            " capture stopped), an end that is not an integer, or an end before the start"
        )


class _Keys:
    """Each row's name as a small integer: the distinct keys interned as they come. A key is
    `_TEXT` then the name (PyTorch's operators: their name, then `_MARK`); the empty key is a
    NULL `text`."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def codes(self, keys: list[str]) -> Any:
        """The codes of `keys` (new ones interned): C-level passes (`dict.fromkeys`, `map`),
        no Python code per row."""
        fresh = [k for k in dict.fromkeys(keys) if k not in self.index]
        for k in fresh:
            self.index[k] = len(self.index)
        return np.fromiter(map(self.index.__getitem__, keys), np.int64, len(keys))

    def code(self, key: str) -> int:
        return int(self.codes([key])[0])


def _names(
    ex: Export, table: str, rowid: Any, text_id: Any, every_row: bool
) -> tuple[Any, list[str], Any]:
    """Each row's name code, the names (PyTorch's operators as their name without suffix) and
    whether each name is a PyTorch-recorded range's: `text` first, else StringIds[textId], else
    UNNAMED. `every_row`: `rowid` holds every row of the table."""
    keys = _Keys()
    null = keys.code("")
    code = np.full(rowid.size, keys.code(_TEXT + UNNAMED), dtype=np.int64)
    ids = [int(i) for i in np.unique(text_id[text_id >= 0]).tolist()]
    if ids:  # registered strings: split once each
        strings = ex.db.strings(ids)
        lut = {i: keys.code(_TEXT + _marked(strings[i])) for i in ids if i in strings}
        has = text_id >= 0
        code[has] = map_ids(text_id[has], {**{i: int(code[0]) for i in ids}, **lut})
    if ex.db.col(NVTX, "text") is not None:
        for pos, chunk in _texts(ex, table, rowid, every_row):
            got = keys.codes(chunk)
            named = got != null  # a NULL text: the name its textId gave
            code[pos[named]] = got[named]
    labels, ops = [], []
    for key in keys.index:  # insertion order: the codes
        name = key[len(_TEXT) :]
        op = name.endswith(_MARK)
        labels.append(name[:-1] if op else name)
        ops.append(op)
    return code, labels, np.array(ops, dtype=bool)


def _marked(name: str) -> str:
    """A name as `_texts` gives it: a PyTorch operator's followed by `_MARK`."""
    op, is_op = torch_ranges.split(name)
    return op + _MARK if is_op else name


def _texts(ex: Export, table: str, rowid: Any, every_row: bool) -> list[tuple[Any, list[str]]]:
    """(positions among `rowid`, keys: `_TEXT` + the marked name (`_marked`), or "" for a NULL
    text) of the rows, read in chunks of rows, one `group_concat` text each, split at once
    (`torch_ranges.strip_joined`). `rowid`: ascending (the reader's order). With `every_row`
    the chunk's rows are exactly `rowid`'s, in order: no condition per row and no rowids to
    read; else the rows with a text and a range type, with their rowids, matched to `rowid`.
    A chunk whose names hold the separator or the mark is read row by row."""
    out: list[tuple[Any, list[str]]] = []
    types = ",".join(map(str, RANGE_TYPES))
    col = ex.db.col(NVTX, "text")
    # `_TEXT` ahead of every text: a NULL is then the only empty key
    key = f'CASE WHEN "{col}" IS NULL THEN \'\' ELSE char(2) || "{col}" END'
    where = "rowid >= ? AND rowid <= ?"
    if not every_row:  # the rows kept are picked by rowid below
        where = f'"{col}" IS NOT NULL AND eventType IN ({types}) AND {where}'
    for first in range(0, rowid.size, TEXT_CHUNK_ROWS):
        part = rowid[first : first + TEXT_CHUNK_ROWS]
        lo, hi = int(part[0]), int(part[-1])
        ids_sql = "NULL" if every_row else "group_concat(rowid)"
        ids_text, joined = ex.db.q(
            f'SELECT {ids_sql}, group_concat({key}, char(31)) FROM "{table}" WHERE {where}',
            (lo, hi),
        )[0]
        if joined is None:
            continue
        joined = str(joined)
        ids = part if every_row else np.fromstring(str(ids_text), sep=",", dtype=np.int64)
        if _MARK not in joined and joined.count(_SEP) + 1 == ids.size:
            names = torch_ranges.strip_joined(joined, _SEP, _MARK).split(_SEP)
        else:  # a name holds the separator or the mark: this chunk row by row
            pairs = ex.db.q(f'SELECT rowid, {key} FROM "{table}" WHERE {where}', (lo, hi))
            ids = np.array([p[0] for p in pairs], dtype=np.int64)
            names = [t[:1] + _marked(t[1:]) if t else t for _, t in pairs]
        del joined
        pos = np.searchsorted(rowid, ids)
        kept = rowid[np.minimum(pos, rowid.size - 1)] == ids  # the rows the time rule kept
        if not bool(kept.all()):
            pos = pos[kept]
            names = [n for n, k in zip(names, kept.tolist(), strict=True) if k]
        out.append((pos, names))
    return out


def _table(
    ex: Export,
    start: Any,
    end: Any,
    gtid: Any,
    domain: Any,
    named: tuple[Any, list[str], Any],
) -> T.HostTable:
    """The HostTable of the ranges: kinds by the name rules (once per distinct name), rows in
    (start, end, thread, name) order, names interned in name order."""
    code, labels, is_op = named
    ordered = sorted(set(labels))
    rank_of = {label: r for r, label in enumerate(ordered)}
    rank = np.array([rank_of[label] for label in labels], dtype=np.int64)
    lib_name = np.array([library_ranges.is_library_name(n) for n in labels], dtype=bool)
    workload = np.array([torch_ranges.stays_workload_range(n) for n in labels], dtype=bool)
    # PyTorch's suffix says who pushed the range: it outweighs a library-like name
    # (`nccl:all_to_all, op_id = 5` is PyTorch's record of a collective, not NCCL's own range)
    kind_of = np.where(is_op & ~workload, T.CPU_OP, T.ANNOTATION).astype(np.int8)
    kind_of[lib_name & ~is_op] = T.LIBRARY_ANNOTATION
    kind = kind_of[code]
    kind[domain != 0] = T.LIBRARY_ANNOTATION
    by_name = rank[code]
    if start.size < 2 or bool((start[1:] > start[:-1]).all()):
        order = np.arange(start.size)  # stored in start order, no ties: that order (exports met)
    else:
        order = np.lexsort((by_name, gtid, end, start))
    ids = np.array([ex.names.id(n) for n in ordered], dtype=np.int32)
    pid, tid = pid_tid(gtid[order])
    return T.HostTable(
        start=start[order],
        end=end[order],
        pid=pid,
        tid=tid,
        kind=kind[order],
        name=ids[by_name[order]],
    )
