"""What changed, in the figures a busy machine does not move: each step phase's CPU time
(the workload's `--cpu-reference`: `median_phase_cpu_s` in its metrics.json), or the same in
units of a fixed work timed beside the step (`median_phase_cpu_relative`).

A night that regressed on `step_cpu_time_s` or `step_cpu_relative` was judged on CPU time,
which other load does not move (a process waiting for a core is not charged for the wait);
the ratio also cancels the machine's own drift. The traced phases are wall times, which load
moves: beside a bursty load the good run's trace may have run slow and tonight's fast, and a
comparison of them names the wrong phase or none (issue 17's limit). So such a night's "what
changed" compares the kind of figure it was judged on, run against run. Reference units are
shown in milliseconds of CPU time at the good run's speed (its reference work's median time),
so that the table reads like the traced one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from orchestrator.analysis.presentation.changes import PHASES, PhaseChange, WhatChanged, finding
from orchestrator.campaign.sources import PHASE_SOURCES


@dataclass(frozen=True)
class CpuFigure:
    """A step figure measured in CPU time and how its phases are stored."""

    step: str  # the judged metric
    phases: str  # the stored phase keys' prefix
    # The good run's metric that turns one unit into seconds (None: the unit is seconds).
    scale: str | None
    note: str


# In order of preference when a night regressed on both.
FIGURES = (
    CpuFigure(
        "step_cpu_relative",
        PHASE_SOURCES["median_phase_cpu_relative"],
        "cpu_reference_s",
        "phases: the training process's CPU time per step (median over the steps), measured "
        "in units of a fixed work timed beside each step and shown in ms at the good run's "
        "speed: what other load and the machine's own speed do not move (the traced phases, "
        "wall times that they do move, are in each run's report)",
    ),
    CpuFigure(
        "step_cpu_time_s",
        PHASE_SOURCES["median_phase_cpu_s"],
        None,
        "phases: the training process's CPU time per step (median over the steps): what "
        "other load does not move (the traced phases, wall times that it does move, are in "
        "each run's report)",
    ),
)
JUDGED = frozenset(f.step for f in FIGURES)


def phases_of(metrics: dict[str, float | None], prefix: str) -> dict[str, float]:
    """Phase name → its stored figure, from a run's stored metrics."""
    return {
        k.removeprefix(prefix): v
        for k, v in metrics.items()
        if k.startswith(prefix) and v is not None
    }


def _pct(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return 100.0 * (new - old) / abs(old)


def cpu_changes(
    judged: Collection[str],
    base: dict[str, float | None],
    run: dict[str, float | None],
    base_label: str = "",
    label: str = "",
) -> WhatChanged | None:
    """`run` against `base` (a good run) in the first CPU figure among the `judged` metrics
    that both runs measured with its phases; None when there is none."""
    for fig in FIGURES:
        if fig.step in judged and (w := _compare(fig, base, run, base_label, label)):
            return w
    return None


def _compare(
    fig: CpuFigure,
    base: dict[str, float | None],
    run: dict[str, float | None],
    base_label: str,
    label: str,
) -> WhatChanged | None:
    bp, rp = phases_of(base, fig.phases), phases_of(run, fig.phases)
    b_step, r_step = base.get(fig.step), run.get(fig.step)
    scale = base.get(fig.scale) if fig.scale else 1.0
    if not bp or not rp or b_step is None or r_step is None or not scale or scale <= 0:
        return None
    ms = scale * 1e3

    def row(
        name: str, old: float | None, new: float | None, figure: str | None = None
    ) -> PhaseChange:
        return PhaseChange(
            name=name,
            baseline_ms=old * ms if old is not None else None,
            value_ms=new * ms if new is not None else None,
            change_pct=_pct(new, old),
            figure=figure,
        )

    order = [p for p in PHASES if p in bp or p in rp]
    order += sorted((set(bp) | set(rp)) - set(order))
    # the step as the night was judged: the campaign's own figure, named as its table names it
    phases = [row(fig.step, b_step, r_step, fig.step)]
    phases += [row(p, bp.get(p), rp.get(p)) for p in order]
    step_pct = _pct(r_step, b_step)
    return WhatChanged(
        label=label,
        baseline_label=base_label,
        # Kernels and metric groups are wall-time shares of the trace: left out of the
        # sentence, which says what the CPU figures say.
        finding=finding(phases, [], [], step_pct),
        step_change_pct=step_pct,
        phases=phases,
        notes=[fig.note],
    )
