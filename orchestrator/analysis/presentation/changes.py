"""What changed between a good run and another: the step phases (NVTX / annotation ranges
such as data, forward, backward, optimizer; per step), the kernels whose total time moved most
(and kernels new or gone), the metric groups (GPU idle, copies, sync, data wait), and the
finding in one sentence ("data phase +38.0 %, step time mean +36.0 %: data loading got
slower"), the step in the one figure the comparison table shows (`step_figure`).

Used by the campaign report for a regressed variant (against the baseline's nearest good
run) and by `gh-run compare` (each run against the first).
"""

from __future__ import annotations

from pydantic import Field

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.timeline import library_ranges
from orchestrator.analysis.timeline.step_names import step_family
from orchestrator.core.base import Strict
from orchestrator.core.human import change_text

# The reference workload's phases (workloads/train.py), shown in this order; other
# user ranges follow. What a slower phase most likely means, for the one-sentence finding.
PHASES = ("data", "forward", "backward", "optimizer")
CAUSES = {
    "data": "data loading (tokenisation, collation) got slower",
    "forward": "the forward pass got slower",
    "backward": "the backward pass got slower",
    "optimizer": "the optimizer step got slower",
}
# Below these a phase, kernel or group is not said to have moved: a few percent is noise.
MOVED_PCT = 5.0
MOVED_POINTS = 2.0
# A phase explains a step change when it carries at least this share of it.
EXPLAINS = 0.25
TOP_KERNELS = 5
NOTHING = "nothing measured in both runs to compare"


class PhaseChange(Strict):
    """One named step phase (an NVTX / annotation range), mean time per occurrence; or the step
    itself, as the figure `figure` measures it (the key that defines it: the catalogue's, the
    one `compare` and the report's tables show)."""

    name: str
    baseline_ms: float | None
    value_ms: float | None
    change_pct: float | None
    figure: str | None = None


class KernelChange(Strict):
    """One kernel's total time in both runs (summed over ranks)."""

    name: str
    baseline_ms: float
    value_ms: float
    status: str  # "changed", "new" (only in the run), "gone" (only in the baseline)


class GroupChange(Strict):
    """A metric group (idle, copies, sync, data wait) in both runs."""

    name: str
    unit: str
    baseline: float | None
    value: float | None


class WhatChanged(Strict):
    """A run against a good run: what moved, and the finding in one sentence."""

    label: str = ""
    baseline_label: str = ""
    finding: str
    step_change_pct: float | None = None
    phases: list[PhaseChange] = Field(default_factory=list)
    kernels: list[KernelChange] = Field(default_factory=list)
    groups: list[GroupChange] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # what moved in GPU memory (presentation/memory_changes.py), where both runs recorded it
    memory: str | None = None


# The figures that measure a step, in the order one is chosen for a comparison: the traced
# step ranges (the phases are measured in the same trace), else the workload's own timing. One
# idea, one figure: "what changed" and the report's short table show the same one (`step_figure`).
STEP_FIGURES = ("step_time_mean_ms", "workload_step_median_s")


def step_figure(runs: list[Metrics]) -> str | None:
    """The step figure every run measures (`STEP_FIGURES`, first first), or None: what
    `compare` counts as measured (the run's sources can measure it, and it has a value)."""
    return next(
        (k for k in STEP_FIGURES if all(_step_ms(k, m) is not None for m in runs)),
        None,
    )


def _step_ms(key: str, m: Metrics) -> float | None:
    met = views.metric(key)
    if not met.sources.measured(m):
        return None
    v = met.run_value(m, "ms", check=False)
    return float(v) if v is not None else None


