"""Why the GPU waits: the GPU-idle time of one entry by cause, each with its evidence, its cost
per step and its knob (issues 28 item 2, 35 items 1-3).

Two kinds of idle time:
- the long intervals: the gaps of the GPU's busy union of `MIN_GAP_NS` or more, the longest
  `MAX_GAPS` of them. Each is judged from
  every piece of evidence about the host in it (`idle_evidence`) and claimed for a cause only
  where that evidence outweighs the others (`idle_classes`), else `unclassified`;
- the short gaps (every other gap: µs between kernels), judged in bulk by HTA's rule on what
  ended them: the next work launched after the gap began means the GPU waited for the launch
  (`launch-bound`: launches slower than the kernels run, the step's µs gaps between short
  kernels); a gap that began while the main thread was in a CUDA sync is the drain that sync
  causes (`sync`: the GPU idles until the host, released, launches again); the rest ran back to
  back, launched in time (`short-gaps`: launch latency on the GPU's side).
Then what each host sync costs after it (`sync_refill`: the gaps that would have shrunk had the
host not blocked, replayed up to the next sync) moves from whatever class had it to `sync`: the
late launches after the queue drained look like launch waits by themselves.

Costs are per step over the steps that start after the GPU span does (`steps_in_span`): a
capture that opens at a step's start has that step's wait before the first kernel, outside the
span. Each
cause's `ms_per_step` is the GPU time it takes from a step: what removing it would give back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.families import host, sync_refill
from orchestrator.analysis.families import idle_classes as C
from orchestrator.analysis.families import idle_evidence as E
from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import (
    IdleBreakdown,
    IdleCause,
    IdleCauses,
    IdleInterval,
    LaunchStats,
)
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals

MIN_GAP_NS = 100_000
MAX_GAPS = 10_000
EXAMPLES = 3  # judged intervals kept per cause
LABELS = {
    "input": "data loading / input",
    "host-compute": "host compute (work on the host between launches)",
    "launch-bound": "launch-bound (µs gaps: kernels shorter than launching them)",
    "sync": "synchronisation while the GPU is idle",
    "communication": "communication wait",
    "copy-staging": "the host side of pageable copies (staging them, releasing their memory)",
    "unclassified": "unclassified (no cause outweighs the others)",
    "short-gaps": "µs gaps between kernels launched in time (back to back)",
}
KNOBS = {
    "input": "load the next batches while the GPU computes: DataLoader(num_workers=N,"
    " pin_memory=True, prefetch_factor=...), cheaper items (tokenise and decode ahead)",
    "host-compute": "take the host work off the step: do it every N steps or asynchronously"
    " (a background thread or process; non_blocking copies of what it needs), vectorise it or"
    " run it on the GPU; in a backward hook: move it out of backward",
    "launch-bound": "fewer, larger launches: CUDA graphs (torch.cuda.graphs,"
    " torch.compile(mode='reduce-overhead')), fused kernels (torch.compile), a larger batch",
    "sync": "remove the host syncs inside the step (.item(), .cpu(), torch.cuda.synchronize(),"
    " printing tensors) or defer them (read values after the step, non_blocking copies and an"
    " event)",
    "communication": "overlap communication with computation (DDP buckets, overlap_grad_sync);"
    " look for a straggler",
    "copy-staging": "copy from pinned host memory: DataLoader(pin_memory=True), or"
    " tensor.pin_memory() / cudaMallocHost for buffers reused each step, with non_blocking"
    " copies",
    "unclassified": "see what the host did in the step picture: the evidence does not single"
    " out a cause (record with CPU sampling and OS-runtime backtraces, or NVTX ranges)",
    "short-gaps": "nothing on the host side: the kernels ran back to back (fusing them,"
    " torch.compile, removes the gaps)",
}


@dataclass
class Judged:
    """The examined intervals as judged, for the steps' boundaries (`step_rules.realign`) and
    their pattern (`step_pattern`): each interval's start, end and host-window end, and the ns
    claimed for each class."""

    a: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    b: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    h: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    claims: list[dict[str, int]] = field(default_factory=list)
    # the launch of each interval's batch copy (`idle_evidence`), -1 without one
    batch_launch: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # the short gaps judged in bulk: start, length, class (SHORT_CLASSES)
    short_a: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    short_len: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    short_cls: Any = field(default_factory=lambda: np.zeros(0, dtype=np.int8))


SHORT_CLASSES = ("launch-bound", "sync", "short-gaps")


def attribute(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gap_starts: Any,
    gap_ends: Any,
    idle_ns: int,
    step_starts: list[int],
    main: tuple[int, int] | None,
) -> IdleCauses | None:
    """The idle attribution of one entry (see the module docstring); None without idle time."""
    return judge(tl, rows, gap_starts, gap_ends, idle_ns, step_starts, main)[0]


def judge(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gap_starts: Any,
    gap_ends: Any,
    idle_ns: int,
    step_starts: list[int],
    main: tuple[int, int] | None,
) -> tuple[IdleCauses | None, Judged]:
    """`attribute`, with the intervals as judged."""
    if idle_ns <= 0 or gap_starts.size == 0:
        return None, Judged()
    lens = gap_ends - gap_starts
    big = np.flatnonzero(lens >= MIN_GAP_NS)  # few: the µs launch gaps are most gaps
    order = big[np.argsort(-lens[big], kind="stable")]
    pick = np.sort(order[:MAX_GAPS])
    a, b = gap_starts[pick], gap_ends[pick]
    ev = E.collect(tl, rows, a, b, main)
    scored = C.score(ev)
    refill = sync_refill.caused(tl, rows, gap_starts, gap_ends, main)
    for i, p in enumerate(pick.tolist()):
        _to_sync(scored.claims[i], int(refill[p]))
    judged = Judged(
        a, b, ev.h, [{c.cls: c.ns for c in cl} for cl in scored.claims],
        np.where(ev.batch >= 0, rows.launch[np.maximum(ev.batch, 0)], -1),
    )  # fmt: skip
    tallies: dict[str, _Tally] = {}
    for i, claims in enumerate(scored.claims):
        window = int(ev.h[i] - ev.a[i])
        interval = IdleInterval(
            start_ns=int(a[i]),
            length_ns=int(b[i] - a[i]),
            window_ns=max(window, 0),
            shares_pct={
                c: round(100 * int(v) / window, 1)
                for c, v in zip((*C.CLASSES, "none"), scored.scores[i], strict=True)
                if v > 0 and window > 0
            },
            claims={c.cls: c.ns for c in claims},
            evidence="; ".join(f"{c.cls}: {c.what}" for c in claims),
        )
        for c in claims:
            tallies.setdefault(c.cls, _Tally()).add(c.ns, c.parts, interval)
    short = np.ones(lens.size, dtype=bool)
    short[pick] = False
    # kernels per step over every step (the first one's wait may lie before the span, its
    # kernels do not)
    launch, short_cls = launch_stats(tl, rows, gap_starts, gap_ends, short, main, len(step_starts))
    idx = np.flatnonzero(short)
    judged.short_a, judged.short_len, judged.short_cls = _split_refill(
        launch, gap_starts[idx], lens[idx], short_cls, refill[idx]
    )
    for cls, ns, gaps, what in (
        ("launch-bound", launch.launch_wait_ns, launch.launch_wait_gaps, _launch_what(launch)),
        ("sync", launch.sync_drain_ns, launch.sync_drain_gaps,
         "µs gaps after the main thread's CUDA syncs: the GPU drained, then waited for the"
         " host to launch again until it was ahead (what those gaps lose had the host not"
         " blocked)"),
        ("short-gaps", launch.back_to_back_ns, int(short.sum()) - launch.launch_wait_gaps
         - launch.sync_drain_gaps, "µs gaps before work launched in time (back to back)"),
    ):  # fmt: skip
        if ns > 0:
            tallies.setdefault(cls, _Tally()).add(ns, [C.Part(what, ns)], None, gaps)
    # provisional (rank_metrics then divides by what the span shows: `per_step`): the steps
    # that start after the span does
    lo_span = int(rows.start[0]) if rows.size else 0
    steps = sum(1 for x in step_starts if x > lo_span) or len(step_starts)
    per = max(steps, 1)
    causes = []
    for kind, t in tallies.items():
        ev_text = C.text(list(t.parts.values()))
        t.examples.sort(key=lambda x: -x.claims.get(kind, 0))
        causes.append(
            IdleCause(
                cause=kind,
                label=LABELS[kind],
                total_ns=t.ns,
                gaps=t.gaps,
                ms_per_step=t.ns / per / 1e6,
                share_of_idle_pct=pct(t.ns, idle_ns),
                evidence=f"{t.gaps:,} interval{'s' if t.gaps != 1 else ''}: {ev_text}",
                knob=KNOBS[kind],
                examples=t.examples[:EXAMPLES],
            )
        )
    causes.sort(key=lambda c: (c.cause in ("unclassified", "short-gaps"), -c.total_ns))
    return IdleCauses(
        steps=steps,
        idle_ns=idle_ns,
        examined_ns=int(lens[pick].sum()) if pick.size else 0,
        examined_gaps=int(pick.size),
        min_gap_ns=MIN_GAP_NS,
        causes=causes,
        evidence_read=ev.sources,
        baseline_ms=None if scored.baseline_ns is None else scored.baseline_ns / 1e6,
        preambles=scored.preambles,
        launch=launch,
    ), judged


SYNC_PART = (
    "the drain and late launches after a host sync (what this gap loses had the host not"
    " blocked: `sync_refill`)"
)


# the claims a sync's refill takes from: the host only launching. A window the evidence gives
# to input, host compute or communication keeps its claim (the sync only kept that work from
# overlapping the GPU's, which the other cause's knob fixes too), and so does one where the host
# waited for something no evidence names (`unclassified`: an exchange the sync was there for,
# say)
REFILL_FROM = ("launch-bound",)


def _to_sync(claims: list[C.Claim], ns: int) -> None:
    """Move up to `ns` of an interval's `REFILL_FROM` claims to `sync` (the largest first)."""
    if ns <= 0:
        return
    got = next((c for c in claims if c.cls == "sync"), None)
    left = ns
    for c in sorted((c for c in claims if c.cls in REFILL_FROM), key=lambda c: -c.ns):
        take = min(c.ns, left)
        c.ns -= take
        left -= take
    moved = ns - left
    claims[:] = [c for c in claims if c.ns > 0 or c.cls == "sync"]
    if moved <= 0:
        return
    if got is None:
        claims.append(C.Claim("sync", moved, [C.Part(SYNC_PART, moved)]))
    else:
        got.ns += moved
        got.parts.append(C.Part(SYNC_PART, moved))


