"""What each cause's removal would give back: the steps replayed on their dependency structure
(issue 41 item 1), as Holistic Trace Analysis's critical path sees a step: the GPU waits for
what the host launches, the host waits for the GPU where it synchronises.

The GPU's busy union splits the span into busy segments and the gaps between them. Each gap
is one of three edges:

- **host**: the work after it was launched during the gap (or its launch is unknown): the GPU
  waited for the host, so the segment after it can start once the host launches it. Host time
  removed before it (an idle class's claims: input, host compute, ...) moves that launch, and
  every later one, earlier;
- **sync**: the main thread sat in a CUDA synchronisation when the GPU went idle and came out
  of it in the gap: the host waited for the GPU, so what follows starts the gap's own length
  after the GPU's new end (the host is re-anchored to the GPU there);
- **gpu**: the work after it had been launched before the gap began: the GPU waited for
  something on its own side (another stream, an event), kept as it is.

A segment starts at the later of its ready time and the previous segment's end (a max-plus
recurrence, computed for all segments at once: `replay`). A cost the GPU hides, or one that
another cost also covers, gives back nothing in the replay: removing input where the host also
computes leaves the host compute's wait; shortening GEMMs of a step the host bounds moves the
bottleneck to the host. Each lever is replayed on its own, at the knob's typical effect and at
the two ends of its range (`EFFECTS`).

The projected step is the mean step over the steps the span shows, scaled by how much the
replay shortens the stretch of the span those steps cover; without steps, the span's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.families import host, links
from orchestrator.analysis.families.idle_causes import MIN_GAP_NS, SHORT_CLASSES, Judged
from orchestrator.analysis.families.kernel_classes import (
    HTA_TYPES,
    attention_precision,
    gemm_precision,
)
from orchestrator.analysis.metrics import LeverProjection, StepProjections
from orchestrator.analysis.readers import pageable_copies
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals

# the idle classes whose host time a knob removes (idle_classes.CLASSES)
IDLE_LEVERS = ("input", "host-compute", "launch-bound", "sync", "communication")
# the claims no lever of their own removes, which a composite lever does (a CUDA graph runs the
# step's µs gaps too; pinned memory takes the host's staging after a pageable copy, whatever
# class its time was given)
OTHER_CLAIMS = ("short-gaps", "unclassified", "copy-staging")
# what a CUDA graph of the whole step removes: the host's gaps between its launches, wherever
# they lie (the loop's own Python that launches between steps is replayed by the graph too),
# and the waits no cause explains (in a launch-heavy step they are the host's: the graph leaves
# the host's launching out of the step altogether); the input wait, communication and the
# host's own work (GRAPH_HOST_NS) stay
GRAPH_CLASSES = ("launch-bound", "host-compute", "sync", "short-gaps", "unclassified")
# A CUDA graph replays the launches of the step, not the host's own work: a wait no cause
# explains in which the host launched nothing and sat in no sync for longer than this stays
# under a graph (a batch tokenised in Python, file or network I/O: a Kineto trace records none
# of it). Where the evidence shows the host's work (host compute: PyTorch freeing a step's
# tensors, an optimizer's Python over many parameters, 2-4 ms without a launch in causes_h200's
# ml_eager, which its graph run removed), the graph removes it; a loop's own numpy, host compute
# too, is the blind spot of that (docs/metrics.md).
GRAPH_HOST_NS = 1_000_000
# The host's share of a pageable copy (the driver staging it through its pinned bounce buffer)
# runs at 3-9 GB/s on the H200 recordings (`links`): the host time after a copy that its
# staging can explain is at most its bytes at a third of the slowest of those rates. A 4-byte
# `.item()` read explains microseconds, not the milliseconds of Python that may follow it.
STAGING_FLOOR_BPS = 1e9
# the knob's effect: (typical, best, worst). For idle levers the share of the claimed host time
# removed; for launch-bound the ns left of each launch gap (one CUDA graph's node-to-node gap);
# for GPU levers how many times faster the work runs (copies, fp32 GEMMs: `OTHER_X` for the
# other compute kernels) or the share of the exposed time hidden (communication)
EFFECTS: dict[str, tuple[float, float, float]] = {
    "input": (1.0, 1.0, 1.0),  # the loader's own floor: presentation.projections
    "host-compute": (1.0, 1.0, 0.5),
    "launch-bound": (500.0, 200.0, 2_000.0),
    "sync": (1.0, 1.0, 0.5),
    "communication": (1.0, 1.0, 0.5),
    "fp32-gemms": (15.0, 16.0, 8.0),
    "copies": (1.0, 1.0, 1.0),  # each copy at the link's pinned bandwidth: `links`
    "comm-overlap": (0.75, 1.0, 0.5),
}
ASSUMPTIONS = {
    "input": "the main thread's loading leaves the step (DataLoader workers keep up); the GPU"
    " work and the rest of the host's stays",
    "host-compute": "the host work the GPU waited for leaves the step (asynchronous or every N"
    " steps), with the device-to-host copies that read its data back right before it; half of"
    " it stays at worst",
    "launch-bound": "the step replayed as one CUDA graph: every host gap in it (launches,"
    " dispatch, syncs, waits no cause explains) and each short wait on the GPU's side between"
    " two operations of one stream shrink to 0.5 µs (0.2-2 µs: a graph's node-to-node gap); the"
    " input wait, the host's own work (over 1 ms without a launch) and the kernels stay",
    "sync": "the syncs inside the step go (the host no longer waits for the GPU in them); half"
    " the drain stays at worst",
    "communication": "the waits for communication leave the step",
    "fp32-gemms": "bf16 autocast: fp32 GEMMs run 15x faster on tensor cores (8-16x: Hopper's"
    " bf16 tensor-core peak is 15x its fp32 one, Ampere's 16x), fp32 fused attention 10x"
    " (4-14x: its two GEMMs move to tensor cores, its softmax does not), the other kernels as"
    " fast as before (0.85-1.6x: autocast leaves their type to their inputs and adds a cast"
    " for each GEMM's operands)",
    "copies": "host-device copies run at the link's pinned bandwidth ({link}); the host's"
    " staging of a pageable copy goes with it, and a host-to-device copy, non_blocking, no"
    " longer holds the host (at worst, a blocking copy: the host waits for it as long as it"
    " runs)",
    "comm-overlap": "three quarters of the communication that runs alone hides behind"
    " computation (half to all)",
}
# bf16 autocast's effect on the compute kernels that are not fp32 GEMMs, with the fp32 GEMMs'
# (typical, best, worst). Fused attention in fp32 (PyTorch's memory-efficient kernels) becomes
# a flash kernel on the tensor cores. The rest keep the type of their inputs under autocast
# (norms, softmax and losses it runs in fp32 on purpose) and gain casts to bf16 before every
# GEMM: they take about their fp32 time (four fp32 -> bf16 pairs read per class, three on
# H200s and one on an H100: GEMMs 14.7-15.9x, fp32 attention 9.6-12.3x, the rest 0.86-0.94x
# with the casts; two models recorded after: docs/metrics.md "bf16 autocast, class by class").
AUTOCAST_X: dict[str, tuple[float, float, float]] = {
    "fp32-attention": (10.0, 14.0, 4.0),
    "fp32-others": (1.0, 1.6, 0.85),
}
LATENCY_NS = (1_000, 20_000)  # the launch-to-start latency measured is kept inside these
# A host-to-device copy from pinned memory with non_blocking=True (the copies knob) returns once
# it is queued: the host keeps this much of its call, a cudaMemcpyAsync's own cost (causes_h200's
# img_pinned, a DataLoader's pinned batches copied non_blocking: 5-26 µs a call, 12 the median)
ASYNC_COPY_CALL_NS = 12_000
# the device-to-host copies read back, newest first, before a gap of host compute that the
# host-compute lever takes with that work (`_feeding`): a metric's scores and labels, a batch
# of predictions; a bound on the walk back, not a count any trace was seen to reach
MAX_FEEDING = 16
_NEG = -(2**61)


@dataclass
class StepGraph:
    """The GPU's work in start order as the replay needs it: each op's exclusive time (what it
    adds to the busy union), its ready time on the host's side (launch + latency; _NEG where
    the GPU, not the host, held it), the wait it had on the GPU's side, the host time each idle
    class claims before its launch, each GPU lever's share of it, and the main thread's
    syncs (call start, release, the GPU work they awaited)."""

    start: Any  # each op's start (ns)
    excl: Any  # exclusive ns
    ready: Any  # host-side ready time, _NEG where none binds
    gpu_wait: Any  # the wait on the GPU's side before it (ns)
    launch: Any  # the launch (ns; _NEG where unknown)
    gap_at: Any  # per gap of the union: when the host ended it (the launch of the work after)
    gap_order: Any  # the gaps in the order of gap_at
    removable: dict[str, Any]  # idle class -> ns per gap
    launch_gaps: Any  # per gap: 1 where launch-bound claimed it
    after_copy: Any  # per gap: the host staging ns the copy right before it explains (0: none)
    gpu_time: dict[str, Any]  # GPU lever -> exclusive ns per op
    sync_s: Any  # main-thread syncs: call start
    sync_e: Any  # release
    window: Any  # the step boundaries of whole periods (`_window`)
    # per sync: how long after its release a copy it issued ran on (a pageable copy's call
    # returns a few µs before the copy ends: the host was held by the copy all the same)
    sync_tie: Any = None
    # per op, at (typical, best, worst): what is left of a host-device copy's exclusive time
    # at the link's pinned bandwidth (1 for any other op), and the link's sentence
    copy_left: tuple[Any, Any, Any] | None = None
    link: str = ""
    # per op: a GPU-side wait a CUDA graph shortens (under MIN_GAP_NS, after an op of the same
    # stream; 0 elsewhere)
    queued_wait: Any = None
    # per gap: the host ns a graph keeps (GRAPH_HOST_NS: the stretch of the gap before the launch
    # that ends it in which the host neither launched nor waited in a sync, beyond that bound)
    graph_keeps: Any = None
    # per sync: True where it is a host-to-device copy's call that held the host (or the stream
    # sync a blocking copy adds right after it), which a non_blocking copy from pinned memory
    # does not: the copies lever's host leaves it at once (`_async_calls`)
    async_copy: Any = None
    # per op: the exclusive ns of a device-to-host copy that fed host compute the GPU then
    # waited for (`_feeding`: the run of such copies that ends the GPU's work before a gap host
    # compute claims); the host-compute lever takes it away with that work (0 elsewhere)
    feeding: Any = None


def build(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gap_s: Any,
    gap_e: Any,
    judged: Judged,
    names_cls: Any,
    main: tuple[int, int] | None,
    steps: list[tuple[str, int, int]],
) -> StepGraph | None:
    """The step graph of one entry (rows sorted by start); None without GPU work."""
    if rows.size == 0:
        return None
    window = _window(int(rows.start[0]), int(rows.end.max()), steps)
    window, part = _bounded(rows.start, window)
    if part is not None:  # the replay's stretch only: its gaps and claims with it
        keep = (gap_e > rows.start[part.start]) & (gap_s < rows.start[part.stop - 1])
        gap_s, gap_e = gap_s[keep], gap_e[keep]
        rows = rows.take(part)
    act = np.flatnonzero(np.isin(rows.kind, T.ACTIVITY_KINDS))
    if act.size == 0:
        return None
    s = rows.start[act].astype(np.int64)
    e = rows.end[act].astype(np.int64)
    before = np.r_[np.int64(s[0]), np.maximum.accumulate(e)[:-1]]
    excl = np.maximum(e - np.maximum(s, before), 0)
    launch = rows.launch[act].astype(np.int64)
    known = (launch != T.NONE) & (launch <= s)
    gapped = s > before
    lag = s - launch
    # the launch latency: what the host-bound ops (launched inside the gap they end) waited
    hb = gapped & known & (launch >= before)
    lat = int(np.clip(np.median(lag[hb]) if hb.any() else LATENCY_NS[0], *LATENCY_NS))
    # an op launched after the GPU ran out of work was waited for: ready when it started (its
    # launch's own latency included); any other was ready a latency after its launch
    ready = np.where(hb, s, np.where(known, launch + np.minimum(lag, lat), _NEG))
    # launched within 20 µs of a host-device copy's end: the host waited for the copy (a
    # pageable copy blocks the launching thread; nsys keeps no row of that wait), so the work
    # after it follows the copy, not the host's clock
    idx = np.arange(s.size)
    top = np.maximum.accumulate(np.where(e >= np.maximum.accumulate(e), idx, 0))
    prev = np.r_[0, top[:-1]]
    copied = (rows.kind[act] == T.MEMCPY) & np.isin(rows.copy[act], (1, 2))
    blocked = hb & (launch - before <= LATENCY_NS[1]) & copied[prev] & (idx > 0)
    gpu_wait = np.where(gapped & ~hb, s - before, 0)
    # the gap on the GPU's side between two operations of one stream, the second launched
    # before the first ended (the launch's own latency, a few µs on an H200, where the host
    # launched just in time): a graph's node-to-node gap replaces it; a wait for another
    # stream's work stays
    stream = rows.stream[act]
    queued_wait = np.where(
        (gpu_wait < MIN_GAP_NS) & (stream == stream[prev]) & (idx > 0), gpu_wait, 0
    )
    n_gap = int(gap_s.size)
    removable = {c: np.zeros(n_gap, dtype=np.int64) for c in (*IDLE_LEVERS, *OTHER_CLAIMS)}
    launch_gaps = np.zeros(n_gap, dtype=np.int64)
    if judged.a.size and n_gap:
        gi = np.searchsorted(gap_s, judged.a)
        ok = (gi < n_gap) & (gap_s[np.minimum(gi, n_gap - 1)] == judged.a)
        for i in np.flatnonzero(ok).tolist():
            claims = judged.claims[i]
            for cls, ns in claims.items():
                if cls in removable:
                    removable[cls][gi[i]] += ns
            if "launch-bound" in claims:
                launch_gaps[gi[i]] += 1
    if judged.short_a.size and n_gap:
        gi = np.searchsorted(gap_s, judged.short_a)
        ok = (gi < n_gap) & (gap_s[np.minimum(gi, n_gap - 1)] == judged.short_a)
        for ci, cls in enumerate(SHORT_CLASSES):
            if cls in removable:
                sel = ok & (judged.short_cls == ci)
                removable[cls] += np.bincount(
                    gi[sel], weights=judged.short_len[sel], minlength=n_gap
                ).astype(np.int64)
                if cls == "launch-bound":
                    launch_gaps += np.bincount(gi[sel], minlength=n_gap)
    if n_gap:
        lens = gap_e - gap_s
        for cls in removable:
            np.minimum(removable[cls], lens, out=removable[cls])
    # per gap: a host-device copy right before it (the host staging a pageable batch)
    ending = np.minimum(np.searchsorted(s, gap_e, side="left"), s.size - 1)
    before_gap = prev[ending]
    nbytes = rows.nbytes[act].astype(np.float64)
    after_copy = np.where(
        copied[before_gap], nbytes[before_gap] / STAGING_FLOOR_BPS * 1e9, 0
    ).astype(np.int64)
    at = _gap_at(s, launch, known, gap_e)
    ss, se = _syncs(tl, main)
    keeps = _host_stretch(gap_s, at, np.sort(launch[known]), se)
    ps, pe = _pageable_calls(tl, main, int(s[0]), int(e.max()))
    if ps.size:  # the calls that staged a pageable copy held the host as a sync does
        order = np.argsort(np.r_[ss, ps], kind="stable")
        ss, se = merge_intervals(np.r_[ss, ps][order], np.r_[se, pe][order])
        ss, se = np.asarray(ss, dtype=np.int64), np.asarray(se, dtype=np.int64)
    if blocked.any():  # each such wait as a sync: from the copy's launch to the next launch
        b = np.flatnonzero(blocked)
        cs = np.where(known[prev[b]], launch[prev[b]], s[prev[b]])
        order = np.argsort(np.r_[ss, cs], kind="stable")
        ss, se = merge_intervals(np.r_[ss, cs][order], np.r_[se, launch[b]][order])
        ss, se = np.asarray(ss, dtype=np.int64), np.asarray(se, dtype=np.int64)
    link = links.pinned_link(tl, rows)
    dur = (e - s).astype(np.float64)
    # what is left of each copy at each rate: never more than it took (1 for any other op)
    left = [
        np.clip(links.pinned_ns(nbytes, bw) / np.maximum(dur, 1.0), 0.0, 1.0)
        for bw in link.bandwidth
    ]
    # a copy whose size the source does not give keeps its time: no rate makes a time of it
    on = copied & (dur > 0) & (nbytes > 0)
    copy_left = (np.where(on, left[0], 1.0), np.where(on, left[1], 1.0), np.where(on, left[2], 1.0))
    return StepGraph(
        s, excl, ready, gpu_wait, np.where(known, launch, _NEG), at, np.argsort(at, kind="stable"),
        removable, launch_gaps, after_copy,
        _gpu_levers(tl, rows, act, excl, names_cls), ss, se,
        window, _ties(ss, se, s, e, launch, known & copied), copy_left, link.sentence(),
        queued_wait, keeps,
        _async_calls(ss, se, s, e, launch, known & copied & (rows.copy[act] == 1)),
        _feeding(excl, prev[ending], copied & (rows.copy[act] == 2) & (copy_left[0] < 0.5),
                 removable["host-compute"]),
    )  # fmt: skip


def _host_stretch(gap_s: Any, at: Any, launches: Any, releases: Any) -> Any:
    """Per gap: how far the host's last stretch in it before `at` (the launch that ends it), in
    which it launched nothing and sat in no sync, runs past GRAPH_HOST_NS; 0 where it does not.
    `launches`, `releases` sorted."""
    if gap_s.size == 0:
        return np.zeros(0, dtype=np.int64)
    begin = gap_s.astype(np.int64)
    for marks in (launches, releases):
        if marks.size:
            k = np.searchsorted(marks, at, side="left") - 1
            begin = np.maximum(begin, np.where(k >= 0, marks[np.maximum(k, 0)], begin))
    return np.maximum(at - begin - GRAPH_HOST_NS, 0).astype(np.int64)


def _held(ss: Any, se: Any, s: Any, e: Any, launch: Any, copies: Any) -> tuple[Any, Any]:
    """(copy, sync) index pairs: each of `copies` launched inside a sync whose call held the host
    for at least half the copy (a pageable copy, staged by the host, returns once the last chunk
    is staged, a few µs before the copy ends; a blocking copy waits for it)."""
    c = np.flatnonzero(copies)
    if c.size == 0 or ss.size == 0:
        return c[:0], c[:0]
    k = np.searchsorted(ss, launch[c], side="right") - 1
    ok = k >= 0
    c, k = c[ok], k[ok]
    held = (launch[c] <= se[k]) & (se[k] - launch[c] >= (e[c] - s[c]) // 2)
    return c[held], k[held]


def _ties(ss: Any, se: Any, s: Any, e: Any, launch: Any, copies: Any) -> Any:
    """Per sync: how far past its release a copy that held it (`_held`) ran, where the copy
    ended within LATENCY_NS[1] of the release; 0 elsewhere. The replay re-anchors the host at
    such a sync as at one that waited: it leaves the call when the (shortened) copy ends."""
    tie = np.zeros(ss.size, dtype=np.int64)
    c, k = _held(ss, se, s, e, launch, copies)
    over = e[c] - se[k]
    sel = (over > 0) & (over <= LATENCY_NS[1])
    np.maximum.at(tie, k[sel], over[sel])
    return tie


def _async_calls(ss: Any, se: Any, s: Any, e: Any, launch: Any, htod: Any) -> Any:
    """Per sync: True where a host-to-device copy held it (`_held`), and where a sync began
    within LATENCY_NS[1] of such a call's end and was released within LATENCY_NS[1] of that
    copy's end (the stream sync a blocking copy adds: PyTorch's `.to()` without non_blocking).
    A non_blocking copy from pinned memory holds the host in neither."""
    free = np.zeros(ss.size, dtype=bool)
    c, k = _held(ss, se, s, e, launch, htod)
    free[k] = True
    nxt = k + 1
    ok = nxt < ss.size
    c, k, nxt = c[ok], k[ok], nxt[ok]
    trailing = (ss[nxt] - se[k] <= LATENCY_NS[1]) & (np.abs(se[nxt] - e[c]) <= LATENCY_NS[1])
    free[nxt[trailing]] = True
    return free


def _feeding(excl: Any, last: Any, read: Any, host_compute: Any) -> Any:
    """Per op: its exclusive ns where it is a read back (`read`: a device-to-host copy at under
    half the link's pinned rate, so into pageable memory the driver stages it to) in the run of
    such reads that ends the GPU's work before a gap host compute claims (`last`: per gap, the
    op ending the GPU's work before it), else 0. Host work on the GPU's results reads them back
    first (`.cpu()`, `.numpy()`, `.tolist()`: a fresh pageable tensor); done every N steps or
    off the step, it takes those reads with it. A copy into pinned memory at the link's rate is
    a transfer of its own (an offload, a prefetch), and one that other GPU work follows before
    the gap is not the host's."""
    out = np.zeros(excl.size, dtype=np.int64)
    at = np.asarray(last, dtype=np.int64)[host_compute > 0]
    for _ in range(MAX_FEEDING):  # the runs of reads back, newest first, all gaps at once
        at = at[at >= 0]
        at = at[read[at]]
        if at.size == 0:
            break
        out[at] = excl[at]
        at = at - 1
    return out


def _gap_at(s: Any, launch: Any, known: Any, gap_e: Any) -> Any:
    """When the host ended each gap: the launch of the work that ends it (its start where the
    launch is unknown): the host time removed in a gap moves what is launched from then on."""
    k = np.minimum(np.searchsorted(s, gap_e, side="left"), s.size - 1)
    return np.where(known[k], launch[k], gap_e).astype(np.int64)


# copies block the host too: a device-to-host copy into pageable memory (`.item()`,
# `.cpu()`) returns once it is done, whatever its name says
_COPY_RE = re.compile(r"(?i)^cu(da)?Memcpy")


def _waits(name: str) -> bool:
    return bool(host.SYNC_RE.match(name) or _COPY_RE.match(name))


def _syncs(tl: T.RankTimeline, main: tuple[int, int] | None) -> tuple[Any, Any]:
    """The main thread's CUDA calls that may wait for the GPU (syncs and copies), merged (any
    thread's without a main); `replay` re-anchors the host only at those that did."""
    h = tl.host
    if h.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    api = h.kind == T.CUDA_API
    m = api & tl.name_mask(_waits, h.name[api])[h.name]
    if main is not None:
        m &= (h.pid == main[0]) & (h.tid == main[1])
    order = np.argsort(h.start[m], kind="stable")
    s, e = merge_intervals(h.start[m][order], h.end[m][order])
    return np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64)


