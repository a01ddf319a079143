"""The verdict a report opens with: one idle figure with the window it covers, HTA's split
explained once, and the three findings that matter, each with its number and the knob.

Findings come from the advice first (one per rule, its costliest rank, ranked by what each costs
a step: `Advice.cost_ms`, the order every view keeps; advice without a cost after, by `_score`),
then, while fewer than three, from observations every run has (how idle the GPU is and why when
no idle cause is advice of its own, slow steps and their cause, the kernel that takes most time,
the step time). A trace without GPU activity says so instead of showing zeros.
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.metrics import Metrics, RankMetrics, merged_top_kernels
from orchestrator.analysis.presentation import gpu_metric_findings
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.timeline.kernel_names import short_kernel
from orchestrator.core.base import Strict
from orchestrator.core.human import dur, size

FINDINGS = 3
BUSY_PCT = 95.0  # idle below 100 - this: the GPU is the bottleneck, not what feeds it
NO_GPU = "no GPU timeline in this trace"
MEMORY_ONLY = "memory snapshots alone: what held the GPU memory, no GPU timeline"

TITLES = {
    "data-loader": "The GPU waits for input data",
    "offload-traffic": "Activation-offloading copies take GPU time",
    "host-device-copies": "Host-device copies take GPU time",
    "fp32-kernels": "GEMMs run in fp32, without tensor cores",
    "unified-memory": "Unified-Memory pages migrate on demand",
    "sync-overhead": "The host blocks on CUDA synchronisation",
    "low-overlap": "Communication does not overlap computation",
    "straggler": "One rank holds the others back",
    "host-compute": "The host computes while the GPU waits",
    "launch-bound": "Launch-bound: the GPU waits between short kernels",
    "idle-unclassified": "The GPU waits; no cause outweighs the others",
    **gpu_metric_findings.TITLES,
}


class Finding(Strict):
    """One thing that matters: what, its number, the knob (`rule`: the advice behind it)."""

    title: str
    number: str
    knob: str
    rule: str | None = None
    # the run's setting the knob was chosen by (`Advice.checked`)
    checked: str | None = None
    # what the knob would leave of the step (`Advice.projection`), one line
    projection: str | None = None


class Verdict(Strict):
    """The top of a report."""

    gpu: bool
    idle: str
    hta: str | None = None
    # what the SMs did beside the time-based busy figure (nsys GPU metrics; None: not sampled)
    sm: str | None = None
    findings: list[Finding] = []
    # what held the GPU memory and what to change (presentation/memory_findings.py), ordered by
    # what each would give back; kept apart from the findings above, which rank GPU time
    memory: list[Finding] = []


def has_kernels(m: Metrics) -> bool:
    """Whether any entry traced a kernel: without one, the span (first to last copy or memset)
    is no window to judge GPU time by, and no GPU-side advice is given."""
    return any(r.activity.kernel_count for r in m.ranks)


def holdings(m: Metrics) -> str:
    """What a trace without kernels holds and what it lacks, in one sentence: its copies and
    memsets (over how long), NVTX ranges and steps, OS-runtime calls, CPU operators, and the
    tables or event kinds its reader found absent."""
    copies = sum(r.activity.memcpy_count for r in m.ranks)
    memsets = sum(r.activity.memset_count for r in m.ranks)
    parts = []
    if copies or memsets:
        moved = sum(c.bytes for r in m.ranks for c in r.copies)
        span = max(r.span_ns for r in m.ranks)
        parts.append(f"{copies:,} copies ({size(moved)}) and {memsets:,} memsets over {dur(span)}")
    ranges = sum(x.count for r in m.ranks for x in r.nvtx)
    if ranges:
        steps = max((r.steps.count for r in m.ranks if r.steps), default=0)
        parts.append(
            f"{ranges:,} NVTX ranges ({steps} steps)" if steps else f"{ranges:,} NVTX ranges"
        )
    osrt = sum(t.osrt_calls for r in m.ranks for t in r.threads)
    if osrt:
        parts.append(f"{osrt:,} OS-runtime calls")
    if any(t.cpu_op_ns for r in m.ranks for t in r.threads):
        parts.append("CPU operators")
    syncs = sum(r.sync.calls for r in m.ranks)
    if syncs:
        parts.append(f"{syncs:,} CUDA sync calls")
    held = ", ".join(parts) if parts else "no events the analysis reads"
    missing = sorted({t for s in m.sources for t in s.missing})
    lacks = f"; not in it: {', '.join(missing)}" if missing else ""
    return f"it holds {held}, but no kernels{lacks}"


def has_gpu(m: Metrics) -> bool:
    """Whether any entry traced GPU activity (kernels, copies, memsets)."""
    return any(
        r.activity.kernel_count + r.activity.memcpy_count + r.activity.memset_count for r in m.ranks
    )


def _score(a: Advice) -> float:
    """How much of the run a piece of advice concerns, in percent (0-100)."""
    e = a.evidence
    if a.rule == "straggler":
        return 100.0
    if "input_idle_pct_of_span" in e:  # the GPU time input costs, not all idle time
        return e["input_idle_pct_of_span"]
    if a.rule == "low-overlap":
        comm = e.get("communication_pct_of_kernel_time", 0.0)
        return comm * (100.0 - e.get("comm_comp_overlap_pct", 0.0)) / 100.0
    keys = (
        "idle_pct",
        "htod_dtoh_pct_of_gpu_activity",
        "fp32_gemm_pct_of_kernel_time",
        "um_share_of_memory_time_pct",
        "um_share_of_memory_ops_pct",
        "sync_pct_of_span",
    )
    return max((e[k] for k in keys if k in e), default=0.0)


def _figure(key: str, m: Metrics) -> float:
    """A run's figure as the metric catalogue makes it (the mean over entries, for these), on
    a trace with GPU activity."""
    return views.value(key, m, check=False) or 0.0


def idle_sentence(m: Metrics) -> str:
    """The one idle figure: the mean over entries of GPU idle in the span, with the window."""
    if not has_gpu(m):
        return f"GPU idle: {NO_GPU} (the profile traced no kernels, copies or memsets)."
    if not has_kernels(m):
        return f"GPU idle: no kernels in this trace, so no GPU window to judge ({holdings(m)})."
    idle = _figure("gpu_idle_pct", m)
    span = max(r.span_ns for r in m.ranks)
    steps = max((r.steps.count for r in m.ranks if r.steps), default=0)
    over = f", mean of {len(m.ranks)} entries" if len(m.ranks) > 1 else ""
    held = f"; it holds the {steps} traced steps" if steps else ""
    return (
        f"GPU idle {idle:.1f} % of the span{over}: the {dur(span)} from the first to the last"
        f" GPU activity{held}."
    )


def hta_sentence(m: Metrics) -> str | None:
    """HTA's temporal split, and what each idle figure counts (`idle_figures`), said once."""
    figures = idle_figures(m)
    if figures is None:
        return None
    split = (
        f"compute {_figure('hta_compute_pct', m):.1f} %, non-compute"
        f" {_figure('hta_non_compute_pct', m):.1f} %, idle {_figure('hta_idle_pct', m):.1f} %"
    )
    what = (
        "compute = kernels that are not communication or memory; non-compute = time when only"
        " copies, memsets or communication ran"
    )
    return f"HTA's temporal breakdown: {split} ({what}). {figures.text}."