def _split_refill(s: LaunchStats, a: Any, ln: Any, cls: Any, refill: Any) -> tuple[Any, Any, Any]:
    """The short gaps with what the syncs caused in each split off as `sync` (the same start,
    that length), and the launch stats' sums moved with it."""
    sync = SHORT_CLASSES.index("sync")
    take = np.where(cls == sync, 0, np.minimum(refill, ln))
    m = take > 0
    if not bool(m.any()):
        return a, ln, cls
    lb = cls == SHORT_CLASSES.index("launch-bound")
    s.launch_wait_ns -= int(take[m & lb].sum())
    s.back_to_back_ns -= int(take[m & ~lb].sum())
    s.sync_drain_ns += int(take[m].sum())
    whole = m & (take == ln)
    s.launch_wait_gaps -= int((whole & lb).sum())
    s.sync_drain_gaps += int(m.sum())
    keep = ~whole
    a2 = np.r_[a[keep], a[m]]
    ln2 = np.r_[(ln - take)[keep], take[m]]
    cls2 = np.r_[cls[keep], np.full(int(m.sum()), sync, dtype=cls.dtype)]
    order = np.argsort(a2, kind="stable")
    return a2[order], ln2[order], cls2[order]


def per_step(
    causes: IdleCauses,
    judged: Judged,
    steps: list[tuple[str, int, int]],
    span: tuple[int, int],
    rows: T.GpuTable | None = None,
) -> None:
    """Each cause's cost per step, from what the span shows of the steps: an interval that holds
    a step boundary (the gap between one step's work and the next's) is one of the span's
    boundaries, of which the span holds one fewer than steps where it opens on the first step's
    own work (the first step's leading gap and the last one's trailing gap lie outside it), as
    many where it opens on work launched before that step; any other idle (inside a step) is one
    of the steps the span shows most of. A cause costs its boundary idle over the boundaries
    plus its in-step idle over those steps. Without two steps, the total over all steps (over
    the whole capture without steps). `causes.steps`: the steps inside the span."""
    lo, hi = span
    # a step the span shows most of: its range opens on the host a little before its first
    # kernel and may close after its last one, so neither end need lie inside the span; a step
    # a trimmed window cuts through is left out (its idle with it)
    inside_steps = [(s, s + d) for _, s, d in steps if 2 * (min(s + d, hi) - max(s, lo)) >= d]
    bounds = np.array(
        [s for k, (_, s, _) in enumerate(steps) if k > 0 and lo <= s <= hi], dtype=np.int64
    )
    # the first step's start too where the span holds that step's own leading gap (it opens on
    # work of the step before, still running when the window opened): a gap that holds that
    # start, or one before a batch copy the first step itself launched (where the span opens on
    # the first step's own work, the first gap after its start precedes the next step's copy)
    if len(steps) > 1 and judged.a.size and steps[0][1] <= hi:
        s0 = np.int64(steps[0][1])
        held, copy = _boundary_gaps(judged, np.r_[s0, bounds[:1]])
        own = copy[0] >= 0 and judged.batch_launch[copy[0]] < steps[1][1]
        first = held[0] if held[0] >= 0 else (copy[0] if own else -1)
        nxt = (held[1] if held[1] >= 0 else copy[1]) if bounds.size else -1
        if first >= 0 and first != nxt:
            bounds = np.r_[s0, bounds]
    if len(steps) < 2 or not inside_steps:
        causes.steps = len(steps)
        for c in causes.causes:
            c.ms_per_step = c.total_ns / max(len(steps), 1) / 1e6
        return
    ws = np.array([w[0] for w in inside_steps], dtype=np.int64)
    we = np.array([w[1] for w in inside_steps], dtype=np.int64)

    def within(t: Any) -> Any:
        k = np.searchsorted(ws, t, side="right") - 1
        return (k >= 0) & (t < we[np.maximum(k, 0)])

    at_bound: dict[str, float] = {}
    in_step: dict[str, float] = {}
    if judged.a.size:
        holds = _boundary_intervals(judged, bounds, rows)
        ok = within(judged.a)
        for i, cl in enumerate(judged.claims):
            for cls, ns in cl.items():
                if holds[i]:
                    at_bound[cls] = at_bound.get(cls, 0.0) + ns
                elif ok[i]:
                    in_step[cls] = in_step.get(cls, 0.0) + ns
    if judged.short_a.size:
        ok = within(judged.short_a)
        for ci, cls in enumerate(SHORT_CLASSES):
            sel = ok & (judged.short_cls == ci)
            in_step[cls] = in_step.get(cls, 0.0) + float(judged.short_len[sel].sum())
    causes.steps = len(inside_steps)
    nb = max(int(bounds.size), 1)
    for c in causes.causes:
        got = at_bound.get(c.cause, 0.0) / nb + in_step.get(c.cause, 0.0) / len(inside_steps)
        c.ms_per_step = got / 1e6


