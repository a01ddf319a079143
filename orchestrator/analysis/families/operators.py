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
    order = np.argsort(name, kind="stable")
    name, s, e = name[order], s[order], e[order]
    self_ns, known = self_ns[order], known[order]
    first = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
    count = np.diff(np.r_[first, name.size])
    total = np.add.reduceat(e - s, first)
    own = np.add.reduceat(self_ns, first)
    whole = np.logical_and.reduceat(known, first)
    out = [
        OperatorStat(
            name=tl.names[int(i)],
            count=int(c),
            total_ns=int(t),
            mean_ns=float(t) / int(c),
            self_ns=int(o) if w else None,
        )
        for i, c, t, o, w in zip(name[first], count, total, own, whole, strict=True)
    ]
    out.sort(key=lambda x: (-x.total_ns, x.name))
    return out[:TOP_OPERATORS]


def _self_times(s: Any, e: Any) -> Any | None:
    """Self time of each interval [s, e) of one thread (in the order given), or None when they
    do not nest."""
    dur = e - s
    pos = np.flatnonzero(dur > 0)
    out = dur.copy()
    if pos.size < 2:
        return out
    sp = s[pos]
    # already in start order without ties (the readers' order): kept, else sorted
    in_order = bool((sp[1:] > sp[:-1]).all())
    order = pos if in_order else pos[np.lexsort((-e[pos], sp))]
    ss, ee = s[order], e[order]
    # open intervals when each starts: those started before it (the order) minus those ended
    ends = np.sort(ee)
    depth = np.arange(ss.size) - np.searchsorted(ends, ss, side="right")
    parent = np.full(ss.size, -1, dtype=np.int64)
    for d in range(1, int(depth.max()) + 1):
        kids = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        at = np.searchsorted(above, kids) - 1
        if bool((at < 0).any()):
            return None  # a row with no interval open around it at that depth: no nesting
        parent[kids] = above[at]
    inner = parent >= 0
    if bool((ee[inner] > ee[parent[inner]]).any()) or bool((ss[inner] < ss[parent[inner]]).any()):
        return None
    child = np.bincount(parent[inner], weights=(ee - ss)[inner], minlength=ss.size)
    out[order] = (ee - ss) - child.astype(np.int64)
    return out