IDLE_DIFFER_POINTS = 0.5  # the two idle figures differ when this far apart (mean of entries)


class IdleFigures(NamedTuple):
    """What gh-run's idle and HTA's temporal idle count, and why they differ (`differ`: by
    `IDLE_DIFFER_POINTS` or more)."""

    text: str
    differ: bool


def _hta_reasons(m: Metrics) -> list[str]:
    """Why HTA's temporal idle is not gh-run's, from how HTA's view of each entry was built
    (`Temporal.basis`, `Temporal.span_ns`): HTA leaves out the GPU work launched in the last
    ProfilerStep of a Kineto trace (a shorter window, without the wait before that step), and
    rounds a Kineto trace's times to whole microseconds."""
    out = []
    if any("before the last ProfilerStep" in r.temporal.basis for r in m.ranks):
        hta_span = max(r.temporal.span_ns for r in m.ranks)
        span = max(r.span_ns for r in m.ranks)
        out.append(
            "it leaves out the GPU work launched in the last profiled step, so it covers"
            f" {dur(hta_span)} of the {dur(span)} span"
        )
    if not out and any(r.temporal.clamped_events for r in m.ranks):
        out.append("it rounds the trace's times to whole microseconds")
    return out


def idle_figures(m: Metrics) -> IdleFigures | None:
    """The two idle figures a report shows, each with what it counts, and why they differ
    where they do; None without GPU activity."""
    if not has_gpu(m):
        return None
    ours, hta = _figure("gpu_idle_pct", m), _figure("hta_idle_pct", m)
    ours_what = (
        f"GPU idle {ours:.1f} % counts the time from the first to the last kernel, copy or"
        " memset in which none of them ran"
    )
    if abs(ours - hta) < IDLE_DIFFER_POINTS:
        return IdleFigures(
            f"{ours_what}; HTA's temporal idle ({hta:.1f} %) counts the same here", False
        )
    reasons = _hta_reasons(m) or [
        "it takes the events Holistic Trace Analysis takes: "
        + "; ".join(sorted({r.temporal.basis for r in m.ranks if r.temporal.basis}))
    ]
    return IdleFigures(
        f"{ours_what}; HTA's temporal idle ({hta:.1f} %) counts them as Holistic Trace Analysis"
        f" does: {'; '.join(reasons)}. They differ by {abs(ours - hta):.1f} points",
        True,
    )


