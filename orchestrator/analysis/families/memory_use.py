"""The memory family: one device's memory timeline (`timeline.memory.MemoryTimeline`, from a
PyTorch snapshot, Kineto `[memory]` events or nsys memory-usage events) → `MemoryUse`: the peak
and what held it, by category, each category's own high-water mark, the training steps (the
peak's step and phase, growth per step: a leak, and what grows), the allocator's cache at its
peak (fragmentation), and an out of memory (docs/metrics.md, "Memory").

The allocator-level sources give every block a lifetime (`memory_blocks.pair`) and a category
(`memory_classes.classify`); the CUDA level (nsys) sees only what the allocator reserved, so it
gives the reserved curve, its peak and its steps, and no category.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.families import memory_blocks as B
from orchestrator.analysis.families import memory_classes as C
from orchestrator.analysis.memory_model import (
    MemoryCategory,
    MemoryLane,
    MemoryOom,
    MemoryStep,
    MemoryUse,
)
from orchestrator.analysis.timeline import memory as M

LANE_BUCKETS = 200
MAX_STEPS = 200


def analyze(tl: M.MemoryTimeline) -> MemoryUse:
    """Everything the family says of one device's memory timeline."""
    if tl.level == "cuda":
        return _cuda_level(tl)
    ev = tl.events
    n = ev.size_n
    blocks, notes = B.pair(tl)
    cv = B.curves(tl, blocks)
    stacked = bool(n) and bool((ev.stack >= 0).any())
    ph = B.phases(tl, stacked)
    facts = C.stack_facts(tl.stacks) if tl.stacks else None
    cat, rule = C.classify(blocks, ph, facts, n)
    t0 = int(ev.t_ns[0]) if n else 0
    use = MemoryUse(
        source=_source_text(tl),
        level="allocator",
        device=tl.device,
        events=n,
        span_ns=int(ev.t_ns[-1]) - t0 if n else 0,
        marks=tl.marks_source,
        stacks=stacked,
        whole=not bool((blocks.alloc < 0).any()),
        expandable_segments=tl.expandable_segments,
        alloc_conf=tl.alloc_conf,
        capacity_bytes=tl.total_memory,
        limit_bytes=tl.limit,
        partition_bytes=tl.partition_memory,
        notes=[*tl.notes, *notes],
    )
    if n == 0:
        return use
    series = _category_series(blocks, cat, n)
    alloc = cv.allocated
    if tl.allocated is not None:
        # the source's totals hold blocks made before its window and never freed in it: the
        # remainder is "before the history"
        rest = alloc - sum(series.values(), np.zeros(n, dtype=np.int64))
        if int(rest.max()) > 0:
            series[C.BEFORE] = np.maximum(rest, 0)
    k = int(np.argmax(alloc))
    use.peak_allocated_bytes = int(alloc[k])
    use.peak_at_ns = int(ev.t_ns[k]) - t0
    if ph.steps_done or tl.marks:
        use.peak_step = int(ph.step[k])
        use.peak_phase = M.PHASE_NAMES[int(ph.phase[k])]
    res = cv.reserved
    use.categories = _at(k, blocks, cat, rule, series, alloc, res)
    if res is not None:
        # the reserved peak's moment; where the reserved memory stays at its peak (a cache
        # that never shrinks), the moment of those with the most allocated
        at_top = np.flatnonzero(res == res.max())
        kr = int(at_top[np.argmax(alloc[at_top])])
        use.peak_reserved_bytes = int(res[kr])
        use.cache_at_reserved_peak_bytes = int(res[kr] - alloc[kr])
        use.fragmentation_pct = 100.0 * (res[kr] - alloc[kr]) / res[kr] if res[kr] > 0 else None
        if bool((res < alloc).any()):  # the source's segments and its events disagree
            use.notes.append(
                "the reserved memory read from the snapshot's segments falls below the"
                " allocated at times: its segments and its events disagree (a snapshot edited"
                " or cut by hand?); the cache figures are not reliable"
            )
            use.cache_at_reserved_peak_bytes = None
            use.fragmentation_pct = None
    if tl.end_segments:
        free = [b for s in tl.end_segments for b in s.free_blocks]
        use.largest_free_block_bytes = max(free) if free else 0
    use.steps = _steps(ph, cv, blocks, cat, ev.t_ns, t0)
    _growth(use, blocks, cat, ph, facts)
    if tl.oom is not None:
        use.oom = _oom(tl, blocks, cat, rule, series, cv, ph, use)
    use.lane = _lane(ev.t_ns, alloc, res, series, ph, k)
    if not use.whole:
        why = (
            "the allocator keeps the last N events: profile.memory_max_events"
            if tl.source == "torch snapshot"
            else "the profiled window began after them"
        )
        use.notes.append(
            f"{int((blocks.alloc < 0).sum())} blocks freed in the history were allocated before"
            f" its first event ({why})"
        )
    return use


