"""Every rule on every entry, then the cross-rank rules (`advise`): advice.py's on time, data
and memory, gpu_metric_findings.py's on the GPU metrics. The one module that puts the rule
modules together, so that each of them builds `advice.Advice` without a circle."""

from __future__ import annotations

from orchestrator.analysis.metrics import Metrics, RankedFinding
from orchestrator.analysis.presentation import advice, gpu_metric_findings
from orchestrator.analysis.presentation.advice import Advice


def advise(metrics: Metrics) -> list[Advice]:
    """Every rule that fires on any rank, then the cross-rank rules, ranked by what each costs a
    step (`advice.ranked`: the order every view shows). Low overlap on a rank that waits for a
    straggler is said to be waiting (`advice._waiting`)."""
    kind = metrics.workload_kind
    st = metrics.settings
    per_rank = [
        advice._waiting(a, metrics) for r in metrics.ranks for a in advice._rules(r, kind, st)
    ]
    per_rank += [a for r in metrics.ranks for a in gpu_metric_findings.rules(r, kind, st)]
    return advice.ranked(per_rank + advice._straggler(metrics))


def with_findings(metrics: Metrics) -> Metrics:
    """`metrics` with its findings (`advise`, ranked by cost) for `analyze --json`."""
    found = [
        RankedFinding(
            rule=a.rule,
            rank=a.rank,
            cost_ms=a.cost_ms,
            cost_basis=a.cost_basis,
            cause=a.cause,
            message=a.message,
            knob=a.knob,
        )
        for a in advise(metrics)
    ]
    return metrics.model_copy(update={"findings": found})