def _boundary_gaps(judged: Judged, bounds: Any) -> tuple[Any, Any]:
    """For each step start in `bounds` (sorted), the judged interval that holds it, and the
    first that ends after it where that precedes a batch copy launched at or after it (-1:
    none). Judged intervals are sorted and disjoint: the first ending at or after a start is
    the only one that can hold it."""
    n = judged.a.size
    k = np.searchsorted(judged.b, bounds, side="left")
    held = np.where((k < n) & (judged.a[np.minimum(k, n - 1)] <= bounds), k, -1)
    q = np.searchsorted(judged.b, bounds, side="right")
    ok = q < n
    if judged.batch_launch.size:
        ok &= judged.batch_launch[np.minimum(q, n - 1)] >= bounds
    else:
        ok[:] = False
    return held, np.where(ok, q, -1)


def _boundary_intervals(judged: Judged, bounds: Any, rows: T.GpuTable | None) -> Any:
    """Which judged intervals are a step boundary's gap: one that holds the boundary, else the
    first that ends after it when it precedes a batch copy launched after the boundary (a step's
    own ranges open on the host, ahead of the GPU still running the step before, so the gap
    before its batch can open after its range does; a gap inside the step, a backward hook's,
    precedes no batch copy)."""
    del rows  # the boundary's gap is found by time and its batch copy
    n = judged.a.size
    holds = np.zeros(n, dtype=bool)
    if bounds.size == 0 or n == 0:
        return holds
    held, copy = _boundary_gaps(judged, bounds)
    holds[held[held >= 0]] = True
    holds[copy[copy >= 0]] = True
    return holds