def _from_advice(advice: list[Advice], m: Metrics) -> list[Finding]:
    """One finding per rule (its costliest entry), ranked as every view ranks them: by the GPU
    time each costs a step (`Advice.cost_ms`), the findings without a cost after, by `_score`."""
    best: dict[str, tuple[tuple[int, float], Advice, int]] = {}
    for a in advice:
        sc = (0, a.cost_ms) if a.cost_ms is not None else (-1, _score(a))
        seen = best.get(a.rule)
        n = (seen[2] if seen else 0) + 1
        if seen is None or sc > seen[0]:
            best[a.rule] = (sc, a, n)
        else:
            best[a.rule] = (seen[0], seen[1], n)
    out = []
    for _, a, n in sorted(best.values(), key=lambda x: (-x[0][0], -x[0][1])):
        ranks = f" ({n} of {len(m.ranks)} entries; the worst shown)" if n > 1 else ""
        out.append(
            Finding(title=TITLES.get(a.rule, a.rule), number=a.message + ranks, knob=a.knob,
                    rule=a.rule, checked=a.checked,
                    projection=a.projection.sentence() if a.projection else None)
        )  # fmt: skip
    return out


def _idle_finding(m: Metrics) -> Finding:
    r = max(m.ranks, key=lambda x: x.idle_pct)
    who = f"rank {r.rank}: " if len(m.ranks) > 1 else ""
    if r.idle_pct <= 100 - BUSY_PCT:
        return Finding(
            title="The GPU is busy: the kernels are the bottleneck",
            number=f"{who}GPU busy {r.busy_pct:.1f} % of the span ({dur(r.span_ns)})",
            knob="the kernels themselves: the top kernels below, lower precision (bf16), fused"
            " operations (torch.compile)",
        )
    ib = r.idle_breakdown
    parts = (
        {"host_wait": ib.host_wait_pct, "kernel_wait": ib.kernel_wait_pct, "other": ib.other_pct}
        if ib is not None
        else {}
    )
    cause = max(parts, key=lambda k: parts[k]) if parts else "other"
    why = f" ({parts[cause]:.0f} % of it {cause.replace('_', ' ')})" if parts else ""
    top = r.idle_causes.causes[0] if r.idle_causes and r.idle_causes.causes else None
    if top is not None and top.cause != "short-gaps":
        # the GPU waits in long intervals, not µs launch gaps: name what the host did there
        per = (
            f"{top.ms_per_step:.1f} ms per step"
            if r.idle_causes and r.idle_causes.steps
            else (dur(top.total_ns))
        )
        return Finding(
            title="The GPU waits for the host",
            number=f"{who}GPU idle {r.idle_pct:.1f} % of the span; {per} of it {top.label}"
            f" ({top.evidence})",
            knob=top.knob or knobs_other(),
        )
    knobs = {
        "host_wait": "the host launches work too slowly: CUDA graphs"
        " (torch.compile(mode='reduce-overhead')), fewer host syncs, more work per step",
        "kernel_wait": "many short kernels back to back: fuse them (torch.compile) or give each"
        " more work (a larger batch)",
        "other": "see what the GPU waits for in the step picture below (host work, data,"
        " synchronisation)",
    }
    return Finding(
        title="The GPU sits idle between kernels",
        number=f"{who}GPU idle {r.idle_pct:.1f} % of the span{why}",
        knob=knobs[cause],
    )


