"""`operators.operators`: per operator name, the count, total and self time a plain loop over the
rows gives (the reference: `_self_times` of each thread's rows, then sums per name in Python
integers), over random threads, names, nesting, zero-length rows, other kinds of rows and
durations past float64's exact range; and `_self_times` over any intervals, in any order, what
main gave before the speed cut."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.families import operators
from orchestrator.analysis.timeline import model as T
from tests.budget import examples

OTHER_KINDS = [T.ANNOTATION, T.OSRT, T.CUDA_API]


def _timeline(rows: list[tuple[int, int, int, int, int]], names: list[str]) -> T.RankTimeline:
    """rows: (kind, start, end, thread, name id)."""
    h = T.HostTable(
        start=np.array([r[1] for r in rows], np.int64),
        end=np.array([r[2] for r in rows], np.int64),
        pid=np.full(len(rows), 7, np.int64),
        tid=np.array([r[3] for r in rows], np.int64),
        kind=np.array([r[0] for r in rows], np.int8),
        name=np.array([r[4] for r in rows], np.int32),
    )
    return T.RankTimeline(
        source=T.SourceInfo(path="synthetic", kind="nsys-sqlite"),
        names=names,
        gpu=T.GpuTable.empty(),
        host=h,
    )


def _reference(tl: T.RankTimeline) -> list[tuple[str, int, int, int | None]]:
    h = tl.host
    rows = [i for i in range(h.size) if h.kind[i] == T.CPU_OP and h.end[i] >= h.start[i]]
    own: dict[int, int] = {}
    unknown: set[int] = set()
    for tid in sorted({int(h.tid[i]) for i in rows}):
        mine = [i for i in rows if int(h.tid[i]) == tid]
        got = operators._self_times(h.start[mine], h.end[mine])
        for k, i in enumerate(mine):
            if got is None:
                unknown.add(i)
            else:
                own[i] = int(got[k])
    per: dict[str, list[int]] = {}
    for i in rows:
        p = per.setdefault(tl.names[int(h.name[i])], [0, 0, 0, 1])
        p[0] += 1
        p[1] += int(h.end[i]) - int(h.start[i])
        p[2] += own.get(i, 0)
        p[3] &= i not in unknown
    out = [(n, c, t, s if w else None) for n, (c, t, s, w) in per.items()]
    out.sort(key=lambda x: (-x[2], x[0]))
    return out[: operators.TOP_OPERATORS]


def _nested(rnd: random.Random, lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    t = lo
    while t < hi and rnd.random() < 0.85:
        a = t + rnd.randrange(0, 3)
        b = min(hi, a + rnd.randrange(0, 60))
        out.append((a, b))
        if depth and b - a > 4:
            out += _nested(rnd, a, b, depth - 1)
        t = b
    return out


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 3), st.booleans(), st.booleans())
def test_sums_per_name_are_a_loops_sums(seed: int, threads: int, clash: bool, huge: bool) -> None:
    rnd = random.Random(seed)
    names = [f"op{i}" for i in range(rnd.randrange(1, 50))]
    scale = 2**40 if huge else 1  # totals past 2**53 ns: float sums would round
    rows = []
    for tid in range(threads):
        for a, b in _nested(rnd, 0, 2000, 3):
            # times stretched by a map that keeps their order (and the nesting), odd ns included
            rows.append((T.CPU_OP, a * scale + a, b * scale + b, tid, rnd.randrange(len(names))))
        if clash and rnd.random() < 0.5:  # a row ending after its parent: no self time there
            rows.append((T.CPU_OP, 1 * scale + 1, 3000 * scale + 3000, tid, 0))
    rows += [(rnd.choice(OTHER_KINDS), 0, 9, 0, 0) for _ in range(rnd.randrange(3))]
    rnd.shuffle(rows)
    tl = _timeline(rows, names)
    got = [(o.name, o.count, o.total_ns, o.self_ns) for o in operators.operators(tl)]
    assert got == _reference(tl)
    for o in operators.operators(tl):
        assert o.mean_ns == float(o.total_ns) / o.count


def _self_times_before(s: Any, e: Any) -> Any | None:
    """`operators._self_times` as main had it before issue 37's speed cut (the reference: the
    cut skips copies and an index where every row has a length, a check that cannot fail, and
    sums the children in int64 instead of float64)."""
    dur = e - s
    pos = np.flatnonzero(dur > 0)
    out = dur.copy()
    if pos.size < 2:
        return out
    sp = s[pos]
    in_order = bool((sp[1:] > sp[:-1]).all())
    order = pos if in_order else pos[np.lexsort((-e[pos], sp))]
    ss, ee = s[order], e[order]
    ends = np.sort(ee)
    depth = np.arange(ss.size) - np.searchsorted(ends, ss, side="right")
    parent = np.full(ss.size, -1, dtype=np.int64)
    for d in range(1, int(depth.max()) + 1):
        kids = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        at = np.searchsorted(above, kids) - 1
        if bool((at < 0).any()):
            return None
        parent[kids] = above[at]
    inner = parent >= 0
    if bool((ee[inner] > ee[parent[inner]]).any()) or bool((ss[inner] < ss[parent[inner]]).any()):
        return None
    child = np.bincount(parent[inner], weights=(ee - ss)[inner], minlength=ss.size)
    out[order] = (ee - ss) - child.astype(np.int64)
    return out


_IV = st.tuples(st.integers(0, 40), st.integers(0, 15))


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_IV, max_size=30), st.booleans())
def test_self_times_are_what_they_were(ivs: list[tuple[int, int]], by_start: bool) -> None:
    """Any intervals (nested or not, ties, zero lengths), shuffled or in start order."""
    if by_start:
        ivs = sorted(ivs)
    s = np.array([a for a, _ in ivs], dtype=np.int64)
    e = np.array([a + d for a, d in ivs], dtype=np.int64)
    got, want = operators._self_times(s, e), _self_times_before(s, e)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert got.tolist() == want.tolist()