def _pageable_calls(
    tl: T.RankTimeline, main: tuple[int, int] | None, lo: int, hi: int
) -> tuple[Any, Any]:
    """(starts, ends) of the main thread's calls (any thread's without a main) that issued a
    copy from or to pageable memory in [lo, hi), read from the export (`pageable_copies`: an
    nsys export keeps no host row of a copy's call, only its start); none where it cannot
    say. A Kineto trace's copy calls are host rows already (`_syncs`)."""
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    got = pageable_copies.read(tl.source.path, lo, hi) if tl.source.path else None
    if got is None or got.call_start.size == 0:
        return none
    m = np.ones(got.call_start.size, dtype=bool)
    if main is not None:
        m = (got.pid == main[0]) & (got.tid == main[1])
    return got.call_start[m], got.call_end[m]


def _gpu_levers(
    tl: T.RankTimeline, rows: T.GpuTable, act: Any, excl: Any, names_cls: Any
) -> dict[str, Any]:
    """Each op's exclusive time that a GPU lever shortens: fp32 GEMMs (and, with them, the
    other compute kernels autocast shortens), host-device copies, communication."""
    kind, name = rows.kind[act], rows.name[act]
    kernel = kind == T.KERNEL
    fp32_name = np.fromiter(
        (gemm_precision(n) == "fp32" for n in tl.names), dtype=bool, count=len(tl.names)
    )
    comm_name = (
        names_cls == HTA_TYPES.index("COMMUNICATION")
        if len(names_cls)
        else np.zeros(len(tl.names), bool)
    )
    attn_name = np.fromiter(
        (attention_precision(n) == "fp32" for n in tl.names), dtype=bool, count=len(tl.names)
    )
    fp32 = kernel & fp32_name[name] if fp32_name.size else np.zeros(act.size, bool)
    attn = kernel & attn_name[name] if attn_name.size else np.zeros(act.size, bool)
    comm = kernel & comm_name[name] if comm_name.size else np.zeros(act.size, bool)
    copy = (kind == T.MEMCPY) & np.isin(rows.copy[act], (1, 2))
    zero = np.zeros(act.size, dtype=np.int64)
    autocast = fp32.any()  # the other kernels move only with the fp32 GEMMs' knob
    return {
        "fp32-gemms": np.where(fp32, excl, zero),
        "fp32-attention": np.where(attn, excl, zero) if autocast else zero,
        "fp32-others": np.where(kernel & ~fp32 & ~attn & ~comm, excl, zero) if autocast else zero,
        "copies": np.where(copy, excl, zero),
        "comm-overlap": np.where(comm, excl, zero),
    }


