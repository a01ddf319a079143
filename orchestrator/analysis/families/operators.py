"""The CPU operators of one rank, per operator: count, total and self time, as PyTorch's
profiler tables them (`key_averages()`: CPU total, self CPU).

Operators are the timeline's `CPU_OP` rows: Kineto's `cpu_op` events, and the PyTorch operator
ranges of an nsys export (`torch_ranges`: `emit_nvtx`'s names stripped of their op ids). An
operator's self time is its time minus the time of the operators it called: the rows nested
directly inside it on the same thread. Nesting is read from the times alone (intervals of one
thread sorted by start, the longer first at a tie; an operator's parent is the latest one still
open when it starts). Where a thread's operators do not nest (one ends after its parent:
start/end ranges across calls, a clock step), that thread's self times are not measured and
its operators show no self time; zero-length rows nest nowhere and add nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.families.host import thread_groups
from orchestrator.analysis.metrics import OperatorStat
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline import sort_keys

TOP_OPERATORS = 40


def operators(tl: T.RankTimeline) -> list[OperatorStat]:
    """The operators of the rank by total time (the TOP_OPERATORS largest), each with its count,
    total, mean and (where its threads nest) self time."""
    h = tl.host
    m = (h.kind == T.CPU_OP) & (h.end >= h.start) if h.size else None
    if m is None or not bool(m.any()):
        return []
    s, e, name = h.start[m], h.end[m], h.name[m]
    self_ns = np.zeros(s.size, dtype=np.int64)
    known = np.ones(s.size, dtype=bool)
    keys, inv = thread_groups(h.pid[m], h.tid[m])
    for j in range(len(keys)):
        at = np.flatnonzero(inv == j)
        got = _self_times(s[at], e[at])
        if got is None:
            known[at] = False
        else:
            self_ns[at] = got
    # sums per name id (ids index tl.names: a few thousand at most), no sort of the rows;
    # np.add.at sums int64 exactly
    size = int(name.max()) + 1
    count = np.bincount(name, minlength=size)
    total = np.zeros(size, dtype=np.int64)
    np.add.at(total, name, e - s)
    own = np.zeros(size, dtype=np.int64)
    np.add.at(own, name, self_ns)
    whole = np.bincount(name[~known], minlength=size) == 0
    present = np.flatnonzero(count)
    out = [
        OperatorStat(
            name=tl.names[int(i)],
            count=int(c),
            total_ns=int(t),
            mean_ns=float(t) / int(c),
            self_ns=int(o) if w else None,
        )
        for i, c, t, o, w in zip(
            present, count[present], total[present], own[present], whole[present], strict=True
        )
    ]
    out.sort(key=lambda x: (-x.total_ns, x.name))
    return out[:TOP_OPERATORS]


def _self_times(s: Any, e: Any) -> Any | None:
    """Self time of each interval [s, e) of one thread (in the order given), or None when they
    do not nest."""
    out = e - s
    positive = out > 0
    every = bool(positive.all())  # no zero-length rows (the common case): no index needed
    pos = None if every else np.flatnonzero(positive)
    if (s.size if pos is None else pos.size) < 2:
        return out
    sp = s if pos is None else s[pos]
    # already in start order without ties (the readers' order): kept, else sorted
    in_order = bool((sp[1:] > sp[:-1]).all())
    if in_order:
        order = pos
    else:
        base = np.arange(s.size) if pos is None else pos
        order = base[sort_keys.lexsort((-e[base], sp))]
    ss, ee = (s, e) if order is None else (s[order], e[order])
    dur = out if order is None else out[order]
    # open intervals when each starts: those started before it (the order) minus those ended
    depth = np.arange(ss.size) - np.searchsorted(np.sort(ee), ss, side="right")
    deepest = int(depth.max())
    if deepest == 0:
        return out  # nothing nested: each row's time is its own
    parent = np.full(ss.size, -1, dtype=np.int64)
    for d in range(1, deepest + 1):
        kids = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        at = np.searchsorted(above, kids) - 1
        if bool((at < 0).any()):
            return None  # a row with no interval open around it at that depth: no nesting
        parent[kids] = above[at]
    inner = np.flatnonzero(parent >= 0)
    up = parent[inner]
    # a parent comes before its child in start order, so it never starts after it; a child
    # that ends after its parent does not nest
    if bool((ee[inner] > ee[up]).any()):
        return None
    child = np.zeros(ss.size, dtype=np.int64)
    np.add.at(child, up, dur[inner])
    got = dur - child
    if order is None:
        return got
    out[order] = got
    return out