def knobs_other() -> str:
    return "see what the GPU waits for in the step picture below (host work, data, synchronisation)"


def pattern_sentence(r: RankMetrics) -> str | None:
    """The slow steps of an entry and their cause, in one sentence (None: no step is slow)."""
    p = r.steps.pattern if r.steps is not None else None
    if p is None:
        return None
    every = f", every {p.every} steps" if p.every else ""
    if p.cause:
        cause = f": {p.cause} ({p.cause_ms:.1f} ms more in them; {p.evidence})"
    elif r.idle_causes is None:
        cause = " (no GPU idle was attributed in this trace to say why)"
    else:
        cause = ": no idle cause makes the difference (the GPU's own work is longer)"
    return (
        f"{', '.join(p.slow_steps)} of {p.of}{every} take {p.extra_ms:.1f} ms more than the"
        f" median step ({p.median_ms:.1f} ms){cause}"
    )


def _pattern_finding(m: Metrics) -> Finding | None:
    """Slow steps at a period or alone, with the cause that makes them slow."""
    for r in m.ranks:
        said = pattern_sentence(r)
        p = r.steps.pattern if r.steps is not None else None
        if said is None or p is None:
            continue
        who = f"rank {r.rank}: " if len(m.ranks) > 1 else ""
        title = f"Every {p.every}th step is slower" if p.every else "Some steps are slower"
        knob = next(
            (c.knob for c in (r.idle_causes.causes if r.idle_causes else []) if c.cause == p.cause),
            "see what the slow steps do differently in the step picture",
        )
        return Finding(title=title, number=who + said, knob=knob)
    return None


def _top_kernel(m: Metrics) -> Finding | None:
    top = merged_top_kernels(m.ranks, 1)
    if not top or not any(r.activity.kernel_ns for r in m.ranks):
        return None
    name, count, total, share = top[0]
    return Finding(
        title=f"Most kernel time: {short_kernel(name, 48)}",
        number=f"{share:.1f} % of kernel time ({count:,} launches, {dur(total)})",
        knob="speed up or avoid this operation first (fusion with torch.compile, a better"
        " shape or precision); the top-kernel table has the rest",
    )