def periodic(causes: IdleCauses, cause: str, ms_every: float, every: int) -> None:
    """A cause that makes every `every`-th step slower by `ms_every` costs that over `every`
    steps in the long run, whichever steps the capture caught (a window of a few steps holds
    one occurrence more or less than its share)."""
    for c in causes.causes:
        if c.cause == cause:
            c.ms_per_step = ms_every / every


class _Tally:
    """One cause's intervals: their ns, count, evidence parts added up by what they are."""

    def __init__(self) -> None:
        self.ns = 0
        self.gaps = 0
        self.parts: dict[str, C.Part] = {}
        self.examples: list[IdleInterval] = []

    def add(
        self, ns: int, parts: list[C.Part], interval: IdleInterval | None, gaps: int = 1
    ) -> None:
        self.ns += ns
        self.gaps += gaps
        for p in parts:
            got = self.parts.setdefault(p.key, C.Part(p.key, 0))
            got.ns += p.ns
            got.names += p.names[:64]
        if interval is not None:
            self.examples.append(interval)


def _launch_what(s: LaunchStats) -> str:
    return (
        "µs gaps before work launched after the gap began: the GPU"
        f" waited for launches ({s.kernels_per_step:,.0f} kernels a step, median"
        f" {s.median_kernel_us:.1f} µs each, launched every {s.median_launch_interval_us:.1f} µs"
        " (median))"
    )


