"""A vectorised parser of the text layout libkineto writes: numpy over the bytes of a batch of
events, no Python object per event except the interned names.

libkineto writes every complete event the same way (tests/data/traces):

      {
        "ph": "X", "cat": "kernel", "name": "...", "pid": 0, "tid": 7,
        "ts": 4517054407644.900, "dur": 317.123,
        "args": {
          "External id": 2053,  "device": 0, "context": 1,  "stream": 7, "correlation": 25109
        }
      }

so each field is found at a fixed literal after the previous one, numbers are read digit by digit
for all events at once (timestamps straight to integer nanoseconds: Kineto writes microseconds
with three decimals, so nothing is rounded), and an argument is a `"key": ` literal found
anywhere in the batch and assigned to the event whose block holds it (JSON strings cannot hold a
raw quote, so the literal is always a key). `parse` checks itself and returns None, leaving the
batch to orjson, when anything differs: a complete event not in this layout (their count must
equal the count of `"ph": "X"`), a name with an escape, a number in another notation, a `stream`
or `correlation` on an event other than GPU work and CUDA API calls (HTA would count it, and
the generic path keeps it), a `thread_name` record it cannot read.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson

_PREFIX = b'{\n    "ph": "X", "cat": "'
_NAME = b'", "name": "'
_PID = b'", "pid": '
_TID = b', "tid": '
_TS = b',\n    "ts": '
_DUR = b', "dur": '
_END = b"\n  }"
_DIGITS = 20  # longest number read
_PAD = 32  # zero bytes after the text, so that fixed-width windows never run off its end


def find_all(a: Any, lit: bytes) -> Any:
    """Start positions (sorted) of a literal in a uint8 array: its first 8 (or 4) bytes compared
    as one machine word at each of the 8 (or 4) alignments, the rest checked on the hits."""
    w = 8 if len(lit) >= 8 else 4 if len(lit) >= 4 else 1
    if w == 1:
        cand = np.flatnonzero(a == lit[0])
    else:
        dt = np.uint64 if w == 8 else np.uint32
        key = np.frombuffer(lit[:w], dtype=dt)[0]
        parts = []
        for k in range(w):
            m = (a.size - k) // w
            if m > 0:
                words = np.frombuffer(a.data, dtype=dt, count=m, offset=k)
                parts.append(np.flatnonzero(words == key) * w + k)
        cand = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    for k in range(w, len(lit)):
        if cand.size == 0:
            break
        cand = cand[cand + k < a.size]
        cand = cand[a[cand + k] == lit[k]]
    return cand


def _rows(a: Any, pos: Any, width: int) -> Any:
    """The `width` bytes from each position, as an (n, width) array: rows of a sliding-window
    view of the padded buffer, so no index matrix is built."""
    win = np.lib.stride_tricks.sliding_window_view(a, width)
    return win[np.clip(pos, 0, win.shape[0] - 1)]


def _at(a: Any, pos: Any, lit: bytes) -> Any:
    """Mask: the literal starts at each position."""
    return (pos >= 0) & (_rows(a, pos, len(lit)) == np.frombuffer(lit, dtype=np.uint8)).all(axis=1)


def _next(sorted_pos: Any, after: Any) -> Any:
    """The first of sorted_pos at or after each position (a.size past the last)."""
    i = np.searchsorted(sorted_pos, after)
    out = np.full(after.size, np.iinfo(np.int64).max, dtype=np.int64)
    ok = i < sorted_pos.size
    out[ok] = sorted_pos[i[ok]]
    return out


_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _digits(a: Any, lo: Any, hi: Any) -> tuple[Any, Any, Any]:
    """(value, ok, decimals): the decimal number in a[lo:hi] of each event, with an optional
    leading `-` and one optional `.`, read as the integer of its digits; decimals = digits
    after the point (-1 without one)."""
    n = lo.size
    length = hi - lo
    ok = (length > 0) & (length <= _DIGITS)
    if n == 0:
        return np.zeros(0, dtype=np.int64), ok, np.zeros(0, dtype=np.int64)
    width = max(1, int(np.where(ok, length, 0).max()))
    cols = np.arange(width)[None, :]
    valid = cols < length[:, None]
    ch = _rows(a, lo, width)
    neg = ch[:, 0] == ord("-")
    valid[:, 0] &= ~neg
    dot = (ch == ord(".")) & valid
    digit = (ch >= ord("0")) & (ch <= ord("9")) & valid
    ok &= ((digit | dot) == valid).all(axis=1) & (dot.sum(axis=1) <= 1)
    # each digit weighs 10 ** (digits to its right)
    right = np.cumsum(digit[:, ::-1], axis=1)[:, ::-1] - digit
    ok &= digit.sum(axis=1) <= 18
    value = (
        np.where(digit, ch.astype(np.int64) - ord("0"), 0) * _POW10[np.minimum(right, 18)]
    ).sum(axis=1)
    has_dot = dot.any(axis=1)
    decimals = np.where(has_dot, length - 1 - dot.argmax(axis=1), -1)
    return np.where(neg, -value, value), ok, decimals


def _joined(a: Any, lo: Any, hi: Any, drop: Any = None) -> Any | None:
    """The integers written in a[lo:hi] of each event, parsed by numpy in C from one
    comma-joined copy of the fields (without the byte at `drop`, when given); None when a
    field is not a plain integer."""
    n = lo.size
    lens = hi - lo
    if n == 0 or int(lens.min()) <= 0 or int(lens.max()) > _DIGITS:
        return None if n else np.zeros(0, dtype=np.int64)
    total = int(lens.sum())
    before = np.cumsum(lens) - lens
    src = np.arange(total, dtype=np.int64) + np.repeat(lo - before, lens)
    dst = np.arange(total, dtype=np.int64) + np.repeat(np.arange(n, dtype=np.int64), lens)
    out = np.full(total + n, ord(","), dtype=np.uint8)
    out[dst] = a[src]
    if drop is not None:  # the decimal point: mark it and squeeze it out
        out[drop - lo + before + np.arange(n)] = 0
        out = out[out != 0]
    text = out.tobytes()
    if not _PLAIN_INT.fullmatch(text):
        return None
    vals = np.fromstring(text, dtype=np.int64, sep=",")
    return vals if vals.size == n else None


_PLAIN_INT = re.compile(rb"(?:-?\d+,)*")


def _int_field(a: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    vals = _joined(a, lo, hi)
    if vals is not None:
        return vals, np.ones(lo.size, dtype=bool)
    v, ok, dec = _digits(a, lo, hi)
    return v, ok & (dec < 0)


def _ns_field(a: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """Microseconds (at most three decimals) as integer nanoseconds."""
    if lo.size and bool((a[np.maximum(hi - 4, 0)] == ord(".")).all()):  # libkineto's %.3f
        vals = _joined(a, lo, hi, drop=hi - 4)
        if vals is not None:
            return vals, np.ones(lo.size, dtype=bool)
    v, ok, dec = _digits(a, lo, hi)
    dec = np.where(dec < 0, 0, dec)
    ok &= dec <= 3
    return v * 10 ** (3 - np.minimum(dec, 3)), ok


def _word4(a: Any, pos: Any) -> Any:
    """The 4 bytes at each position as one little-endian uint32, from the aligned uint64 words
    that hold them (two gathers and shifts; no unaligned view)."""
    words = np.frombuffer(a.data, dtype=np.uint64, count=a.size // 8)
    i = pos >> 3
    sh = ((pos & 7) * 8).astype(np.uint64)
    lo = words[i] >> sh
    hi = np.where(sh > 32, words[np.minimum(i + 1, words.size - 1)] << (np.uint64(64) - sh), 0)
    return ((lo | hi) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


_ARGS_END = b"\n    }"


# complete events other than libkineto's `Trace` spans (which put `ts` before `name`)
_X_START = re.compile(rb'\n    "ph": "X", "cat": "(?!Trace", "ts")')
_CAT_NAME = re.compile(rb'\n    "ph": "X", "cat": "([^"]*)", "name": "([^"]*)"')
_ARGS_OPEN = b',\n    "args": {\n      '


def _word8(a: Any, pos: Any) -> Any:
    """The 8 bytes at each position as one little-endian uint64 (two aligned gathers)."""
    words = np.frombuffer(a.data, dtype=np.uint64, count=a.size // 8)
    i = pos >> 3
    sh = ((pos & 7) * 8).astype(np.uint64)
    lo = words[i] >> sh
    nxt = words[np.minimum(i + 1, words.size - 1)]
    hi = np.where(sh > 0, nxt << ((np.uint64(64) - sh) % np.uint64(64)), np.uint64(0))
    return lo | hi


def _u64(b: bytes) -> Any:
    return np.frombuffer(b[:8].ljust(8, b"\0"), dtype=np.uint64)[0]


def _strings(text: bytes, a: Any, lo: Any, hi: Any, ids: dict[Any, int]) -> Any:
    """An id per string a[lo:hi], interned in `ids`: strings are grouped by a hash of their
    length and first and last eight bytes, each group is checked byte for byte against one
    member (one vectorised compare per group), and only a group that differs is split."""
    n = lo.size
    length = hi - lo
    first = _word8(a, lo)
    last = _word8(a, np.maximum(hi - 8, lo))
    with np.errstate(over="ignore"):
        h = length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        h ^= first * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= last * np.uint64(0x165667B19E3779F9)
    _, rep_of, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(rep_of.size + 1))
    out = np.empty(n, dtype=np.int32)
    for g in range(rep_of.size):
        members = order[bounds[g] : bounds[g + 1]]
        rep = int(rep_of[g])
        size = int(length[rep])
        same = (length[members] == size) & (first[members] == first[rep])
        same &= last[members] == last[rep]
        if size > 16:
            row = np.frombuffer(text[lo[rep] : hi[rep]], dtype=np.uint8)
            same &= (_rows(a, lo[members], size) == row).all(axis=1)
        out[members[same]] = _intern(ids, text[lo[rep] : hi[rep]])
        for i in members[~same].tolist():  # a hash collision: rare
            out[i] = _intern(ids, text[lo[i] : hi[i]])
    return out


_LINE = b'    "ph": "X", "cat": "'  # after the newline that opens a complete event


def parse(
    text: bytes, ids: dict[str, int], arg_cats: set[int], cat_code: dict[bytes, int]
) -> dict[str, Any] | None:
    """Columns of the complete events of a batch in libkineto's layout, or None (see the module
    docstring). `ids` interns names across batches; `cat_code` maps category bytes to codes;
    `arg_cats` are the codes whose `stream` / `correlation` arguments are read (others must
    have none)."""
    # every "ph" a phase key written `"ph": "`, so that no complete event hides in another
    # spelling (`"ph":  "X"`); no `\u`, which can spell any key (`"p\u0068"`)
    if b"\\u" in text or text.count(b'"ph"') != text.count(b'"ph": "'):
        return None
    a = np.frombuffer(text + bytes(_PAD), dtype=np.uint8)
    newlines = np.flatnonzero(a[: len(text)] == ord("\n"))
    starts = newlines[_word8(a, newlines + 1) == _u64(_LINE)]
    starts = starts[_at(a, starts + 1, _LINE)]
    if starts.size != text.count(b'"ph": "X"'):
        return None  # a complete event in another layout
    cat_lo = starts + 1 + len(_LINE)
    real = ~_at(a, cat_lo, b'Trace", "ts"')  # libkineto's `Trace` spans: another key order
    starts, cat_lo = starts[real], cat_lo[real]
    n = starts.size
    if n == 0:
        return {k: np.zeros(0, dtype=np.int64) for k in _KEYS}
    quotes = np.flatnonzero(a[: len(text)] == ord('"'))
    cat_hi = _next(quotes, cat_lo)
    if not _at(a, cat_hi, _NAME).all():
        return None
    name_lo = cat_hi + len(_NAME)
    name_hi = _next(quotes, name_lo)
    if b"\\" in text:
        bs = np.flatnonzero(a == ord("\\"))
        if (np.searchsorted(bs, name_lo) != np.searchsorted(bs, name_hi)).any():
            return None  # an escape inside a name
    local_cats: dict[Any, int] = {}
    cat_ids = _strings(text, a, cat_lo, cat_hi, local_cats)
    lut = np.zeros(max(len(local_cats), 1), dtype=np.int8)
    for c, i in local_cats.items():
        lut[i] = cat_code.get(c.encode() if isinstance(c, str) else c, 0)
    cat = lut[cat_ids]
    name = _strings(text, a, name_lo, name_hi, ids)
    # the rest of the header line: `", "pid": N, "tid": N,\n    "ts": X, "dur": X`
    if not _at(a, name_hi, _PID).all():
        return None
    commas = np.flatnonzero(a[: len(text)] == ord(","))
    c1 = _next(commas, name_hi + len(_PID))
    c2 = _next(commas, c1 + len(_TID))
    c3 = _next(commas, c2 + len(_TS))
    c4 = np.minimum(_next(commas, c3 + len(_DUR)), _next(newlines, c3 + len(_DUR)))
    if not (_at(a, c1, _TID).all() and _at(a, c2, _TS).all() and _at(a, c3, _DUR).all()):
        return None
    with_args = _at(a, c4, _ARGS_OPEN)
    if not (with_args | _at(a, c4, _END)).all():
        return None
    pid, ok1 = _int_field(a, name_hi + len(_PID), c1)
    tid, ok2 = _int_field(a, c1 + len(_TID), c2)
    ts, ok3 = _ns_field(a, c2 + len(_TS), c3)
    dur, ok4 = _ns_field(a, c3 + len(_DUR), c4)
    if not (ok1 & ok2 & ok3 & ok4).all():
        return None
    cols: dict[str, Any] = {
        "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
    }  # fmt: skip
    # the arguments: on one line; the quotes on it whose next bytes spell a key we read
    args_lo = c4[with_args] + len(_ARGS_OPEN)
    args_hi = _next(newlines, args_lo)
    if not _at(a, args_hi, _ARGS_END).all():
        return None
    quotes = _quotes_in(quotes, args_lo, args_hi)
    owner = np.flatnonzero(with_args)  # event index of each args block
    head4 = _word4(a, quotes + 1)
    for key, default in (("stream", -1), ("correlation", -1), ("device", -1), ("bytes", 0)):
        vals = np.full(n, default, dtype=np.int64)
        lit = b'"' + key.encode() + b'": '
        cand = quotes[head4 == np.frombuffer(lit[1:5], dtype=np.uint32)[0]]
        cand = cand[_at(a, cand, lit)]
        if cand.size:
            got = _arg_at(a, cand, len(lit), args_lo, commas, newlines)
            if got is None:
                return None
            idx, v = owner[got[0]], got[1]
            vals[idx] = v
            if key in ("stream", "correlation") and not np.isin(cat[idx], list(arg_cats)).all():
                return None  # HTA counts it: the generic path keeps it
        cols[key] = vals
    return cols


_KEYS = ("cat", "name", "pid", "tid", "ts", "dur", "stream", "correlation", "device", "bytes")


def _quotes_in(quotes: Any, lo: Any, hi: Any) -> Any:
    """The quote positions inside the ranges [lo, hi) (sorted, disjoint)."""
    if lo.size == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.searchsorted(quotes, lo)
    count = np.searchsorted(quotes, hi) - first
    total = int(count.sum())
    idx = np.arange(total, dtype=np.int64) + np.repeat(first - (np.cumsum(count) - count), count)
    return quotes[idx]


def _intern(ids: dict[Any, int], b: bytes) -> int:
    s = b.decode()
    return ids.setdefault(s, len(ids))


def _arg_at(
    a: Any, pos: Any, key_len: int, blocks: Any, commas: Any, newlines: Any
) -> tuple[Any, Any] | None:
    """(block index, integer value) of keys found at `pos`; `blocks` are the sorted starts of
    the blocks that hold them."""
    ev = np.searchsorted(blocks, pos, side="right") - 1
    lo = pos + key_len
    hi = np.minimum(_next(commas, lo), _next(newlines, lo))
    v, ok = _int_field(a, lo, hi)
    if not ok.all():
        return None
    return ev, v


def _arg(
    a: Any, lit: bytes, starts: Any, args_lo: Any, ev_end: Any, commas: Any, newlines: Any
) -> tuple[Any, Any] | None:
    """(event index, integer value) of each `"key": <int>` inside an event's args block; None
    when a value is not an integer."""
    pos = find_all(a, lit)
    if pos.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    ev = np.searchsorted(starts, pos, side="right") - 1
    inside = ev >= 0
    evc = np.maximum(ev, 0)
    inside &= (pos > args_lo[evc]) & (pos < ev_end[evc])
    pos, ev = pos[inside], ev[inside]
    lo = pos + len(lit)
    hi = np.minimum(np.minimum(_next(commas, lo), _next(newlines, lo)), a.size - _PAD)
    # a value at the end of the block: `... "bytes": 64\n    }`
    v, ok = _int_field(a, lo, hi)
    if not ok.all():
        return None
    return ev, v


def thread_names(text: bytes) -> dict[tuple[int, int], str] | None:
    """The `thread_name` metadata records of a batch: (pid, tid) -> name; None when a
    `"name": "thread_name"` in it is not such a record in libkineto's block layout."""
    out: dict[tuple[int, int], str] = {}
    pos = text.find(b'"name": "thread_name"')
    while pos >= 0:
        s = text.rfind(b"\n  {", 0, pos)
        e = text.find(b"\n  }", pos)
        try:
            ev = orjson.loads(text[s + 3 : e + 4])
        except ValueError:
            return None
        args = ev.get("args") if isinstance(ev, dict) else None
        if not (ev.get("ph") == "M" and isinstance(args, dict) and "name" in args):
            return None
        out[(_int_or(ev.get("pid")), _int_or(ev.get("tid")))] = str(args["name"])
        pos = text.find(b'"name": "thread_name"', pos + 1)
    return out


