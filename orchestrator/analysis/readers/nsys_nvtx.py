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
- the `text` names in the same scan (`sqlite_columns.Text`): the page reader cuts PyTorch's
  suffixes (`torch_ranges.SUFFIXES`) and interns the names where it reads them, handing back each
  row's code and the distinct names (`sqlite_pages.Coded`: Python touches each distinct name
  once); SQLite's path (`group_concat`) gives one text joined by U+001F, PyTorch's suffixes
  stripped in one pass over it (`torch_ranges.strip_joined`) and names turned into codes by
  C-level passes: no Python code per row (where a name holds the joining character the rows are
  read again one by one). Both give the same codes (tests/unit/test_nvtx_codes.py);
- the name rules (library, PyTorch operator, step, data wait) run once per distinct name.
Rows are ordered by (start, end, thread, name), names interned in name order: never the stored
order.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from orchestrator.analysis.readers.nsys_db import NVTX, Export, map_ids, pid_tid
from orchestrator.analysis.readers.sqlite_columns import (
    TEXT_MARK,
    TEXT_SEP,
    Text,
    fetch_into,
    table_shape,
)
from orchestrator.analysis.readers.sqlite_pages import Coded
from orchestrator.analysis.timeline import library_ranges, sort_keys, torch_ranges
from orchestrator.analysis.timeline import model as T

RANGE_TYPES = (59, 60, 70)
UNNAMED = "(unnamed)"
_MARK = "\x1e"  # follows a PyTorch operator's name in `_text_keys`' keys
# PyTorch's suffixes as the page reader cuts them (`sqlite_pages.fetch`'s `cuts`)
_CUTS = tuple(s.encode() for s in torch_ranges.SUFFIXES)


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
    text_col = db.col(NVTX, "text")
    text = Text(text_col, cuts=_CUTS) if text_col is not None else None
    n, skipped = fetch_into(ex.path, table, cols, out, True, shape.whole(), text=text)
    got = dict(zip(["start", "end", "eventType", "rowid", *opt], (a[:n] for a in out), strict=True))
    del out
    none = np.full(n, -1, dtype=np.int64)
    code, labels, is_op = _names(ex, table, got["rowid"], got.get("textId", none), text)
    keep = np.isin(got["eventType"], RANGE_TYPES)
    if not bool(keep.all()):  # marks and other events with an end: no ranges
        got = {k: v[keep] for k, v in got.items()}
        code = code[keep]
    if skipped:  # rows without a usable end: marks, or ranges never closed
        _note_open_ranges(ex, table, int(keep.sum()))
    rows = got["start"].size
    if rows == 0:
        return T.HostTable.empty()
    domain = got.get("domainId", np.zeros(rows, dtype=np.int64))
    gtid = got.get("globalTid", np.zeros(rows, dtype=np.int64))
    gtid[gtid < 0] = 0  # NULL: thread unknown, as coalesce(globalTid, 0) reads it
    domain[domain == -1] = 0  # NULL: the default domain
    return _table(ex, got["start"], got["end"], gtid, domain, (code, labels, is_op))


def _note_open_ranges(ex: Export, table: str, kept: int) -> None:
    """A note for range rows (push/pop, start/end) without a usable end: a range still open
    when the capture stopped, or a damaged row. Marks and other NULL-end rows are no ranges."""
    types = ",".join(map(str, RANGE_TYPES))
    (total,) = ex.db.q(f'SELECT count(*) FROM "{table}" WHERE eventType IN ({types})')[0]
    if int(total) > kept:
        ex.notes.append(
            f"{int(total) - kept} NVTX ranges of {NVTX} left out: no end (still open when the"
            " capture stopped), a start or end that is not an integer or lies beyond 2^62 ns,"
            " or an end before the start"
        )


class _Keys:
    """Each row's name as a small integer: the distinct keys interned as they come. A key is
    `TEXT_MARK` then the name (PyTorch's operators: their name, then `_MARK`); the empty key is a
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
    ex: Export, table: str, rowid: Any, text_id: Any, text: Text | None
) -> tuple[Any, list[str], Any]:
    """Each row's name code, the names (PyTorch's operators as their name without suffix) and
    whether each name is a PyTorch-recorded range's: `text` first (read with the rows: `Text`),
    else StringIds[textId], else UNNAMED."""
    keys = _Keys()
    null = keys.code("")
    code = np.full(rowid.size, keys.code(TEXT_MARK + UNNAMED), dtype=np.int64)
    ids = [int(i) for i in np.unique(text_id[text_id >= 0]).tolist()]
    if ids:  # registered strings: split once each
        strings = ex.db.strings(ids)
        lut = {i: keys.code(TEXT_MARK + _marked(strings[i])) for i in ids if i in strings}
        has = text_id >= 0
        code[has] = map_ids(text_id[has], {**{i: int(code[0]) for i in ids}, **lut})
    if text is not None and rowid.size:
        got = _text_codes(ex, table, rowid, text, keys)
        named = got != null  # a NULL text: the name its textId gave
        code[named] = got[named]
    labels, ops = [], []
    for key in keys.index:  # insertion order: the codes
        name = key[len(TEXT_MARK) :]
        op = name.endswith(_MARK)
        labels.append(name[:-1] if op else name)
        ops.append(op)
    return code, labels, np.array(ops, dtype=bool)


def _marked(name: str) -> str:
    """A name as `_text_keys` gives it: a PyTorch operator's followed by `_MARK`."""
    op, is_op = torch_ranges.split(name)
    return op + _MARK if is_op else name


