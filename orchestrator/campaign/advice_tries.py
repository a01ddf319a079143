"""A campaign that tries its own advice (`try_advice: true`, issue 41 item 3): when a night
ends, each variant's costliest finding that has a knob in the spec (`runs/advice_knobs.py`) is
submitted as a try of that variant (`runs/trial.py`), its projection kept in the state store;
the tries of earlier nights that have ended since are collected, analysed and scored first. So
each night's report says which advice held (`gh-run scores` keeps the running accuracy).

The tries are runs of their own, outside the campaign's matrix and verdict: a try that fails
or misses its projection never makes the night regress.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis.metrics import Metrics
from orchestrator.campaign.model import Campaign
from orchestrator.core.errors import GhRunError
from orchestrator.executors.base import Warn
from orchestrator.store import campaigns as db
from orchestrator.store import scores
from orchestrator.store.db import Store


def score_ended(store: Store, home: Path, warn: Warn | None = None) -> list[str]:
    """The tries not scored yet whose runs have ended: collected, analysed and scored; a line
    each."""
    from orchestrator.runs import trial

    pending = [store.get_run(s.try_run_id) for s in scores.all_scores(store) if s.scored_at is None]
    if not pending:
        return []
    return [trial.sentence(s) for _, s in trial.finish(store, home, pending, 0, warn) if s]


def submit_tries(
    store: Store,
    home: Path,
    campaign: Campaign,
    campaign_id: str,
    analyses: dict[str, Metrics],
    warn: Warn | None = None,
) -> list[str]:
    """Tonight's tries: per completed variant, its costliest finding with a knob; a line each
    (what was tried and its projection, or why nothing was)."""
    from orchestrator.analysis.presentation.advise import advise
    from orchestrator.checks import prepare as P
    from orchestrator.executors.choose import choose_executor
    from orchestrator.runs import lifecycle as R
    from orchestrator.runs import trial
    from orchestrator.runs.advice_knobs import KnobChange

    records = scores.often_wrong(store)
    out = []
    for name, run in db.runs_of(store, campaign_id).items():
        if run.state != "COMPLETED":
            continue
        m = analyses.get(run.run_id) or trial.analysed(store, home, run.run_id)
        found = advise(m, records)
        plan = None
        for a in found:
            try:
                plan = trial.plan(run, m, found, a.rule, [])
            except GhRunError:
                continue
            if isinstance(plan.change, KnobChange):
                break
        if plan is None:
            out.append(f"{name}: no finding with a knob in the spec, nothing tried")
            continue
        prep = P.prepare(plan.spec_path, list(plan.change.sets), None)
        ex = choose_executor(campaign.executor, warn=warn, cluster=prep.cluster)
        tried = R.submit(store, prep, ex, home)
        trial.record(store, plan, tried)
        said = plan.finding.projection.sentence() if plan.finding.projection else "no projection"
        out.append(f"{name}: trying {plan.change.says} as {tried.run_id} ({said})")
    return out