def _int_or(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def memory_peak(text: bytes) -> int | None:
    """Max `Total Allocated` of the `[memory]` instant events on CUDA (`Device Type` 1)."""
    if b'"[memory]"' not in text:
        return None
    a = np.frombuffer(text + bytes(_PAD), dtype=np.uint8)
    marks = find_all(a, b'"name": "[memory]"')
    obj_lo = find_all(a, b"\n  {")
    obj_hi = find_all(a, b"\n  }")
    lo = obj_lo[np.maximum(np.searchsorted(obj_lo, marks) - 1, 0)]
    hi = _next(obj_hi, marks)
    commas = np.flatnonzero(a == ord(","))
    newlines = np.flatnonzero(a == ord("\n"))
    peak = None
    got_t = _arg(a, b'"Total Allocated": ', lo, lo, hi, commas, newlines)
    got_d = _arg(a, b'"Device Type": ', lo, lo, hi, commas, newlines)
    if got_t is None or got_d is None:
        return None
    total = np.full(lo.size, -1, dtype=np.int64)
    dev = np.full(lo.size, -1, dtype=np.int64)
    total[got_t[0]] = got_t[1]
    dev[got_d[0]] = got_d[1]
    cuda = (dev == 1) & (total >= 0)
    if cuda.any():
        peak = int(total[cuda].max())
    return peak
