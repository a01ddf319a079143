"""One rank's metrics from its timeline: the families (`gpu_time`, `breakdown`, `communication`,
`kernels`, `memory`, `host`) put together into `RankMetrics`, one per entry (a device of the
rank for nsys exports, the whole trace for Kineto), plus what the cross-rank view needs. The
metric catalogue's computed figures (`catalogue.Metric.compute`) go into `RankMetrics.figures`.

The process-wide host metrics (ranges, steps, threads, sync calls, CPU page faults) sit on the
rank's first entry; the others carry the GPU side only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.catalogue.model import Entry
from orchestrator.analysis.families import (
    breakdown,
    communication,
    critical_path,
    gaps,
    gpu_metrics,
    gpu_time,
    host,
    idle_causes,
    kernels,
    memory,
    memory_use,
    operators,
    profiler_overhead,
    step_pattern,
    step_view,
)
from orchestrator.analysis.families.kernel_classes import hta_type_codes
from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.metrics import IdleCauses, RankMetrics, StepStats, SyncStats
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline import step_rules


@dataclass
class CrossRankInput:
    """What the cross-rank view needs of one entry beyond its RankMetrics."""

    rank: int
    devices: list[int]
    collectives: communication.Collectives
    steps: list[tuple[str, int, int]] = field(default_factory=list)
    # NCCL operations with a shared id (`nsys_nccl.NcclOps`), on a rank's first entry; None:
    # the source has none
    nccl_ops: Any = None


def compute(
    tl: T.RankTimeline, known_steps: tuple[int, str] | None = None
) -> tuple[list[RankMetrics], list[CrossRankInput]]:
    """Every metric of one rank's timeline (the GPU table is sorted in place). `known_steps`:
    the steps a cudaProfilerApi window holds, as the run says (`step_rules.known_step_count`)."""
    split = tl.split_devices
    tl.gpu = gpu_time.sort_gpu(tl.gpu, by_device=split)
    names_cls = hta_type_codes(tl.names)
    out: list[RankMetrics] = []
    cross: list[CrossRankInput] = []
    found = step_rules.find(tl, known_steps)
    step_rows = found.rows
    for i, (devices, sl) in enumerate(gpu_time.entries(tl.gpu, split)):
        rows = tl.gpu.take(sl)
        first = i == 0
        r, c = _entry(
            tl, rows, devices, names_cls, first, step_rows if first else [],
            found.rule in REALIGNED,
        )  # fmt: skip
        if first:
            step_rows = c.steps  # realigned to where the workload's steps end
        if first and r.steps is not None:
            r.steps.rule, r.steps.evidence = found.rule, found.evidence
        elif first:
            r.no_steps = found.evidence
        main = host.main_thread(tl)
        r.step_view = step_view.extract(
            tl, rows, step_rows, (r.span_start_ns, r.span_end_ns), main[0] if main else None,
            found.rule,
        )  # fmt: skip
        view = (r.step_view.start_ns, r.step_view.end_ns) if r.step_view else None
        span = (r.span_start_ns, r.span_end_ns)
        r.gpu_metrics = gpu_metrics.own(tl.gpu_samples, devices, span, step_rows, view)
        out.append(r)
        cross.append(c)
    return out, cross


# the rules whose boundaries are a kernel's end, not the workload's word: realigned
REALIGNED = ("optimizer", "period")


def _entry(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    devices: list[int],
    names_cls: object,
    first: bool,
    step_rows: list[tuple[str, int, int]],
    realign: bool = False,
) -> tuple[RankMetrics, CrossRankInput]:
    g = gpu_time.gpu_time(rows)
    # the figures of the gaps first: the merged intervals they are views of (millions on a long
    # export) are let go once HTA's temporal breakdown has read them too
    idle_gaps = gaps.gap_stats(g.union.gap_starts, g.union.gap_ends)
    gap_s = np.frombuffer(g.union.gap_starts, dtype=np.int64)
    gap_e = np.frombuffer(g.union.gap_ends, dtype=np.int64)
    sync_idle = idle_causes.sync_while_idle(tl, gap_s, gap_e) if first else 0
    main = host.main_thread(tl) if first else None
    causes, judged = (
        idle_causes.judge(
            tl, rows, gap_s, gap_e, g.union.span - g.union.busy, [s for _, s, _ in step_rows],
            main[0] if main else None,
        )
        if first
        else (None, idle_causes.Judged())
    )  # fmt: skip
    moved = 0
    if causes is not None and realign:
        input_ns = np.array([c.get("input", 0) for c in judged.claims], dtype=np.int64)
        step_rows, moved = step_rules.realign(step_rows, judged.a, judged.h, input_ns)
    if causes is not None and step_rows:
        span_lo = int(rows.start[0]) if rows.size else 0
        idle_causes.per_step(
            causes, judged, host.family_rows(step_rows),
            (span_lo, int(rows.end.max())) if rows.size else (0, 0), rows,
        )  # fmt: skip
    graph = (
        critical_path.build(
            tl, rows, gap_s, gap_e, judged, names_cls, main[0] if main else None,
            host.family_rows(step_rows),
        )
        if causes is not None
        else None
    )  # fmt: skip
    del gap_s, gap_e  # views of the gaps: let go with them below
    busy_timeline = gaps.busy_timeline(
        g.union.gap_starts, g.union.gap_ends, g.union.start, g.union.end
    )
    no_gaps = np.zeros(0, dtype=np.int64)
    u = replace(g.union, gap_starts=no_gaps, gap_ends=no_gaps)
    activity = g.activity
    view = breakdown.hta_view(tl, rows, names_cls)
    if view.same_rows and g.every_row:
        view.seed(g.groups)
    del g
    temporal = breakdown.temporal(view)
    types_ns = breakdown.kernel_types(view)
    overlap = communication.comm_comp_overlap_pct(view)
    view.forget()  # the idle-time breakdown reads the events, not their merged intervals
    idle = breakdown.idle_breakdown(view)
    del view
    if causes is not None and idle is not None:
        idle_causes.explain_short_gaps(causes, idle)
    ks = kernels.kernel_summary(rows, tl.names, activity.kernel_ns)
    cp = memory.copies(rows)
    um = memory.unified_memory(tl, devices, cp, activity, first)
    peak, peak_src = memory.peak_memory(tl, devices)
    managed = memory.peak_apart(tl.peak_managed_memory, devices)
    overhead = profiler_overhead.recorded(tl, u.start, u.end) if first else None
    notes: list[str] = []
    if managed is not None and managed > (peak or 0):
        notes.append(
            f"managed (Unified) memory peaked at {managed / 2**30:.2f} GiB, more than the"
            " device memory: it is reported apart (peak_managed_memory_bytes), since the export"
            " does not say which of its pages sat on the GPU"
        )
    said = profiler_overhead.note(overhead)
    if said is not None:
        notes.append(said)
    if temporal.clamped_events:
        notes.append(
            f"{temporal.clamped_events} GPU events shorter than 1 µs came out of HTA's rounding"
            " (start up, end down) with their end before their start; counted as empty"
        )
    if idle is not None and idle.clamped_gaps:
        notes.append(
            f"{idle.clamped_gaps} gaps between events of one stream were negative (overlapping"
            " events); counted as zero idle time"
        )
    main_wait = host.main_thread_wait(tl, main[0], u.start, u.end) if main else None
    offloading, evidence = host.offload_pattern(tl, rows)
    span = u.span
    idle_ns = span - u.busy
    rm = RankMetrics(
        rank=tl.rank,
        devices=devices,
        device_name=_device_name(tl, devices),
        source=tl.source.path,
        pid=tl.pid,
        span_start_ns=u.start,
        span_end_ns=u.end,
        span_ns=span,
        busy_ns=u.busy,
        idle_ns=idle_ns,
        busy_pct=pct(u.busy, span),
        idle_pct=pct(idle_ns, span),
        idle_gaps=idle_gaps,
        temporal=temporal,
        kernel_types=breakdown.kernel_type_pcts(types_ns),
        kernel_types_ns=types_ns,
        comm_comp_overlap_pct=overlap,
        idle_breakdown=idle,
        activity=activity,
        copies=cp,
        unified_memory=um,
        top_kernels=ks.top,
        kernel_names=ks.names,
        fp32_gemm_pct=ks.fp32_gemm_pct,
        tensor_core_gemm_pct=ks.tensor_core_gemm_pct,
        nvtx=host.ranges(tl, rows) if first else [],
        operators=operators.operators(tl) if first else [],
        steps=_steps(step_rows, judged, causes, moved) if first else None,
        data_wait_ns=host.data_wait(tl, u.start, u.end) if first else 0,
        main_thread=(tl.threads.get(main[0]) or f"thread {main[0][1]}") if main else None,
        main_thread_rule=main[1] if main else None,
        main_thread_wait_ns=main_wait,
        offloading=offloading,
        offloading_evidence=evidence,
        threads=host.threads(tl, main[0] if main else None) if first else [],
        sync=host.sync(tl, u.start, u.end, sync_idle) if first else SyncStats(),
        idle_causes=causes,
        profiler_overhead=overhead,
        peak_gpu_memory_bytes=peak,
        peak_gpu_memory_source=peak_src,
        peak_pinned_memory_bytes=memory.peak_apart(tl.peak_pinned_memory, devices),
        peak_managed_memory_bytes=managed,
        timeline=busy_timeline,
        notes=notes,
        memory=_memory(tl, devices, first, step_rows),
    )
    if graph is not None:
        st = rm.steps
        base = st.mean_ns / 1e6 if st is not None and st.count >= 2 else None
        per = {c.cause: c.ms_per_step for c in causes.causes} if causes is not None else {}
        rm.projections = critical_path.project(
            graph, base, "per step" if base is not None else "in the capture", per, u.span / 1e6
        )
        del graph
    entry = Entry(timeline=tl, rows=rows, devices=devices, first=first, span=(u.start, u.end))
    rm.figures = {m.key: m.compute(entry) for m in views.computed() if m.compute is not None}
    c = CrossRankInput(
        rank=tl.rank,
        devices=devices,
        collectives=communication.collectives(rows, tl.names, names_cls),
        steps=step_rows,
        nccl_ops=tl.nccl_ops if first else None,
    )
    return rm, c


def _steps(
    rows: list[tuple[str, int, int]],
    judged: idle_causes.Judged,
    causes: IdleCauses | None,
    moved: int,
) -> StepStats | None:
    """The steps' statistics, with the boundaries realigned and the slow steps' pattern."""
    st = host.steps(rows)
    if st is None:
        return None
    st.realigned = moved
    evidence = {c.cause: c.evidence for c in causes.causes} if causes is not None else {}
    st.pattern = p = step_pattern.find(
        host.family_rows(rows), judged.a, judged.h, judged.claims, evidence
    )
    if causes is not None and p is not None and p.every and p.cause:
        idle_causes.periodic(causes, p.cause, p.cause_ms, p.every)
    return st


def _memory(
    tl: T.RankTimeline, devices: list[int], first: bool, steps: list[tuple[str, int, int]]
) -> MemoryUse | None:
    """The entry's memory history (`memory_use`): the device's own (nsys: one per device),
    else on the rank's first entry the one with most events (Kineto numbers devices its
    own way). A history without marks of its own takes the trace's steps (`step_rules`)."""
    if not tl.memory:
        return None
    own = [m for m in tl.memory if m.device in devices] if tl.split_devices else []
    if not own and not first:
        return None
    pick = max(own or tl.memory, key=lambda m: m.events.size_n)
    if not pick.marks and steps:
        from dataclasses import replace as copy_with

        from orchestrator.analysis.timeline import memory as M

        marks = sorted(
            [(s, M.STEP_START) for _, s, _ in steps] + [(e, M.STEP_END) for _, _, e in steps]
        )
        pick = copy_with(pick, marks=marks, marks_source="the trace's step ranges")
    return memory_use.analyze(pick)


def _device_name(tl: T.RankTimeline, devices: list[int]) -> str | None:
    for d in devices:
        if d in tl.device_names:
            return tl.device_names[d]
    if tl.device_names and not tl.split_devices:
        return next(iter(tl.device_names.values()))
    return None
