"""Holistic Trace Analysis's breakdowns of one entry's GPU time (HTA 0.5.0,
`hta/analyzers/breakdown_analysis.py`): the temporal breakdown, the kernel-type breakdown and the
idle-time breakdown, all over HTA's view of the events (`HtaView`).

HTA's view of a Kineto trace: every complete event with an integer `args.stream`; with two or
more `ProfilerStep` names, only those launched (matching correlation) before the last
`ProfilerStep` starts (HTA's default `include_last_profiler_step=False`); times in microseconds,
fractional ones rounded start up, end down. Of an nsys export (which HTA does not read): every
kernel, memcpy and memset of the device, in nanoseconds. Where HTA's rounding turns a
sub-microsecond event inside out (end before start), the event is counted as empty and counted
in `Temporal.clamped_events`: HTA itself would give shares below 0 % and above 100 % there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.families.kernel_classes import (
    COMMUNICATION,
    COMPUTATION,
    HTA_TYPES,
    MEMORY,
)
from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import IdleBreakdown, StreamIdle, Temporal
from orchestrator.analysis.timeline import intervals
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.columns import small_groups

# HTA's default `consecutive_kernel_delay` is 30 in the trace's unit: microseconds in Kineto
KERNEL_WAIT_NS = 30_000
ALL = -1  # `HtaView.groups` of every event
# rows per step of the idle-time breakdown (its temporaries: ~50 bytes a row)
IDLE_CHUNK_ROWS = 1 << 20
# HTA's kernel types in the order of its kernel-type breakdown (bit values 1, 2, 4)
_BREAKDOWN_TYPES = (COMPUTATION, COMMUNICATION, MEMORY)


@dataclass
class HtaView:
    """HTA's events of one entry, sorted by start, in HTA's time unit (`unit_ns`)."""

    start: Any  # int64 ticks
    end: Any
    cls: Any  # int8 HTA kernel type code
    stream: Any
    launch: Any  # int64 ticks, -1 unknown
    kernel_cat: Any  # bool: a kernel, memcpy or memset (not an annotation)
    unit_ns: int
    basis: str
    clamped: int = 0
    # the events are the entry's GPU rows themselves, at their own resolution
    same_rows: bool = False
    _groups: dict[int, tuple[Any, Any]] = field(default_factory=dict)

    def groups(self, code: int = ALL) -> tuple[Any, Any]:
        """Merged intervals (HTA's merge_kernel_intervals) of all events or of one kernel type;
        computed once, shared by the temporal, kernel-type and overlap breakdowns."""
        g = self._groups.get(code)
        if g is None:
            if code == ALL:
                g = intervals.groups_sorted(self.start, self.end)
            else:
                g = intervals.groups_sorted(self.start, self.end, self.cls == code)
            self._groups[code] = g
        return g

    def forget(self, code: int | None = None) -> None:
        """Let go of the merged intervals of one kernel type (ALL: of every event), or of all
        those computed, once no breakdown left to compute reads them (memory)."""
        if code is None:
            self._groups.clear()
        else:
            self._groups.pop(code, None)

    def seed(self, groups: tuple[Any, Any]) -> None:
        """The merged intervals of all events, where the caller already has them."""
        self._groups[ALL] = groups

    def intersection(self, *codes: int) -> tuple[Any, Any]:
        """Where events of all the given kernel types run at once (merged intervals)."""
        key = sum(1 << (4 + c) for c in codes)
        g = self._groups.get(key)
        if g is None:
            g = self.groups(codes[0])
            for c in codes[1:]:
                g = intervals.intersect(*g, *self.groups(c))
            self._groups[key] = g
        return g


def _up(ns: Any, unit: int) -> Any:
    return -((-ns) // unit)


def hta_view(tl: T.RankTimeline, rows: T.GpuTable, names_cls: Any) -> HtaView:
    """HTA's events of the entry whose GPU rows (sorted by start) are `rows`."""
    clock = tl.hta
    unit = clock.unit_ns
    keep = rows.stream != T.NONE
    basis = (
        "GPU events (any stream) of the whole trace, HTA rules"
        if clock.step_filter
        else "all kernels, memcpys and memsets of the device (nsys)"
    )
    if not clock.step_filter:
        keep &= T.is_activity(rows.kind)
    if clock.step_filter:
        last = _last_profiler_step(tl, unit, clock.rounds)
        if last is not None:
            launch_t = _up(rows.launch, unit) if clock.rounds else rows.launch // unit
            start_t = _up(rows.start, unit) if clock.rounds else rows.start // unit
            known = rows.corr != T.NONE
            keep &= np.where(known, (rows.launch != T.NONE) & (launch_t < last), start_t < last)
            basis = "GPU events launched before the last ProfilerStep (HTA rules)"
    if bool(keep.all()):
        sel = rows
    else:  # only the columns HTA's view needs
        sel = T.GpuTable(
            start=rows.start[keep], end=rows.end[keep], device=rows.device[:0],
            stream=rows.stream[keep], kind=rows.kind[keep], name=rows.name[keep],
            corr=rows.corr[:0], launch=rows.launch[keep], nbytes=rows.nbytes[:0],
            copy=rows.copy[:0],
        )  # fmt: skip
    if clock.rounds:
        s, e = _up(sel.start, unit), sel.end // unit
        launch = np.where(sel.launch != T.NONE, _up(sel.launch, unit), T.NONE)
    elif unit == 1:
        s, e, launch = sel.start, sel.end, sel.launch
    else:
        s, e = sel.start // unit, sel.end // unit
        launch = np.where(sel.launch != T.NONE, sel.launch // unit, T.NONE)
    inside_out = e < s
    clamped = int(inside_out.sum())
    if clamped:
        e = np.where(inside_out, s, e)
    # rows come sorted by start, and rounding up keeps that order
    same = sel is rows and not clock.rounds and unit == 1
    return HtaView(
        start=s,
        end=e,
        cls=names_cls[sel.name] if sel.size else np.zeros(0, dtype=np.int8),
        stream=sel.stream,
        launch=launch,
        kernel_cat=T.is_activity(sel.kind),
        unit_ns=unit,
        basis=basis,
        clamped=clamped,
        same_rows=same,
    )


def _last_profiler_step(tl: T.RankTimeline, unit: int, rounds: bool) -> int | None:
    """Start (HTA ticks) of the last `ProfilerStep` event on HTA's CPU side (every event that is
    not a GPU kernel: host rows and GPU rows without stream or correlation), when the trace names
    two or more ProfilerSteps; else None (HTA keeps everything)."""
    is_step = tl.name_mask(lambda n: "ProfilerStep" in n)
    g = tl.gpu
    g_cpu = (g.stream == T.NONE) | (g.corr == T.NONE)
    h_names = tl.host.name[is_step[tl.host.name]] if tl.host.size else np.zeros(0, np.int32)
    g_names = g.name[g_cpu & is_step[g.name]] if g.size else np.zeros(0, np.int32)
    if np.unique(np.concatenate([h_names, g_names])).size < 2:
        return None
    starts = np.concatenate(
        [tl.host.start[is_step[tl.host.name]], g.start[g_cpu & is_step[g.name]]]
    )
    ticks = _up(starts, unit) if rounds else starts // unit
    return int(ticks.max())


def temporal(v: HtaView) -> Temporal:
    """HTA `get_temporal_breakdown` of one rank: span = last end - first start of the merged
    events, idle = span - their union, compute = union of computation events, non-compute =
    the rest of the span. The merged intervals of all events are read here only: they are let
    go before those of the computation events are merged (memory)."""
    if v.start.size == 0:
        return Temporal(basis=v.basis, clamped_events=v.clamped)
    g0, g1 = v.groups()
    span = int(g1[-1] - g0[0])
    idle = span - int((g1 - g0).sum())
    del g0, g1
    v.forget(ALL)
    c0, c1 = v.groups(COMPUTATION)
    compute = int((c1 - c0).sum())
    non_compute = span - compute - idle
    u = v.unit_ns
    return Temporal(
        span_ns=span * u,
        idle_ns=idle * u,
        compute_ns=compute * u,
        non_compute_ns=non_compute * u,
        idle_pct=_share(idle, span),
        compute_pct=_share(compute, span),
        non_compute_pct=_share(non_compute, span),
        basis=v.basis,
        clamped_events=v.clamped,
    )


def _share(part: float, whole: float) -> float:
    """part / whole in percent, kept inside 0-100."""
    return min(100.0, max(0.0, pct(part, whole)))


def kernel_types(v: HtaView) -> dict[str, int]:
    """HTA `get_gpu_kernel_breakdown`'s kernel-type times (memory kernels included, its
    default), in ns, largest first: time when exactly a given set of types ran (each type as
    the union of its events), under HTA's name for the set (`COMPUTATION overlapping
    COMMUNICATION`). Inclusion-exclusion over the unions and their intersections."""

    def length(g: tuple[Any, Any]) -> int:
        return int((g[1] - g[0]).sum())

    types = _BREAKDOWN_TYPES
    only: dict[int, int] = {}
    # |exactly S| = sum over supersets T of S of (-1)^(|T|-|S|) |intersection of T|
    inter = {
        mask: length(v.intersection(*[types[b] for b in range(3) if mask & (1 << b)]))
        for mask in range(1, 8)
    }
    for mask in range(1, 8):
        total = 0
        for sup in range(1, 8):
            if sup & mask == mask:
                extra = bin(sup).count("1") - bin(mask).count("1")
                total += inter[sup] * (-1 if extra % 2 else 1)
        only[mask] = total
    out = {_type_name(m): t * v.unit_ns for m, t in only.items() if t > 0}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _type_name(state: int) -> str:
    return " overlapping ".join(
        HTA_TYPES[code] for bit, code in enumerate(_BREAKDOWN_TYPES) if state & (1 << bit)
    )


def kernel_type_pcts(times: dict[str, int]) -> dict[str, float]:
    """Percent of the summed kernel-type time, per type (HTA's `percentage`)."""
    whole = sum(times.values())
    return {k: 100.0 * ns / whole for k, ns in times.items()} if whole else {}


def idle_breakdown(v: HtaView, threshold_ns: int = KERNEL_WAIT_NS) -> IdleBreakdown | None:
    """HTA `get_idle_time_breakdown` of one rank, all streams (see `IdleBreakdown`)."""
    m = v.kernel_cat
    if not bool(m.any()):
        return None
    rows = None if bool(m.all()) else np.flatnonzero(m)
    stream = v.stream if rows is None else v.stream[rows]
    codes, inv = small_groups(stream)
    n = int(stream.size)
    del stream
    threshold = threshold_ns // v.unit_ns
    per_stream = []
    clamped = 0
    u = v.unit_ns
    for j, code in enumerate(codes.tolist()):
        # in chunks of rows (a stream's last end carried over): bounded temporaries
        carry: int | None = None
        h = k = whole = 0
        for lo in range(0, n, IDLE_CHUNK_ROWS):
            hi = min(n, lo + IDLE_CHUNK_ROWS)
            idx: Any = lo + np.flatnonzero(inv[lo:hi] == j) if codes.size > 1 else slice(lo, hi)
            if rows is not None:
                idx = rows[idx]
            s = v.start[idx]
            e = v.end[idx]
            nxt = v.launch[idx]
            if s.size == 0:
                continue
            if carry is None:
                prev, s, nxt = e[:-1], s[1:], nxt[1:]
            else:
                prev = np.concatenate([np.array([carry], dtype=e.dtype), e[:-1]])
            carry = int(e[-1])
            gap = s - prev
            # host wait: launched after the previous one ended; kernel wait: a short gap
            host = (nxt != T.NONE) & (nxt > prev)
            kernel = ~host & (gap < threshold)
            neg = gap < 0
            clamped += int(neg.sum())
            gap[neg] = 0
            h += int(gap[host].sum())
            k += int(gap[kernel].sum())
            whole += int(gap.sum())
        o = whole - h - k
        per_stream.append(
            StreamIdle(stream=int(code), host_wait_ns=h * u, kernel_wait_ns=k * u, other_ns=o * u)
        )
    tot = [
        sum(x.host_wait_ns for x in per_stream),
        sum(x.kernel_wait_ns for x in per_stream),
        sum(x.other_ns for x in per_stream),
    ]
    whole = sum(tot)
    return IdleBreakdown(
        host_wait_ns=tot[0],
        kernel_wait_ns=tot[1],
        other_ns=tot[2],
        host_wait_pct=pct(tot[0], whole),
        kernel_wait_pct=pct(tot[1], whole),
        other_pct=pct(tot[2], whole),
        kernel_wait_threshold_ns=threshold_ns,
        clamped_gaps=clamped,
        streams=per_stream,
    )