def _window(lo: int, hi: int, steps: list[tuple[str, int, int]]) -> Any:
    """The step boundaries that bound whole periods inside the span (each period one step's
    work and the wait before the next step): the starts after the span's start up to its end,
    and the end of the last step where it ends inside. Two or more, else the span's ends."""
    cuts = sorted({s for _, s, _ in steps if lo < s <= hi})
    if steps:
        _, s, d = max(steps, key=lambda x: x[1])
        if lo < s + d <= hi and (not cuts or s + d > cuts[-1]):
            cuts.append(s + d)
    if len(cuts) < 2:
        cuts = [lo, hi]
    return np.array(cuts, dtype=np.int64)


MAX_PERIODS = 64  # whole steps the replay runs over (from the middle of the span)
MAX_OPS = 250_000  # and GPU operations


def _bounded(starts: Any, window: Any) -> tuple[Any, slice | None]:
    """The window cut to what the replay needs (a cost per step is a mean over steps): at most
    MAX_PERIODS whole steps, and MAX_OPS operations (at least two steps), from the middle of
    the span; and the rows it needs (from the op before its start to the op after its end).
    Without steps, the middle MAX_OPS operations' stretch. None: every row."""
    n = int(starts.size)
    t = window
    if t.size > 2:
        if t.size - 1 > MAX_PERIODS:
            mid = (t.size - 1 - MAX_PERIODS) // 2
            t = t[mid : mid + MAX_PERIODS + 1]
        while t.size > 3:
            ops = int(np.searchsorted(starts, t[-1]) - np.searchsorted(starts, t[0]))
            if ops <= MAX_OPS:
                break
            keep = max((t.size - 1) // 2, 2)
            mid = (t.size - 1 - keep) // 2
            t = t[mid : mid + keep + 1]
    elif n > MAX_OPS:
        mid = (n - MAX_OPS) // 2
        t = np.array([starts[mid], starts[mid + MAX_OPS - 1]], dtype=np.int64)
    a = max(int(np.searchsorted(starts, t[0], side="right")) - 2, 0)
    b = min(int(np.searchsorted(starts, t[-1], side="right")) + 2, n)
    if a == 0 and b == n:
        return t, None
    return t, slice(a, b)


def replay(
    g: StepGraph,
    removed: Any,
    cut: Any,
    anchored: bool = True,
    wait_cut: Any = None,
    freed: Any = None,
) -> Any:
    """Each op's new end once `removed` host ns per gap (before the launches after it) and
    `cut` exclusive ns per op are gone: op k starts at the later of its host-side ready time
    (less the host time removed since the last sync) and the previous op's end plus its own
    GPU-side wait. At each main-thread sync the host is re-anchored: it leaves the sync at the
    later of its own (shifted) time and the new end of the work launched before the sync
    (the release's own latency kept). `anchored=False`: the syncs no longer wait. `wait_cut`:
    ns off each op's GPU-side wait. `freed`: per sync, True where the host leaves the call
    ASYNC_COPY_CALL_NS after entering it, whatever the GPU (a copy made non_blocking).

    Between two syncs the recurrence is a max-plus scan, computed for all ops at once (a
    cumulative maximum per chunk); only the chain from one sync to the next is a loop, over
    plain numbers."""
    d = g.excl - np.asarray(cut, dtype=np.int64)
    cum = np.r_[np.int64(0), np.cumsum(np.asarray(removed, dtype=np.int64)[g.gap_order])]
    at = g.gap_at[g.gap_order]

    def removed_before(t: Any) -> Any:  # host ns removed in gaps the host ended by t
        return cum[np.searchsorted(at, t, side="right")]

    n = g.start.size
    sync_s, sync_e = (g.sync_s, g.sync_e) if anchored else (g.sync_s[:0], g.sync_e[:0])
    n_chunks = sync_e.size + 1
    # the chunk of each op: the syncs released before its launch (kept in GPU order)
    chunk = np.searchsorted(sync_e, g.launch, side="right")
    chunk = np.maximum.accumulate(np.where(g.launch > _NEG, chunk, 0))
    bounds = np.searchsorted(chunk, np.arange(n_chunks + 1), side="left")
    # within a chunk, relative to its start: cb the GPU's own time (waits and work), v what the
    # host's readiness asks beyond it (before the chunk's shift)
    wait = g.gpu_wait if wait_cut is None else g.gpu_wait - np.asarray(wait_cut, dtype=np.int64)
    cb = np.cumsum(wait + d)
    cb -= np.r_[np.int64(0), cb][bounds[:-1]][chunk]
    real = g.ready > _NEG
    v = np.where(real, g.ready - removed_before(g.launch) + d - cb, 0)
    vmin = int(v[real].min()) if real.any() else 0
    span = int(v[real].max()) - vmin + 2 if real.any() else 2
    lifted = np.where(real, v - vmin + 1, 0)  # 0: no readiness binds (yet)
    if n_chunks * span < 2**62:  # one cumulative maximum, each chunk lifted above the last
        cm = np.maximum.accumulate(lifted + chunk * span) - chunk * span
    else:
        cm = np.empty(n, dtype=np.int64)
        for c in range(n_chunks):
            sl = slice(int(bounds[c]), int(bounds[c + 1]))
            if sl.stop > sl.start:
                cm[sl] = np.maximum.accumulate(lifted[sl])
    has = cm > 0
    cm_val = np.where(has, cm - 1 + vmin, 0)
    run_end = np.maximum.accumulate(g.start + g.excl)
    last = bounds[1:] - 1
    nonempty = (bounds[1:] > bounds[:-1]).tolist()
    li = np.maximum(last, 0)
    m_c = np.where(has[li], cm_val[li], _NEG).tolist()
    cb_c, orig_c = cb[li].tolist(), run_end[li].tolist()
    rem_at_sync = removed_before(sync_e).tolist()
    ss, se = sync_s.tolist(), sync_e.tolist()
    tie = (g.sync_tie if g.sync_tie is not None else np.zeros(sync_e.size, np.int64)).tolist()
    free = (freed if freed is not None and anchored else np.zeros(sync_e.size, bool)).tolist()
    pe_in, shift_in, base_in = [0] * n_chunks, [0] * n_chunks, [0] * n_chunks
    prev_end = orig_end = int(g.start[0])
    shift = rem_base = 0
    for c in range(n_chunks):
        pe_in[c], shift_in[c], base_in[c] = prev_end, shift, rem_base
        if nonempty[c]:
            m = m_c[c]
            prev_end = cb_c[c] + (max(prev_end, m - shift + rem_base) if m > _NEG else prev_end)
            orig_end = orig_c[c]
        if c == n_chunks - 1:
            break
        # leaving sync c: a call that waited leaves once the work ends (the host got there at
        # its start); one that did not, in its own time
        sigma, rho, rem_c = ss[c], se[c], rem_at_sync[c]
        gained = shift + (rem_c - rem_base)
        if free[c]:
            new_rho = sigma - gained + min(rho - sigma, ASYNC_COPY_CALL_NS)
        elif sigma < orig_end <= rho + (tie[c] if anchored else 0):
            new_rho = max(sigma - gained, prev_end + (rho - orig_end))
        else:
            new_rho = rho - gained
        shift, rem_base = rho - new_rho, rem_c
    pe = np.asarray(pe_in, dtype=np.int64)[chunk]
    adj = (np.asarray(base_in, dtype=np.int64) - np.asarray(shift_in, dtype=np.int64))[chunk]
    return cb + np.where(has, np.maximum(pe, cm_val + adj), pe)


def moved(g: StepGraph, ends: Any, cut: Any, t: Any) -> Any:
    """Times `t` of the original timeline on the replayed one (`ends` of each op, `cut` off
    each): inside an op's exclusive time, the same offset from its new start (up to its new
    end); inside a gap, the same distance before the next op's new start (not before the
    previous op's new end)."""
    n = g.start.size
    new_start = ends - (g.excl - cut)
    k = np.maximum(np.searchsorted(g.start, t, side="right") - 1, 0)
    orig_end = g.start[k] + g.excl[k]
    inside = new_start[k] + np.minimum(t - g.start[k], ends[k] - new_start[k])
    nxt = np.minimum(k + 1, n - 1)
    in_gap = np.where(
        k + 1 < n, np.maximum(ends[k], new_start[nxt] - (g.start[nxt] - t)), ends[k] + t - orig_end
    )
    return np.where(t <= orig_end, inside, in_gap)


def _removal(g: StepGraph, lever: str, f: float) -> Any:
    """Host ns per gap that `lever` removes at effect `f`."""
    if lever == "launch-bound":  # the step as one CUDA graph: its host gaps, `f` ns left
        inner = sum(g.removable[c] for c in GRAPH_CLASSES)
        if g.graph_keeps is not None:  # a long wait nothing explains stays (GRAPH_HOST_NS)
            inner = inner - np.minimum(g.graph_keeps, g.removable["unclassified"])
        left = (f * (inner > 0)).astype(np.int64)
        return np.maximum(inner - left, 0)
    return (g.removable[lever] * f).astype(np.int64)


def project(
    g: StepGraph,
    base_ms: float | None,
    basis: str,
    per_step: dict[str, float] | None = None,
    span_ms: float | None = None,
) -> StepProjections:
    """Each lever replayed at its knob's typical effect and the ends of its range.
    `per_step`: each idle class's cost per step (`idle_causes.per_step`): a lever of one class
    gives back its replay's share of that (the window's whole periods need not hold a periodic
    cause in its proportion). `span_ms`: the capture, what a run without steps projects."""
    t = g.window
    w0 = int(t[-1] - t[0])
    base = base_ms if base_ms is not None else (span_ms or w0 / 1e6)
    # whole periods between the boundaries; without them the stretch stands for the step (or
    # the capture) in proportion
    whole = t.size - 1 if t.size > 2 else 0
    periods = whole or max(w0 / 1e6 / base, 1e-9)
    inside = (g.gap_at >= t[0]) & (g.gap_at <= t[-1])
    ops = (g.start >= t[0]) & (g.start < t[-1])
    gpu_own = g.excl + g.gpu_wait  # the GPU's own time: its work and its waits on its side

    def gpu_ms(cut: Any, wait_cut: Any) -> float:
        left = gpu_own - cut - (0 if wait_cut is None else wait_cut)
        return round(float(left[ops].sum()) / periods / 1e6, 4)

    out: list[LeverProjection] = []
    zero_gap = np.zeros(g.gap_at.size, dtype=np.int64)
    zero_op = np.zeros(g.start.size, dtype=np.int64)
    for lever, effect in EFFECTS.items():
        runs: list[tuple[Any, Any, bool, Any, Any]] = []
        scale = 1.0
        if lever in IDLE_LEVERS:
            first = _removal(g, lever, effect[0])
            if not first.any():
                continue
            claimed = float(first[inside].sum()) / periods / 1e6
            want = (per_step or {}).get(lever)
            # a periodic cause the window's periods over-represent gives back its own share;
            # never more than the replay (a window of partial steps under-represents nothing)
            if lever != "launch-bound" and want is not None and claimed > 0 and base_ms:
                scale = min(want / claimed, 1.0)
            for f in effect:
                waits = None
                if lever == "launch-bound" and g.queued_wait is not None:
                    waits = np.maximum(g.queued_wait - int(f), 0)
                cut = zero_op
                if lever == "host-compute" and g.feeding is not None:  # its reads back go too
                    cut = (g.feeding * f).astype(np.int64)
                runs.append((_removal(g, lever, f), cut, lever != "sync" or f < 1, waits, None))
        else:
            busy = g.gpu_time[lever]
            if not busy.any():
                continue
            for i, f in enumerate(effect):
                share = f if lever == "comm-overlap" else 1.0 - 1.0 / f
                if lever == "copies" and g.copy_left is not None:
                    share = 1.0 - g.copy_left[i]
                cut = busy * share
                if lever == "fp32-gemms":
                    for cls, xs in AUTOCAST_X.items():
                        cut = cut + g.gpu_time[cls] * (1.0 - 1.0 / xs[i])
                staging = zero_gap
                if lever == "copies":  # the host's work after a pageable copy goes with it
                    own = g.removable["host-compute"] + g.removable["unclassified"]
                    staging = np.minimum(own, g.after_copy) + g.removable["copy-staging"]
                    staging = staging.astype(np.int64)
                # the knob's copies are non_blocking (typical, best); at worst they block
                freed = g.async_copy if lever == "copies" and i < 2 else None
                runs.append((staging, cut.astype(np.int64), True, None, freed))
        ms, floors = [], []
        for rg, cs, anchored, waits, freed in runs:
            t2 = moved(g, replay(g, rg, cs, anchored, waits, freed), cs, t)
            # never under the GPU's own time the knob leaves: where the window's steps run
            # longer than the mean step, the mean less what the replay takes off them would
            # (a launch-bound step of transformer_graphs: 25.4 -> 2.0 ms, its kernels 2.65)
            floors.append(gpu_ms(cs, waits))
            ms.append(max(base - scale * (w0 - int(t2[-1] - t2[0])) / periods / 1e6, floors[-1]))
        out.append(
            LeverProjection(
                lever=lever,
                step_ms=round(ms[0], 4),
                low_ms=round(min(ms), 4),
                high_ms=round(max(ms), 4),
                removed_ms=round(base - ms[0], 4),
                assumption=ASSUMPTIONS[lever].format(link=g.link or "as measured"),
                gpu_ms=floors[0],  # the typical's
            )
        )
    return StepProjections(
        base_ms=round(base, 4), basis=basis, whole_steps=whole, levers=out,
        gpu_ms=gpu_ms(zero_op, None),
    )  # fmt: skip
