"""The compiled scan of a batch of Kineto trace events (`_kineto_scan.c`), loaded with ctypes.

`parse` gives the columns of a batch's complete events, or None when the batch is not JSON or
holds a complete event that is not in the layout libkineto writes (the reader then parses the
batch with orjson: the same columns, tests/unit/test_kineto_scan.py). It checks the whole batch
as JSON (structure, strings, numbers, UTF-8) in the pass that reads the events, and takes only
the top-level objects as events, so an object laid out like an event inside another event's
`args` is never counted. No library parses JSON into columns this fast here: orjson, msgspec and
pyarrow all read about 50-90 MB/s of Kineto text on this 2-core machine, once their Python
objects are counted (bench/bench_analyze.py).

The C file is built when gh-run is installed (setup.py: an optional extension, so an install
without a C compiler still works); without it `available()` is False and the Kineto reader
parses every batch with orjson (a layout scan in numpy was the fallback until issue 26: proving
that its events are the document's own top-level objects cost it as much as orjson's parse).
Names are interned as the numpy scan does: grouped by a 64-bit hash the scan computes, every
member checked byte for byte against its group's first (in C), one decode per distinct name.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import native

# the scan's answers other than a count
_GIVE_UP = -1
_NO_ROOM = -2
HAS_STREAM, HAS_CORR = 1, 2

_I64 = np.ctypeslib.ndpointer(dtype=np.int64, flags="C_CONTIGUOUS")
_U64 = np.ctypeslib.ndpointer(dtype=np.uint64, flags="C_CONTIGUOUS")
_U8 = np.ctypeslib.ndpointer(dtype=np.uint8, flags="C_CONTIGUOUS")
# the int64 columns after the hashes, in the C function's order
_INT_COLS = ("pid", "tid", "ts", "dur", "stream", "correlation", "device", "bytes")


def library_path() -> Path | None:
    """The built scan beside this file, if the install built it."""
    return native.library_path("_kineto_scan")


# The C functions of _kineto_scan.c as ctypes calls them (checked against the C prototypes by
# tests/unit/test_native_boundary.py).
SIGNATURES = {
    "kineto_scan": native.Signature(
        ctypes.c_int64,
        (
            ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
            _I64, _I64, _U64, _I64, _I64, _U64,
            *([_I64] * len(_INT_COLS)), _U8,
            ctypes.c_int64, _I64, _I64, _I64,  # the other records: capacity, starts, ends, count
        ),
    ),
    "kineto_differ": native.Signature(
        ctypes.c_int64, (ctypes.c_char_p, ctypes.c_int64, _I64, _I64, _I64, _I64)
    ),
}  # fmt: skip


def _library() -> Any | None:
    """The built scan, loaded; None when not built, or with GH_RUN_NO_NATIVE_SCAN set (orjson
    then parses every batch, as on a machine without a C compiler)."""
    return native.load("_kineto_scan", SIGNATURES)


_LIB = _library()


def available() -> bool:
    """Whether the compiled scan is built and loads."""
    return _LIB is not None


def _interned(text: bytes, lo: Any, length: Any, h: Any, ids: dict[str, int]) -> Any | None:
    """An id per string text[lo:lo+length] from `ids` (new strings added); None when two
    different strings share a hash (the caller then gives the batch up)."""
    uniq_first, inv = np.unique(h, return_index=True, return_inverse=True)[1:]
    inv = inv.reshape(-1)
    rlo = np.ascontiguousarray(lo[uniq_first][inv])
    rlen = np.ascontiguousarray(length[uniq_first][inv])
    assert _LIB is not None
    if _LIB.kineto_differ(text, lo.size, lo, length, rlo, rlen) != 0:
        return None
    got = np.empty(uniq_first.size, dtype=np.int32)
    for j, i in enumerate(uniq_first.tolist()):
        s = text[int(lo[i]) : int(lo[i] + length[i])].decode()
        got[j] = ids.setdefault(s, len(ids))
    return got[inv]


def parse(
    text: bytes, ids: dict[str, int], arg_cats: set[int], cat_code: dict[bytes, int]
) -> tuple[dict[str, Any], list[tuple[int, int]]] | None:
    """The columns of the batch's complete events (`cat` codes from `cat_code`; names interned
    in `ids`; `stream` / `correlation` only on the categories of `arg_cats`), and the byte ranges
    of its memory and metadata records (`ph` i or M: for a JSON parser); None when the batch is
    left to orjson (see the module docstring). Needs `available()`."""
    assert _LIB is not None
    # every event the scan reads spans at least 84 bytes of its own (`\n    "ph": "X", ...}`
    # with empty strings and one-digit numbers), so this bounds the count without a pass
    cap = len(text) // 80 + 1
    cat_lo, cat_len, name_lo, name_len = (np.empty(cap, dtype=np.int64) for _ in range(4))
    cat_hash, name_hash = np.empty(cap, dtype=np.uint64), np.empty(cap, dtype=np.uint64)
    ints = {k: np.empty(cap, dtype=np.int64) for k in _INT_COLS}
    found = np.empty(cap, dtype=np.uint8)
    nother = np.zeros(1, dtype=np.int64)
    # records of phase i or M are few beside the complete events; an object takes 10 bytes at
    # least (`{"ph":"i"}`), so the second try always has room
    for ocap in (len(text) // 256 + 16, len(text) // 10 + 2):
        other_lo, other_hi = np.empty(ocap, dtype=np.int64), np.empty(ocap, dtype=np.int64)
        n = _LIB.kineto_scan(
            text, len(text), cap, cat_lo, cat_len, cat_hash, name_lo, name_len, name_hash,
            *ints.values(), found, ocap, other_lo, other_hi, nother,
        )  # fmt: skip
        if n != _NO_ROOM:
            break
    if n < 0:  # _GIVE_UP (_NO_ROOM cannot happen: see the capacities)
        return None
    try:
        cat_ids: dict[str, int] = {}
        cats = _interned(text, cat_lo[:n], cat_len[:n], cat_hash[:n], cat_ids)
        name = _interned(text, name_lo[:n], name_len[:n], name_hash[:n], ids)
    except UnicodeDecodeError:
        return None  # (the scan checks UTF-8: not reached)
    if cats is None or name is None:
        return None
    lut = np.zeros(max(len(cat_ids), 1), dtype=np.int8)
    for c, i in cat_ids.items():
        lut[i] = cat_code.get(c.encode(), 0)
    cat = lut[cats] if n else np.zeros(0, dtype=np.int8)
    off_stream = (found[:n] & (HAS_STREAM | HAS_CORR)) != 0
    if off_stream.any() and not np.isin(cat[off_stream], list(arg_cats)).all():
        return None  # HTA counts a stream on any event as GPU work: the generic path keeps it
    cols: dict[str, Any] = {"cat": cat, "name": name if n else np.zeros(0, dtype=np.int32)}
    # copies: views would keep the cap-sized arrays alive in the reader's batches
    cols.update({k: v[:n].copy() for k, v in ints.items()})
    k = int(nother[0])
    return cols, list(zip(other_lo[:k].tolist(), other_hi[:k].tolist(), strict=True))
