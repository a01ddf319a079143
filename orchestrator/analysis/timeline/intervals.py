"""Interval arithmetic over a timeline's [start, end) rows, all of it numpy over int64 columns.

One union, HTA's (`merge_kernel_intervals`): over rows sorted by start, a row opens a new
merged interval when it starts after the running maximum of the earlier rows' ends, so touching
rows merge (`groups_sorted`). Everything else is built on it:
- `union_from_groups` / `union_of_sorted`: span, busy time and the gaps (`UnionResult`), for the
  GPU time of an entry and the CPU-operator time of a thread;
- `merge_intervals`: the same union of rows in any order (host ranges: data waits, blocking
  waits, synchronisation calls), rows with end < start left out;
- `intersect`: the common time of two unions (HTA's overlap of communication and computation);
- `covered_ns`, `union_in_span`: how much of a union lies inside the GPU span.
Tests: tests/unit/test_intervals.py (against plain references, Hypothesis) and
tests/unit/test_temporal_breakdown.py (against a per-nanosecond count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _no_rows() -> Any:
    return np.zeros(0, dtype=np.int64)


@dataclass
class UnionResult:
    """The union of one entry's rows: span (first start to latest end), busy time, the gaps
    between merged intervals (int64 arrays: views of the merged intervals, no copy)."""

    start: int = 0
    end: int = 0
    busy: int = 0
    rows: int = 0
    gap_starts: Any = field(default_factory=_no_rows)
    gap_ends: Any = field(default_factory=_no_rows)

    @property
    def span(self) -> int:
        return self.end - self.start


# rows per step of `groups_sorted` (its temporaries: ~30 bytes a row)
GROUP_CHUNK_ROWS = 1 << 20


def groups_sorted(s: Any, e: Any, mask: Any = None) -> tuple[Any, Any]:
    """Merged intervals of rows sorted by start (HTA's `merge_kernel_intervals`: a row opens a
    new group when it starts after the running maximum of the previous rows' ends, so touching
    rows merge; a group spans (its first start, its max end)), of the rows `mask` selects (all
    without one). Every row's end is >= its start (the callers keep those rows only).

    In steps of GROUP_CHUNK_ROWS rows, the running maximum carried over, so that temporaries
    stay bounded (millions of rows on a long export). A group's max end is the running maximum
    before the next group opens (every earlier group ended before it started), the last one's
    the maximum of all."""
    empty = np.zeros(0, dtype=np.int64)
    starts: list[Any] = []
    before: list[Any] = []  # the running maximum before each group opens
    run: Any = None
    for lo in range(0, int(s.size), GROUP_CHUNK_ROWS):
        cs, ce = s[lo : lo + GROUP_CHUNK_ROWS], e[lo : lo + GROUP_CHUNK_ROWS]
        if mask is not None:
            m = mask[lo : lo + GROUP_CHUNK_ROWS]
            cs, ce = cs[m], ce[m]
        if cs.size == 0:
            continue
        cm = np.maximum.accumulate(ce)
        if run is not None:
            np.maximum(cm, run, out=cm)
        new = np.empty(cs.size, dtype=bool)
        new[0] = run is None or bool(cs[0] > run)
        np.greater(cs[1:], cm[:-1], out=new[1:])
        idx = np.flatnonzero(new)
        starts.append(cs[idx])
        prev = cm[np.maximum(idx - 1, 0)]
        if idx.size and idx[0] == 0:
            prev[0] = run if run is not None else 0  # the first group's is never read
        before.append(prev)
        run = cm[-1]
        del cs, ce, cm, new, idx
    if run is None:
        return empty, empty
    g0 = np.concatenate(starts)
    del starts
    g1 = np.empty(g0.size, dtype=np.int64)
    pos = 0
    for p in before:  # shifted by one group: each group's end is the next one's `before`
        g1[max(pos - 1, 0) : pos - 1 + p.size] = p[1:] if pos == 0 else p
        pos += p.size
    g1[-1] = run
    return g0, g1


def union_of_sorted(s: Any, e: Any) -> UnionResult:
    """`UnionResult` (span, busy, gaps) of rows already sorted by start."""
    return union_from_groups(*groups_sorted(s, e), int(s.size))


def union_from_groups(g0: Any, g1: Any, rows: int) -> UnionResult:
    """`UnionResult` of merged intervals (`groups_sorted`): the gaps lie between them."""
    res = UnionResult()
    if g0.size == 0:
        return res
    res.start = int(g0[0])
    res.end = int(g1[-1])
    res.busy = int((g1 - g0).sum())
    res.rows = rows
    # views of the merged intervals (no copy: millions of gaps on a long export)
    res.gap_starts = g1[:-1].astype(np.int64, copy=False)
    res.gap_ends = g0[1:].astype(np.int64, copy=False)
    return res


def merge_intervals(starts: Any, ends: Any) -> tuple[Any, Any]:
    """The union of [start, end) rows in any order as sorted, disjoint intervals (int64 arrays;
    touching ones merge, rows with end < start left out): `groups_sorted` of the rows sorted.

    Nested or overlapping ranges (a `data` range around `enumerate(DataLoader)...`, a wait
    recorded on two levels) count once in any length taken from the result."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e >= s
    if not bool(keep.all()):
        s, e = s[keep], e[keep]
    order = np.argsort(s, kind="stable")
    return groups_sorted(s[order], e[order])


def intersect(a0: Any, a1: Any, b0: Any, b1: Any) -> tuple[Any, Any]:
    """The intersection of two unions of disjoint intervals sorted by start, as disjoint
    intervals sorted by start: each interval of the shorter list against the run of the other's
    intervals that overlap it (two binary searches), so the pairs, at most len(a) + len(b), are
    the only arrays built (no sort of the bounds)."""
    if a0.size == 0 or b0.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if a0.size > b0.size:  # the pieces, disjoint and sorted, are the same either way round
        a0, a1, b0, b1 = b0, b1, a0, a1
    lo = np.searchsorted(b1, a0, side="right")  # first b ending after a starts
    cnt = np.searchsorted(b0, a1, side="left") - lo  # b starting before a ends
    np.maximum(cnt, 0, out=cnt)
    ii = np.repeat(np.arange(a0.size), cnt)
    jj = np.arange(ii.size) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
    del lo, cnt
    c0 = np.maximum(a0[ii], b0[jj])
    c1 = np.minimum(a1[ii], b1[jj])
    del ii, jj
    keep = c1 > c0
    return c0[keep], c1[keep]


def covered_ns(ms: Any, me: Any, lo: int, hi: int) -> int:
    """Length of the merged intervals (ms, me) that lies inside [lo, hi)."""
    return int((np.minimum(me, hi) - np.maximum(ms, lo)).clip(min=0).sum())


def union_in_span(ms: Any, me: Any, lo: int, hi: int) -> int:
    """A CPU-side union's length as a share of the GPU span sees it: the part inside [lo, hi),
    so it is never more than the span; with no span (no GPU activity to clip to), all of it."""
    if hi > lo:
        return covered_ns(ms, me, lo, hi)
    return int((me - ms).sum())