def _is_phase(name: str) -> bool:
    # torch's own ranges carry a '#' (ProfilerStep#3, Optimizer.step#AdamW.step); step ranges
    # are the step itself, not a phase of it; a GPU-side range (`forward [gpu]`, Kineto's
    # gpu_user_annotation) covers only the kernels launched on the range's own thread, not the
    # phase (backward's kernels come from autograd's threads): its CPU side is the phase.
    # a library's range (CUB, NCCL, ...) is no phase of the workload (issue 28 item 4; nsys
    # exports already keep them apart, a trace's names may still carry them)
    # a step's ranges summed under their pattern (`train_step *`) are the step too
    return (
        "#" not in name
        and not name.startswith(("step_", "ProfilerStep"))
        and step_family(name.replace("*", "0")) is None
        and not name.endswith(" [gpu]")
        and not library_ranges.is_library_name(name)
    )


def phase_means(m: Metrics) -> dict[str, float]:
    """Phase name → mean duration (ms) of one occurrence, over all ranks."""
    tot: dict[str, tuple[int, int]] = {}
    for r in m.ranks:
        for rs in r.nvtx:
            if _is_phase(rs.name) and rs.count:
                ns, n = tot.get(rs.name, (0, 0))
                tot[rs.name] = (ns + rs.total_ns, n + rs.count)
    return {k: ns / n / 1e6 for k, (ns, n) in tot.items()}


def kernel_totals(m: Metrics) -> dict[str, float]:
    """Kernel name → total time (ms), summed over ranks (of each rank's top kernels)."""
    out: dict[str, float] = {}
    for r in m.ranks:
        for k in r.top_kernels:
            out[k.name] = out.get(k.name, 0.0) + k.total_ns / 1e6
    return out


def groups(m: Metrics) -> dict[str, tuple[str, float | None]]:
    """The metric groups (the metric catalogue's `CHANGES` view): name → (unit, value); the GPU
    ones only with a GPU timeline."""
    return {name: (unit, views.recorded(key, m)) for name, unit, key in views.CHANGES}