def _text_codes(ex: Export, table: str, rowid: Any, text: Text, keys: _Keys) -> Any:
    """Each row's code of its key (`_text_keys`): from the page reader's codes where it read
    every row (each distinct name decoded and interned once), else from the keys."""
    if text.coded and not text.parts:
        got = _from_coded(text.coded, keys)
        text.coded.clear()
        if got.size == rowid.size:
            return got
        return keys.codes(_keys_by_rowid(ex, table, rowid, text.col))  # a guard: never met
    if any(c.codes.size for c in text.coded):  # ranges of both readers: read by rowid
        text.parts.clear()
        return keys.codes(_keys_by_rowid(ex, table, rowid, text.col))
    return keys.codes(_text_keys(ex, table, rowid, text))


def _from_coded(parts: list[Coded], keys: _Keys) -> Any:
    """The rows' codes of the page reader's parts: each distinct value's key as `_text_keys`
    makes it (decoded as the connection decodes text, bad bytes as U+FFFD; a cut one marked),
    interned in the order the rows first hold them, as `_Keys.codes` of every row's key would."""
    null = keys.code("")
    out = []
    for part in parts:
        names = [
            TEXT_MARK + v + _MARK if cut else TEXT_MARK + v
            for v, cut in zip(part.texts(), part.cut.tolist(), strict=True)
        ]
        lut = np.append(keys.codes(names), null)  # code -1 (a NULL text): the last entry
        out.append(lut[part.codes])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _text_keys(ex: Export, table: str, rowid: Any, text: Text) -> list[str]:
    """Each row's key: TEXT_MARK + its marked name (`_marked`), or "" for a NULL text; from the
    text read with the rows, split at once (`torch_ranges.strip_joined`). Where a name holds the
    separator or the mark the rows miscount or mislead: read again row by row, by rowid."""
    joined = text.joined()
    text.parts.clear()
    if _MARK not in joined:
        # stripping keeps every separator: the names split from it count the rows as the
        # joined text would (no pass of its own to count them)
        keys = torch_ranges.strip_joined(joined, TEXT_SEP, _MARK).split(TEXT_SEP)
        if len(keys) == rowid.size:
            return keys
        del keys
    del joined
    return _keys_by_rowid(ex, table, rowid, text.col)


def _keys_by_rowid(ex: Export, table: str, rowid: Any, col: str) -> list[str]:
    """`_text_keys` read row by row, by rowid."""
    pairs = ex.db.q(
        f'SELECT rowid, CASE WHEN "{col}" IS NULL THEN \'\' ELSE char(2) || "{col}" END'
        f' FROM "{table}" WHERE rowid IN (SELECT value FROM json_each(?))',
        (json.dumps(rowid.tolist()),),
    )
    by_rowid = {int(r): t[:1] + _marked(t[1:]) if t else t for r, t in pairs}
    return [by_rowid[r] for r in rowid.tolist()]


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
    used = np.zeros(len(labels), dtype=bool)
    used[code] = True  # the names of ranges (not of marks, nor the NULL key)
    ordered = sorted({labels[i] for i in np.flatnonzero(used).tolist()})
    rank_of = {label: r for r, label in enumerate(ordered)}
    rank = np.array([rank_of.get(label, -1) for label in labels], dtype=np.int64)
    lib_name = np.array([library_ranges.is_library_name(n) for n in labels], dtype=bool)
    workload = np.array([torch_ranges.stays_workload_range(n) for n in labels], dtype=bool)
    # PyTorch's suffix says who pushed the range: it outweighs a library-like name
    # (`nccl:all_to_all, op_id = 5` is PyTorch's record of a collective, not NCCL's own range)
    kind_of = np.where(is_op & ~workload, T.CPU_OP, T.ANNOTATION).astype(np.int8)
    kind_of[lib_name & ~is_op] = T.LIBRARY_ANNOTATION
    kind = kind_of[code]
    kind[domain != 0] = T.LIBRARY_ANNOTATION
    ids = np.array([ex.names.id(n) for n in ordered], dtype=np.int32)
    # each code's name id (a code no range holds has no rank: -1, never looked up)
    id_of = np.where(rank >= 0, ids[np.maximum(rank, 0)] if ids.size else 0, -1).astype(np.int32)
    if start.size < 2 or bool((start[1:] > start[:-1]).all()):
        # stored in start order, no ties (the exports met): that order, no gather of the rows
        pid, tid = pid_tid(gtid)
        return T.HostTable(start=start, end=end, pid=pid, tid=tid, kind=kind, name=id_of[code])
    order = sort_keys.lexsort((rank[code], gtid, end, start))
    pid, tid = pid_tid(gtid[order])
    return T.HostTable(
        start=start[order],
        end=end[order],
        pid=pid,
        tid=tid,
        kind=kind[order],
        name=id_of[code[order]],
    )
