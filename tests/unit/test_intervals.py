"""The interval primitives that every GPU-time metric stands on, against plain references:
`groups_sorted` in steps of any size (the running maximum carried across steps, with and
without a row mask) and `intersect` whichever list is the shorter."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.timeline import intervals
from tests.budget import examples

ROWS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=60)


def _reference_groups(s: Any, e: Any) -> tuple[list[int], list[int]]:
    """HTA's merge: a row opens a group when it starts after every earlier row has ended."""
    g0: list[int] = []
    g1: list[int] = []
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        if g1 and a <= g1[-1]:
            g1[-1] = max(g1[-1], b)
        else:
            g0.append(a)
            g1.append(b)
    return g0, g1


@settings(max_examples=examples(300), deadline=None)
@given(rows=ROWS, step=st.integers(1, 8), keep=st.lists(st.booleans(), min_size=60, max_size=60))
def test_groups_sorted_in_steps_equal_one_pass(
    rows: list[tuple[int, int]], step: int, keep: list[bool]
) -> None:
    rows.sort()
    s = np.array([a for a, _ in rows], dtype=np.int64)
    e = np.array([a + d for a, d in rows], dtype=np.int64)
    mask = np.array(keep[: len(rows)], dtype=bool)
    saved = intervals.GROUP_CHUNK_ROWS
    intervals.GROUP_CHUNK_ROWS = step
    try:
        got = intervals.groups_sorted(s, e)
        got_masked = intervals.groups_sorted(s, e, mask)
    finally:
        intervals.GROUP_CHUNK_ROWS = saved
    assert (got[0].tolist(), got[1].tolist()) == _reference_groups(s, e)
    assert (got_masked[0].tolist(), got_masked[1].tolist()) == _reference_groups(s[mask], e[mask])


def _union(rows: list[tuple[int, int]]) -> tuple[Any, Any]:
    rows = sorted(rows)
    s = np.array([a for a, _ in rows], dtype=np.int64)
    e = np.array([a + d for a, d in rows], dtype=np.int64)
    return intervals.groups_sorted(s, e)


@settings(max_examples=examples(300), deadline=None)
@given(a=ROWS, b=ROWS)
def test_intersect_is_the_common_time_whichever_list_is_shorter(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    a0, a1 = _union(a)
    b0, b1 = _union(b)
    covered = np.zeros(80, dtype=bool)
    for x0, x1 in zip(a0.tolist(), a1.tolist(), strict=True):
        covered[x0:x1] = True
    common = np.zeros(80, dtype=bool)
    for y0, y1 in zip(b0.tolist(), b1.tolist(), strict=True):
        common[y0:y1] |= covered[y0:y1]
    for i0, i1 in (intervals.intersect(a0, a1, b0, b1), intervals.intersect(b0, b1, a0, a1)):
        got = np.zeros(80, dtype=bool)
        assert (np.diff(i0) > 0).all() and (i1 > i0).all()  # sorted, no empty pieces
        assert (i0[1:] >= i1[:-1]).all()  # disjoint
        for x0, x1 in zip(i0.tolist(), i1.tolist(), strict=True):
            got[x0:x1] = True
        assert (got == common).all()