def _source_text(tl: M.MemoryTimeline) -> str:
    if tl.source != "torch snapshot":
        return tl.source
    if tl.mode is None:
        return "torch snapshot (taken by hand" + (", with stacks)" if tl.stacks else ")")
    return f"torch snapshot (gh-run's hook: {tl.mode}, last {tl.max_events} events)"


def _category_series(blocks: B.Blocks, cat: Any, n: int) -> dict[int, Any]:
    """Per category present: its bytes after each event."""
    out = {}
    traced = blocks.alloc >= 0
    ends = blocks.free < n
    for c in np.unique(cat).tolist():
        m = cat == c
        up = np.bincount(blocks.alloc[m & traced], blocks.size[m & traced], minlength=n)
        down = np.bincount(blocks.free[m & ends], blocks.size[m & ends], minlength=n)
        start = int(blocks.size[m & ~traced].sum())
        out[int(c)] = start + np.cumsum(up[:n] - down[:n]).astype(np.int64)
    return out


def _live(k: int, blocks: B.Blocks) -> Any:
    return (blocks.alloc <= k) & (blocks.free > k)


def _at(
    k: int,
    blocks: B.Blocks,
    cat: Any,
    rule: Any,
    series: dict[int, Any],
    alloc: Any,
    res: Any | None,
) -> list[MemoryCategory]:
    """What held the memory after event k, by category, largest first (the cache last when
    equal), each with its high-water mark and how its bytes were classed."""
    live = _live(k, blocks)
    out = []
    for c, s in series.items():
        if c == C.BEFORE:
            if int(s[k]) or int(s.max()):
                out.append(
                    MemoryCategory(
                        name=C.NAMES[C.UNKNOWN],
                        bytes=int(s[k]),
                        max_bytes=int(s.max()),
                        how="held since before the source's first event (allocated before"
                        " the profiled window, never freed in it)",
                    )
                )
            continue
        m = live & (cat == c)
        nbytes = int(blocks.size[m].sum())
        if not nbytes and not int(s.max()):
            continue
        out.append(
            MemoryCategory(
                name=C.NAMES[c],
                bytes=nbytes,
                blocks=int(m.sum()),
                max_bytes=int(s.max()),
                how=_how(rule[m], blocks.size[m]),
            )
        )
    if res is not None:
        out.append(
            MemoryCategory(
                name="cache",
                bytes=int(res[k] - alloc[k]),
                max_bytes=int((res - alloc).max()),
                how="reserved by the allocator (its segments) and not allocated: free blocks"
                " it keeps for later requests",
            )
        )
    return sorted(out, key=lambda x: -x.bytes)


def _how(rules: Any, sizes: Any) -> str:
    if not rules.size:
        return ""
    by = np.bincount(rules, sizes, minlength=len(C.RULES))
    total = by.sum()
    parts = [
        f"{100 * by[r] / total:.0f} %: {C.RULES[r][1]}"
        for r in np.argsort(-by).tolist()
        if by[r] > 0
    ]
    return "; ".join(parts[:3])


