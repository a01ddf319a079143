"""Every rule on every entry, then the cross-rank rules (`advise`): advice.py's on time, data
and memory, gpu_metric_findings.py's on the GPU metrics. The one module that puts the rule
modules together, so that each of them builds `advice.Advice` without a circle."""

from __future__ import annotations

from orchestrator.analysis.metrics import Metrics, RankedFinding
from orchestrator.analysis.presentation import advice, gpu_metric_findings, projections
from orchestrator.analysis.presentation.advice import Advice


def advise(metrics: Metrics, records: dict[str, str] | None = None) -> list[Advice]:
    """Every rule that fires on any rank, then the cross-rank rules, ranked by what each costs a
    step (`advice.ranked`: the order every view shows), each with what its knob would leave of
    the step (`projections`; `records`: a rule's running accuracy where it is often wrong).
    Low overlap on a rank that waits for a straggler is said to be waiting
    (`advice._waiting`)."""
    kind = metrics.workload_kind
    st = metrics.settings
    per_rank = [
        advice._waiting(a, metrics) for r in metrics.ranks for a in advice._rules(r, kind, st)
    ]
    per_rank += [a for r in metrics.ranks for a in gpu_metric_findings.rules(r, kind, st)]
    return attach(advice.ranked(per_rank + advice._straggler(metrics)), metrics, records)


def attach(
    found: list[Advice], metrics: Metrics, records: dict[str, str] | None = None
) -> list[Advice]:
    """Each piece of advice with its projection (`projections.project`, on its own rank)."""
    by_rank = {r.rank: r for r in metrics.ranks}
    out = []
    for a in found:
        r = by_rank.get(a.rank)
        p = projections.project(a.rule, r, metrics.settings, records) if r is not None else None
        out.append(a.model_copy(update={"projection": p}) if p is not None else a)
    return out


def with_findings(metrics: Metrics, records: dict[str, str] | None = None) -> Metrics:
    """`metrics` with its findings (`advise`, ranked by cost) for `analyze --json`; `records`:
    the rules whose projections were often wrong, said in their projection sentences."""
    found = [
        RankedFinding(
            rule=a.rule,
            rank=a.rank,
            cost_ms=a.cost_ms,
            cost_basis=a.cost_basis,
            cause=a.cause,
            message=a.message,
            knob=a.knob,
            projected_ms=a.projection.projected_ms if a.projection else None,
            projected_low_ms=a.projection.low_ms if a.projection else None,
            projected_high_ms=a.projection.high_ms if a.projection else None,
            projection=a.projection.sentence() if a.projection else None,
        )
        for a in advise(metrics, records)
    ]
    return metrics.model_copy(update={"findings": found})