def _pct(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return 100.0 * (new - old) / abs(old)


def _signed(pct: float) -> str:
    return f"{pct:+.1f} %"


def what_changed(base: Metrics, run: Metrics) -> WhatChanged:
    """`run` against `base` (a good run)."""
    notes: list[str] = []
    bp, rp = phase_means(base), phase_means(run)
    order = [p for p in PHASES if p in bp or p in rp]
    order += sorted((set(bp) | set(rp)) - set(order))
    order = [p for p in order if p != "step"]  # the step row below is the step, listed once
    phases = [
        PhaseChange(
            name=p, baseline_ms=bp.get(p), value_ms=rp.get(p), change_pct=_pct(rp.get(p), bp.get(p))
        )
        for p in order
    ]
    key = step_figure([base, run])
    b_step = _step_ms(key, base) if key else None
    r_step = _step_ms(key, run) if key else None
    # measured differently (other step ranges, another rule): not compared, as `compare` says
    basis = views.metric(key).basis if key else None
    how = (basis(base), basis(run)) if basis else (None, None)
    comparable = None in how or how[0] == how[1]
    step_pct = _pct(r_step, b_step) if comparable else None
    if key is not None:
        phases.insert(
            0,
            PhaseChange(
                name=views.metric(key).label,
                baseline_ms=b_step,
                value_ms=r_step,
                change_pct=step_pct,
                figure=key,
            ),
        )

    bk, rk = kernel_totals(base), kernel_totals(run)
    kernels = [
        KernelChange(
            name=k,
            baseline_ms=bk.get(k, 0.0),
            value_ms=rk.get(k, 0.0),
            status="new" if k not in bk else "gone" if k not in rk else "changed",
        )
        for k in set(bk) | set(rk)
    ]
    kernels.sort(key=lambda kc: (-abs(kc.value_ms - kc.baseline_ms), kc.name))
    kernels = (
        kernels[:TOP_KERNELS]
        + [kc for kc in kernels[TOP_KERNELS:] if kc.status != "changed"][:TOP_KERNELS]
    )
    if not bk and not rk:
        notes.append("no GPU kernels in either run (a CPU run, or a trace without a GPU)")

    bg, rg = groups(base), groups(run)
    group_rows = [
        GroupChange(name=g, unit=unit, baseline=bg[g][1], value=val)
        for g, (unit, val) in rg.items()
        # a group at 0 in both runs says nothing (data wait in runs without data ranges)
        if bool(val) or bool(bg[g][1])
    ]
    said = finding(phases, kernels, group_rows, step_pct)
    from orchestrator.analysis.presentation import memory_changes

    memory = memory_changes.sentence(base, run)
    if memory is not None:  # GPU memory moved: said after the time (or alone, without one)
        said = memory if said == NOTHING else f"{said}; {memory}"
    return WhatChanged(
        label=run.label or "",
        baseline_label=base.label or "",
        finding=said,
        memory=memory,
        step_change_pct=step_pct,
        phases=phases,
        kernels=kernels,
        groups=group_rows,
        notes=notes,
    )


def finding(
    phases: list[PhaseChange],
    kernels: list[KernelChange],
    group_rows: list[GroupChange],
    step_pct: float | None,
) -> str:
    """The one-sentence finding: the phase that carries the step's change (and what that
    means), else the metric group or kernel that moved most, else that nothing moved."""
    step = next((p for p in phases if p.figure is not None), None)
    parts: list[str] = []
    cause = ""
    moved = [
        p
        for p in phases
        if p.figure is None
        and p.change_pct is not None
        and abs(p.change_pct) >= MOVED_PCT
        and p.value_ms is not None
        and p.baseline_ms is not None
    ]
    if (
        step
        and step.change_pct is not None
        and step.value_ms is not None
        and step.baseline_ms is not None
        and moved
    ):
        d_step = step.value_ms - step.baseline_ms
        # The phase whose time moved most in the step's direction.
        lead = max(
            moved,
            key=lambda p: (
                (p.value_ms or 0) - (p.baseline_ms or 0)
                if d_step >= 0
                else (p.baseline_ms or 0) - (p.value_ms or 0)
            ),
        )
        d_lead = (lead.value_ms or 0) - (lead.baseline_ms or 0)
        if d_step and d_lead / d_step >= EXPLAINS:
            parts.append(f"{lead.name} phase {_signed(lead.change_pct or 0)}")
            if d_step > 0:
                cause = CAUSES.get(lead.name, f"the {lead.name} phase got slower")
            else:
                cause = f"the {lead.name} phase got faster"
    if step is not None and step_pct is not None:
        # the step figure as the comparison table shows it: one figure, one number
        moved_by = change_text(step.value_ms, step.baseline_ms, "ms")
        parts.append(f"{step.name} {'unchanged' if moved_by == '=' else moved_by}")
    elif step is not None:
        parts.append(f"{step.name} not comparable (the runs' steps were measured differently)")
    group_moves = [
        (g, g.value - g.baseline)
        for g in group_rows
        if g.value is not None
        and g.baseline is not None
        and abs(g.value - g.baseline) >= MOVED_POINTS
    ]
    if not cause and group_moves:
        g, d = max(group_moves, key=lambda gd: abs(gd[1]))
        parts.append(f"{g.name} {d:+.1f} points")
        cause = f"more {g.name}" if d > 0 else f"less {g.name}"
    if not cause and kernels:
        k = kernels[0]
        if k.status == "new":
            cause = f"a new kernel {_short(k.name)} ({k.value_ms:.1f} ms)"
        elif k.status == "gone":
            cause = f"kernel {_short(k.name)} is gone"
        elif k.baseline_ms and abs(k.value_ms / k.baseline_ms - 1) * 100 >= MOVED_PCT:
            cause = f"kernel {_short(k.name)} {_signed((k.value_ms / k.baseline_ms - 1) * 100)}"
    if not parts and not cause:
        return NOTHING
    if not cause:
        cause = (
            "no phase, metric group or kernel moved on its own: the change is spread out"
            if step_pct is None or abs(step_pct) >= MOVED_PCT
            else "no phase, metric group or kernel moved beyond noise"
        )
    return (", ".join(parts) + ": " if parts else "") + cause


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"