def launch_stats(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gs: Any,
    ge: Any,
    short: Any,
    main: tuple[int, int] | None,
    steps: int,
) -> tuple[LaunchStats, Any]:
    """The short gaps by what ended them (each's index into SHORT_CLASSES), and the launch rate
    (module docstring)."""
    out = LaunchStats()
    k = rows.kind == T.KERNEL
    if bool(k.any()):
        out.median_kernel_us = float(np.median(rows.end[k] - rows.start[k])) / 1e3
        out.kernels = int(k.sum())
        out.kernels_per_step = out.kernels / max(steps, 1)
        launches = np.sort(rows.launch[k & (rows.launch >= 0)])
        if launches.size > 1:
            out.median_launch_interval_us = float(np.median(np.diff(launches))) / 1e3
    idx = np.flatnonzero(short)
    if idx.size == 0:
        return out, np.zeros(0, dtype=np.int8)
    a, b = gs[idx], ge[idx]
    # the work that ends each gap: the first activity starting at its end (rows sorted by start)
    j = np.searchsorted(rows.start, b)
    jj = np.minimum(j, max(rows.size - 1, 0))
    launch = np.where(j < rows.size, rows.launch[jj], -1)
    drain = np.zeros(idx.size, dtype=bool)
    if main is not None:
        h = tl.host
        api = h.kind == T.CUDA_API
        m = api & tl.name_mask(host.SYNC_RE.match, h.name[api])[h.name]
        m &= (h.pid == main[0]) & (h.tid == main[1])
        if bool(m.any()):
            ss, se = merge_intervals(h.start[m], h.end[m])
            q = np.searchsorted(ss, a, side="right") - 1
            # in a sync when the GPU ran dry, and the next work launched after that: the drain
            # (a gap inside a sync before work already queued is back to back)
            drain = (q >= 0) & (se[np.maximum(q, 0)] > a) & (launch > a)
    waited = ~drain & (launch > a)
    ln = b - a
    out.sync_drain_ns = int(ln[drain].sum())
    out.sync_drain_gaps = int(drain.sum())
    out.launch_wait_ns = int(ln[waited].sum())
    out.launch_wait_gaps = int(waited.sum())
    out.back_to_back_ns = int(ln[~drain & ~waited].sum())
    cls = np.full(idx.size, SHORT_CLASSES.index("short-gaps"), dtype=np.int8)
    cls[waited] = SHORT_CLASSES.index("launch-bound")
    cls[drain] = SHORT_CLASSES.index("sync")
    return out, cls


def explain_short_gaps(causes: IdleCauses, idle: IdleBreakdown) -> None:
    """The back-to-back gaps' evidence with HTA's idle breakdown over all streams."""
    for c in causes.causes:
        if c.cause == "short-gaps":
            c.evidence += (
                f"; over all streams HTA counts {idle.host_wait_pct:.0f} % of idle as host wait"
                f" (launched late) and {idle.kernel_wait_pct:.0f} % as kernel wait (launch"
                " overhead)"
            )


def sync_while_idle(tl: T.RankTimeline, gap_starts: Any, gap_ends: Any) -> int:
    """Host time in CUDA synchronisation calls (any thread) while the GPU was idle: the part of
    sync time that costs GPU time (a sync that waits for a busy GPU costs the GPU nothing)."""
    h = tl.host
    if h.size == 0 or gap_starts.size == 0:
        return 0
    api = h.kind == T.CUDA_API
    m = api & tl.name_mask(host.SYNC_RE.match, h.name[api])[h.name]
    if not bool(m.any()):
        return 0
    order = np.argsort(h.start[m], kind="stable")
    s, e = merge_intervals(h.start[m][order], h.end[m][order])
    lens = gap_ends - gap_starts
    before = np.r_[0, np.cumsum(lens)]  # idle time before each gap

    def idle_until(x: Any) -> Any:
        k = np.searchsorted(gap_starts, x, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(x - gap_starts[kk], 0, lens[kk])
        return np.where(k >= 0, before[kk] + part, 0)

    return int((idle_until(e) - idle_until(s)).sum())
