"""A memory timeline's events made into what the memory family reads: each allocation paired
with its free (a block with a lifetime), the allocated and reserved bytes after every event,
and the step and phase of every event (from the marks).

Pairing (per address, in event order): an `alloc` is freed by the next `free_requested` of its
address (the allocated bytes drop there, as `torch.cuda.memory_allocated` drops), or by a
`free_completed` when no request was recorded; a `free_completed` after a request only
completes it. A free with no allocation before it frees a block the history does not hold
(allocated before its first event: a ring buffer keeps the last N events), and so does an
active block of the snapshot's segments that no event allocated: both are "before the
history" blocks, whose bytes are the allocated memory at the first event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.timeline import memory as M

NEVER = np.iinfo(np.int64).max  # a block still held when the history ends


@dataclass
class Blocks:
    """One row per block: the events that made and freed it (-1: before the history; `n`: the
    history's end), its size, address and the stack it was allocated from (-1: none)."""

    alloc: Any
    free: Any
    size: Any
    addr: Any
    stack: Any

    @property
    def n(self) -> int:
        return int(self.size.size)


@dataclass
class Curves:
    """Bytes after each event: allocated (None at the CUDA level) and reserved (None when the
    source does not say), and what was held before the first."""

    allocated: Any
    reserved: Any
    start_allocated: int
    start_reserved: int | None


@dataclass
class Phases:
    """Per event: the step it belongs to (steps completed before it), its phase (`M.PHASE_NAMES`)
    and its run (a maximal stretch of one phase: a forward, a backward, one optimizer step)."""

    step: Any
    phase: Any
    run: Any
    steps_done: int  # steps whose end is in the history
    step_ends: Any  # time of each step's end, ns
    has_forward_marks: bool
    # the last event of each finished step (-1: the step has no event)
    end_event: Any
    # the source marked steps at all (without marks nothing tells a block's phase)
    marked: bool = True


def pair(tl: M.MemoryTimeline) -> tuple[Blocks, list[str]]:
    """The blocks of a timeline (see the module docstring) and what did not add up."""
    ev = tl.events
    n = ev.size_n
    notes: list[str] = []
    act = ev.action
    use = np.flatnonzero((act == M.ALLOC) | (act == M.FREE_REQUESTED) | (act == M.FREE_COMPLETED))
    order = use[np.lexsort((use, ev.addr[use]))]
    a = act[order]
    addr = ev.addr[order]
    same = np.zeros(order.size, dtype=bool)
    same[1:] = addr[1:] == addr[:-1]
    prev = np.full(order.size, -1, dtype=np.int8)
    prev[1:] = a[:-1]
    prev = np.where(same, prev, -1)
    is_alloc = a == M.ALLOC
    # the free of the allocation just before (same address), else a block before the history
    frees_alloc = ((a == M.FREE_REQUESTED) | (a == M.FREE_COMPLETED)) & (prev == M.ALLOC)
    completes = (a == M.FREE_COMPLETED) & (prev == M.FREE_REQUESTED)
    before = ~is_alloc & ~frees_alloc & ~completes
    allocs = order[is_alloc]
    free_of = np.full(allocs.size, n, dtype=np.int64)
    # position in `order` of each alloc; its free is the next position when that frees it
    pos = np.flatnonzero(is_alloc)
    nxt = pos + 1
    ok = nxt < order.size
    freed = np.zeros(allocs.size, dtype=bool)
    freed[ok] = frees_alloc[nxt[ok]]
    free_of[freed] = order[nxt[freed]]
    # blocks freed in the history but allocated before it
    early = order[before]
    alloc_col = [allocs, np.full(early.size, -1, dtype=np.int64)]
    free_col = [free_of, early]
    size_col = [ev.size[allocs], ev.size[early]]
    addr_col = [ev.addr[allocs], ev.addr[early]]
    stack_col = [ev.stack[allocs], np.full(early.size, -1, dtype=np.int32)]
    if tl.end_blocks is not None:
        alive = {int(x) for x in ev.addr[allocs[free_of == n]]}
        held = [b for b in tl.end_blocks if b.addr not in alive]
        if held:
            alloc_col.append(np.full(len(held), -1, dtype=np.int64))
            free_col.append(np.full(len(held), n, dtype=np.int64))
            size_col.append(np.array([b.size for b in held], dtype=np.int64))
            addr_col.append(np.array([b.addr for b in held], dtype=np.int64))
            stack_col.append(np.array([b.stack for b in held], dtype=np.int32))
        end_total = sum(b.size for b in tl.end_blocks)
        traced = int(ev.size[allocs[free_of == n]].sum()) + sum(b.size for b in held)
        if end_total != traced:
            notes.append(
                f"the blocks the snapshot held ({end_total} bytes) and those its events leave"
                f" held ({traced} bytes) differ"
            )
    blocks = Blocks(
        alloc=np.concatenate(alloc_col),
        free=np.concatenate(free_col),
        size=np.concatenate(size_col),
        addr=np.concatenate(addr_col),
        stack=np.concatenate(stack_col).astype(np.int32),
    )
    return blocks, notes


def curves(tl: M.MemoryTimeline, blocks: Blocks) -> Curves:
    """Allocated and reserved bytes after each event."""
    ev = tl.events
    n = ev.size_n
    if tl.level == "cuda":
        # the process's own cudaMalloc/cudaFree: reserved memory, what it held at the start
        # being the rows nsys writes at the capture's start
        delta = np.where(np.isin(ev.action, M.RESERVE), ev.size, 0) - np.where(
            np.isin(ev.action, M.RELEASE), ev.size, 0
        )
        start = tl.start_reserved or 0
        return Curves(None, start + np.cumsum(delta), 0, start)
    traced = blocks.alloc >= 0
    ends = blocks.free < n
    up = np.bincount(blocks.alloc[traced], blocks.size[traced], minlength=n + 1)
    down = np.bincount(blocks.free[ends], blocks.size[ends], minlength=n + 1)
    delta = (up - down).astype(np.int64)
    before = int(blocks.size[~traced].sum())
    start_alloc = tl.start_allocated if tl.start_allocated is not None else before
    allocated = start_alloc + np.cumsum(delta[:n])
    if tl.allocated is not None:  # the source's own totals
        allocated = tl.allocated
        start_alloc = int(allocated[0] - (delta[0] if n else 0)) if n else 0
    if tl.reserved is not None:
        res = tl.reserved
        return Curves(allocated, res, int(start_alloc), int(res[0]) if n else None)
    reserved = None
    start_res = tl.start_reserved
    grow = np.where(np.isin(ev.action, M.RESERVE), ev.size, 0)
    shrink = np.where(np.isin(ev.action, M.RELEASE), ev.size, 0)
    change = np.cumsum(grow - shrink)
    if start_res is None and tl.end_segments is not None:
        end_total = sum(s.size for s in tl.end_segments)
        start_res = end_total - (int(change[-1]) if n else 0)
    if start_res is not None:
        reserved = start_res + change
    return Curves(allocated, reserved, int(start_alloc), start_res)


# the phase each mark opens
_OPENS = {
    M.STEP_START: M.FORWARD,
    M.FWD_BEGIN: M.FORWARD,
    M.BWD_BEGIN: M.BACKWARD,
    M.BWD_END: M.AFTER_BACKWARD,
    M.OPT_BEGIN: M.OPTIMIZER,
}


def phases(tl: M.MemoryTimeline, stacks_recorded: bool) -> Phases:
    """Step and phase of each event from the timeline's marks. After an optimizer step the next
    step begins: with forward marks (the hook's first module call) that stretch is the next
    step's forward; without them (PyTorch's own optimizer annotations) forward and backward are
    one stretch ("forward or backward"), split here by the stack when stacks were recorded: an
    event with no Python frame (an allocation, or a free: PyTorch records both stacks) happened
    on autograd's engine thread, in backward (when `stacks_recorded`; else no split)."""
    ev = tl.events
    n = ev.size_n
    marks = tl.marks
    kinds = {k for _, k in marks}
    # a step's start opens its forward only where backward is marked too (else the step is
    # "forward or backward"); before the first step is setup
    fwd = M.FWD_BEGIN in kinds or (M.STEP_START in kinds and M.BWD_BEGIN in kinds)
    started = bool(kinds & {M.FWD_BEGIN, M.STEP_START})
    ends = np.array([t for t, k in marks if k == M.STEP_END], dtype=np.int64)
    step = np.searchsorted(ends, ev.t_ns, side="right").astype(np.int64)
    if not marks:
        phase = np.full(n, M.UNKNOWN, dtype=np.int8)
    else:
        times = [t for t, k in marks if k in _OPENS or k == M.OPT_END]
        opens = dict(_OPENS)
        if not fwd:
            opens[M.STEP_START] = M.UNKNOWN
        codes = [
            opens.get(k, M.FORWARD if fwd else M.UNKNOWN)
            for _, k in marks
            if k in _OPENS or k == M.OPT_END
        ]
        t_arr = np.array(times, dtype=np.int64)
        c_arr = np.array(codes, dtype=np.int8)
        at = np.searchsorted(t_arr, ev.t_ns, side="right") - 1
        first = M.SETUP if started else M.UNKNOWN
        phase = np.where(at >= 0, c_arr[np.maximum(at, 0)], first).astype(np.int8)
        if not fwd:
            # an optimizer's END followed by forward work: the end mark opens "unknown"
            phase = np.where(phase == M.FORWARD, M.UNKNOWN, phase).astype(np.int8)
    if marks and stacks_recorded and bool((phase == M.UNKNOWN).any()):
        py = ev.stack >= 0
        refine = phase == M.UNKNOWN
        phase = np.where(refine & ~py, M.BACKWARD, phase)
        phase = np.where(refine & py, M.FORWARD, phase).astype(np.int8)
    run = np.zeros(n, dtype=np.int64)
    if n:
        change = np.ones(n, dtype=bool)
        change[1:] = (phase[1:] != phase[:-1]) | (step[1:] != step[:-1])
        run = np.cumsum(change) - 1
    end_event = np.searchsorted(step, np.arange(ends.size), side="right") - 1
    return Phases(
        step, phase, run, int(ends.size), ends, started, end_event.astype(np.int64), bool(marks)
    )