def _steps(
    ph: B.Phases, cv: B.Curves, blocks: B.Blocks, cat: Any, t: Any, t0: int
) -> list[MemoryStep]:
    n = int(t.size)
    if not ph.steps_done:
        return []
    alloc, res = cv.allocated, cv.reserved
    last = int(ph.step[-1])
    kept = (cat == C.RETAINED) & (blocks.alloc >= 0)
    retained = np.bincount(
        ph.step[blocks.alloc[kept]], blocks.size[kept], minlength=last + 1
    ).astype(np.int64)
    starts = np.searchsorted(ph.step, np.arange(last + 2), side="left")
    out = []
    for s in range(last + 1):
        lo, hi = int(starts[s]), int(starts[s + 1])
        if hi <= lo:
            continue
        k = lo + int(np.argmax(alloc[lo:hi]))
        finished = s < ph.steps_done
        end_ns = int(ph.step_ends[s]) if finished else int(t[hi - 1])
        begin_ns = int(ph.step_ends[s - 1]) if s > 0 else int(t[lo])
        out.append(
            MemoryStep(
                step=s,
                start_ns=begin_ns - t0,
                end_ns=end_ns - t0,
                finished=finished,
                allocated_start=int(alloc[lo - 1]) if lo > 0 else cv.start_allocated,
                allocated_end=int(alloc[hi - 1]),
                peak_bytes=int(alloc[k]),
                peak_phase=M.PHASE_NAMES[int(ph.phase[k])],
                reserved_end=int(res[hi - 1]) if res is not None else None,
                retained_bytes=int(retained[s]),
            )
        )
    del n
    if len(out) > MAX_STEPS:  # the first, the last and evenly between
        pick = np.unique(np.linspace(0, len(out) - 1, MAX_STEPS).round().astype(int))
        out = [out[i] for i in pick.tolist()]
    return out


def _growth(
    use: MemoryUse, blocks: B.Blocks, cat: Any, ph: B.Phases, facts: C.StackFacts | None
) -> None:
    """Growth per step: over the finished steps after the first (the first makes the
    gradients and optimizer state once), the median rise of the allocated bytes at a step's
    end, and the median bytes a step allocated and never freed; where those came from."""
    done = [s for s in use.steps if s.finished and s.step >= 1]
    ends = {
        s.step: s.allocated_end for s in use.steps if s.finished and s.allocated_end is not None
    }
    diffs = [ends[s.step] - ends[s.step - 1] for s in done if s.step in ends and s.step - 1 in ends]
    if len(diffs) >= 2:
        use.growth_per_step_bytes = int(np.median(diffs))
        use.growth_steps = len(diffs)
        use.retained_per_step_bytes = int(np.median([s.retained_bytes for s in done]))
    kept = (cat == C.RETAINED) & (blocks.alloc >= 0)
    if facts is not None and bool(kept.any()):
        later = kept & (ph.step[np.where(blocks.alloc >= 0, blocks.alloc, 0)] >= 1)
        st = blocks.stack[later]
        ok = st >= 0
        if bool(ok.any()):
            by = np.bincount(st[ok], blocks.size[later][ok])
            use.leak_where = facts.where[int(np.argmax(by))] or None


def _oom(
    tl: M.MemoryTimeline,
    blocks: B.Blocks,
    cat: Any,
    rule: Any,
    series: dict[int, Any],
    cv: B.Curves,
    ph: B.Phases,
    use: MemoryUse,
) -> MemoryOom:
    """The out of memory: the state just before it (the last event at or before it)."""
    oom = tl.oom
    assert oom is not None
    ev = tl.events
    k = max(0, int(np.searchsorted(ev.t_ns, oom.t_ns, side="right")) - 1)
    alloc = int(cv.allocated[k])
    res = int(cv.reserved[k]) if cv.reserved is not None else None
    cats = [c for c in _at(k, blocks, cat, rule, series, cv.allocated, cv.reserved)]
    return MemoryOom(
        requested_bytes=oom.requested,
        allocated_bytes=alloc,
        reserved_bytes=res,
        cached_free_bytes=res - alloc if res is not None else None,
        largest_free_block_bytes=use.largest_free_block_bytes,
        device_free_bytes=oom.device_free,
        limit_bytes=oom.limit or tl.limit or tl.total_memory,
        total_bytes=oom.total or tl.total_memory,
        step=int(ph.step[k]) if tl.marks else None,
        phase=M.PHASE_NAMES[int(ph.phase[k])] if tl.marks else None,
        categories=cats,
        source=oom.source,
    )


