"""The memory history of a Kineto trace (`profile_memory=True`): its `[memory]` events on CUDA
devices (`Device Type` 1) → one `timeline.memory.MemoryTimeline` per device, allocator level.

Each event is one allocation (`Bytes` > 0) or free (`Bytes` < 0) at `Addr`, with the
allocator's running `Total Allocated` and `Total Reserved` after it: those totals are the
curves, the pairs by address give each block its lifetime. Kineto records no stack with them,
so the categories come from the step phases and the lifetimes alone, with the phases read from
the trace's own operators (what Holistic Trace Analysis's memory analysis reads for its
classes):
- a step ends where `Optimizer.step#...` ends (else where a `ProfilerStep#N` range ends);
- the optimizer phase is inside `Optimizer.step#...`;
- backward runs from the first to the last `autograd::engine::evaluate_function: ...` operator
  (autograd's engine) of each step;
- forward is the rest of the step before backward (`ProfilerStep#N` starts a step).
Memory events outside the profiled window are not in the trace: blocks held before it are
"before the history" (their bytes are in the first event's total).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.timeline import memory as M
from orchestrator.analysis.timeline import model as T

SOURCE = "Kineto [memory] events"
_BACKWARD = "autograd::engine::evaluate_function"


def timelines(
    events: list[tuple[float, int, int, int, int, int]], host: T.HostTable, names: list[str]
) -> list[M.MemoryTimeline]:
    """One timeline per CUDA device with memory events."""
    if not events:
        return []
    cols = list(zip(*events, strict=True))
    ts = np.array(cols[0], dtype=np.float64)
    dev = np.array(cols[1], dtype=np.int64)
    addr = np.array(cols[2], dtype=np.int64)
    nbytes = np.array(cols[3], dtype=np.int64)
    alloc = np.array(cols[4], dtype=np.int64)
    res = np.array(cols[5], dtype=np.int64)
    whole = np.floor(ts)
    t_ns = whole.astype(np.int64) * 1000 + np.rint((ts - whole) * 1000).astype(np.int64)
    marks = _marks(host, names)
    out = []
    for d in np.unique(dev).tolist():
        sel = np.flatnonzero(dev == d)
        sel = sel[np.argsort(t_ns[sel], kind="stable")]
        size = np.abs(nbytes[sel])
        action = np.where(nbytes[sel] >= 0, M.ALLOC, M.FREE_REQUESTED).astype(np.int8)
        ev = M.MemoryEvents(
            t_ns[sel], action, addr[sel], size, np.full(sel.size, -1, dtype=np.int32)
        )
        out.append(
            M.MemoryTimeline(
                source=SOURCE,
                level="allocator",
                device=int(d),
                events=ev,
                allocated=alloc[sel],
                reserved=res[sel],
                marks=marks,
                marks_source="the trace's operators (ProfilerStep, autograd's"
                " evaluate_function, Optimizer.step)"
                if marks
                else None,
            )
        )
    return out


def _marks(host: T.HostTable, names: list[str]) -> list[tuple[int, int]]:
    """Step and phase marks from the trace's operators (see the module docstring)."""
    if not names or host.size == 0:
        return []
    opt = np.fromiter((n.startswith("Optimizer.step#") for n in names), bool, len(names))
    step = np.fromiter((n.startswith("ProfilerStep#") for n in names), bool, len(names))
    bwd = np.fromiter((n.startswith(_BACKWARD) for n in names), bool, len(names))
    name = host.name
    ops = (host.kind == T.CPU_OP) | (host.kind == T.ANNOTATION)
    marks: list[tuple[int, int]] = []
    o = ops & opt[name]
    o_start, o_end = _merged(host.start[o], host.end[o])
    s = ops & step[name]
    s_start, s_end = _merged(host.start[s], host.end[s])
    marks += [(int(t), M.STEP_START) for t in s_start.tolist()]
    marks += [(int(t), M.OPT_BEGIN) for t in o_start.tolist()]
    marks += [(int(t), M.OPT_END) for t in o_end.tolist()]
    ends = o_end if o_end.size else s_end
    marks += [(int(t), M.STEP_END) for t in ends.tolist()]
    b = ops & bwd[name]
    if bool(b.any()):
        bs, be = host.start[b], host.end[b]
        edges = np.concatenate([[-(2**62)], np.sort(ends), [2**62]])
        which = np.searchsorted(edges, bs, side="right")
        for k in np.unique(which).tolist():
            m = which == k
            marks.append((int(bs[m].min()), M.BWD_BEGIN))
            marks.append((int(be[m].max()), M.BWD_END))
    return sorted(marks)


def _merged(start: Any, end: Any) -> tuple[Any, Any]:
    """Ranges that overlap (an annotation and its operator of one name) as one."""
    if not start.size:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, idx)
    return s[idx], ends