def _step_finding(m: Metrics) -> Finding | None:
    wl = [r.workload.median_step_time_s for r in m.ranks if r.workload]
    wl_s = [x for x in wl if x is not None]
    steps = [r.steps for r in m.ranks if r.steps]
    if wl_s:
        number = f"median step {dur(max(wl_s) * 1e9)} (the workload's own timing, slowest rank)"
    elif steps:
        s = max(steps, key=lambda x: x.p50_ns)
        number = f"median step {dur(s.p50_ns)} over {s.count} traced steps (p90 {dur(s.p90_ns)})"
    else:
        return None
    return Finding(
        title="Step time",
        number=number,
        knob="change one knob and compare against this run: gh-run compare THIS_RUN NEW_RUN",
    )


def _cpu_findings(m: Metrics) -> list[Finding]:
    if has_gpu(m):  # copies or memsets, but no kernel
        first = Finding(
            title="No kernels in this trace",
            number=holdings(m)[0].upper() + holdings(m)[1:],
            knob="capture steps that run kernels with CUDA tracing on (profile.trace: [cuda,"
            " nvtx, osrt]); a capture range (cudaProfilerApi, NVTX) that closes before the first"
            " kernel, or a window before training starts, holds none",
        )
    else:
        first = Finding(
            title="No GPU timeline in this trace",
            number="0 kernels, copies or memsets traced",
            knob="profile on a GPU with CUDA tracing (profile.trace: [cuda, nvtx, osrt]) to see"
            " the GPU side",
        )
    out = [first]
    step = _step_finding(m)
    if step is not None:
        out.append(step)
    waits = [(r.main_thread_wait_ns, r) for r in m.ranks if r.main_thread_wait_ns]
    if waits:
        ns, r = max(waits, key=lambda x: x[0] or 0)
        out.append(
            Finding(
                title="The main thread blocks",
                number=f"{r.main_thread}: blocking waits {dur(ns)} in all",
                knob="see what it waits for in the step picture below (locks, worker threads, I/O)",
            )
        )
    else:
        threads = [(t.osrt_ns + t.cpu_op_ns, t.name) for r in m.ranks for t in r.threads]
        if threads:
            ns, name = max(threads)
            out.append(
                Finding(
                    title=f"Busiest CPU thread: {name}",
                    number=f"{dur(ns)} in OS-runtime calls and CPU operators",
                    knob="the step picture below shows where it spends that time",
                )
            )
    return out[:FINDINGS]


def _memory(m: Metrics) -> list[Finding]:
    from orchestrator.analysis.presentation import memory_findings

    found = memory_findings.findings(m)
    best: dict[str, Advice] = {}
    for a in found:  # one per rule: the first (the most it gives back)
        best.setdefault(a.rule, a)
    return [
        Finding(
            title=memory_findings.TITLES.get(a.rule, a.rule),
            number=a.message,
            knob=a.knob,
            rule=a.rule,
            checked=a.checked,
        )
        for a in best.values()
    ][:FINDINGS]


def verdict(m: Metrics, advice: list[Advice]) -> Verdict:
    """The idle figure, HTA's split and the three findings of one run (and its memory's)."""
    gpu = has_kernels(m)
    if not m.ranks:
        return Verdict(gpu=False, idle="no entries", findings=[])
    memory = _memory(m)
    if m.sources and all(s.kind == "torch-snapshot" for s in m.sources):
        return Verdict(gpu=False, idle=MEMORY_ONLY, findings=memory, memory=memory)
    if not gpu:
        return Verdict(gpu=False, idle=idle_sentence(m), findings=_cpu_findings(m), memory=memory)
    found = _from_advice(advice, m)
    idle_rules = {"data-loader", "host-compute", "launch-bound", "sync-overhead",
                  "idle-unclassified"}  # fmt: skip
    if not idle_rules & {f.rule for f in found}:
        found.append(_idle_finding(m))
    for extra in (_pattern_finding(m), _top_kernel(m), _step_finding(m)):
        if extra is not None:
            found.append(extra)
    sm = gpu_metric_findings.sentence(m)
    return Verdict(
        gpu=True,
        idle=idle_sentence(m),
        hta=hta_sentence(m),
        sm=sm,
        findings=found[:FINDINGS],
        memory=memory,
    )