def _lane(
    t: Any, alloc: Any, res: Any | None, series: dict[int, Any], ph: B.Phases, peak: int
) -> MemoryLane:
    """The history in at most LANE_BUCKETS equal buckets, each at its highest allocation."""
    t0, t1 = int(t[0]), int(t[-1])
    span = max(1, t1 - t0)
    buckets = min(LANE_BUCKETS, max(1, int(t.size)))
    width = max(1, -(-span // buckets))
    which = np.minimum((t - t0) // width, buckets - 1)
    bounds = np.searchsorted(which, np.arange(buckets + 1), side="left")
    idx = []
    for b in range(buckets):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        idx.append(lo + int(np.argmax(alloc[lo:hi])) if hi > lo else -1)
    pick = np.array(idx, dtype=np.int64)
    have = pick >= 0
    # an empty bucket holds what the one before it ended with
    fill = np.maximum.accumulate(np.where(have, np.arange(buckets), -1))
    src = np.where(fill >= 0, pick[np.maximum(fill, 0)], 0)

    def at(col: Any) -> list[int]:
        return [int(v) for v in col[src]]

    return MemoryLane(
        start_ns=0,
        bucket_ns=int(width),
        allocated=at(alloc),
        reserved=at(res) if res is not None else [],
        categories=_lane_categories(series, at),
        step_ends_ns=[int(e) - t0 for e in ph.step_ends.tolist()],
        peak_ns=int(t[peak]) - t0,
    )


def _lane_categories(series: dict[int, Any], at: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for c, s in series.items():
        if int(s.max()) <= 0:
            continue
        name = C.NAMES[C.UNKNOWN if c == C.BEFORE else c]
        values = at(s)
        out[name] = (
            [a + b for a, b in zip(out[name], values, strict=True)] if name in out else values
        )
    return out


def _cuda_level(tl: M.MemoryTimeline) -> MemoryUse:
    """nsys: what the process took from CUDA; its peak, its steps, no category."""
    ev = tl.events
    n = ev.size_n
    cv = B.curves(tl, B.Blocks(*(np.zeros(0, dtype=np.int64) for _ in range(5))))
    ph = B.phases(tl, False)
    t0 = int(ev.t_ns[0]) if n else 0
    use = MemoryUse(
        source=tl.source,
        level="cuda",
        device=tl.device,
        events=n,
        span_ns=int(ev.t_ns[-1]) - t0 if n else 0,
        marks=tl.marks_source,
        notes=[
            *tl.notes,
            "CUDA level: what the process took from CUDA (cudaMalloc: the allocator's"
            " segments), not what tensors held; no category",
        ],
    )
    res = cv.reserved
    if n == 0 or res is None:
        return use
    k = int(np.argmax(res))
    use.peak_reserved_bytes = int(res[k])
    use.peak_at_ns = int(ev.t_ns[k]) - t0
    if tl.marks:
        use.peak_step = int(ph.step[k])
        use.peak_phase = M.PHASE_NAMES[int(ph.phase[k])]
    out = []
    if ph.steps_done:
        last = int(ph.step[-1])
        starts = np.searchsorted(ph.step, np.arange(last + 2), side="left")
        for s in range(min(last + 1, MAX_STEPS)):
            lo, hi = int(starts[s]), int(starts[s + 1])
            if hi <= lo:
                continue
            kk = lo + int(np.argmax(res[lo:hi]))
            finished = s < ph.steps_done
            out.append(
                MemoryStep(
                    step=s,
                    start_ns=(int(ph.step_ends[s - 1]) if s else int(ev.t_ns[lo])) - t0,
                    end_ns=(int(ph.step_ends[s]) if finished else int(ev.t_ns[hi - 1])) - t0,
                    finished=finished,
                    peak_bytes=int(res[kk]),
                    peak_phase=M.PHASE_NAMES[int(ph.phase[kk])],
                    reserved_end=int(res[hi - 1]),
                )
            )
    use.steps = out
    ends = {s.step: s.reserved_end for s in out if s.finished and s.reserved_end is not None}
    diffs = [v - ends[s - 1] for s, v in ends.items() if s >= 1 and s - 1 in ends]
    if len(diffs) >= 2:
        use.growth_per_step_bytes = int(np.median(diffs))
        use.growth_steps = len(diffs)
    use.lane = MemoryLane(
        start_ns=0,
        bucket_ns=max(1, use.span_ns),
        reserved=[int(res.max())],
        step_ends_ns=[int(e) - t0 for e in ph.step_ends.tolist()],
        peak_ns=use.peak_at_ns,
    )
    return use
