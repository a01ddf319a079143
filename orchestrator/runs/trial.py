"""Try a finding's knob (issue 41 items 3-4): the run's own spec submitted again with the knob
applied (`advice_knobs`), its projection kept in the state store with the try
(`store/scores.py`), and once the try has run and been collected, the step it measured set
against the step predicted.

The step compared is the same figure on both sides: the mean step of the finding's entry as
gh-run measures it (the projection starts from it and predicts it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.executors.base import Warn
from orchestrator.runs.advice_knobs import KnobChange, NoKnob, knob_change
from orchestrator.spec.job import JobSpec
from orchestrator.store import scores
from orchestrator.store.db import Run, Store


@dataclass
class Plan:
    """What `try` will submit: the run, its finding (with the projection), the spec file it
    resubmits and the `--set` lines."""

    run: Run
    finding: Advice
    spec_path: Path
    change: KnobChange


def spec_file(run: Run) -> Path:
    """The spec the run ran with: its run folder's spec.lock.yaml (the spec as resolved, with
    every --set it had), else the spec file it was submitted from."""
    lock = Path(run.run_dir) / "spec.lock.yaml"
    if not run.transport and lock.is_file():
        return lock
    if run.spec_path and Path(run.spec_path).is_file():
        return Path(run.spec_path)
    raise UserError(
        f"run {run.run_id}: neither its spec.lock.yaml ({lock}) nor its spec file"
        f" ({run.spec_path or 'not recorded'}) is on this machine; submit the spec yourself"
        " with the knob's --set"
    )


def pick(advice: list[Advice], finding: str | None) -> Advice:
    """The finding named by its rule (`data-loader`) or its place in the ranking (`1`: the
    costliest, as every view ranks them); the costliest without a name."""
    if not advice:
        raise UserError("the run has no findings: nothing to try")
    if finding is None:
        return advice[0]
    if finding.isdigit():
        i = int(finding)
        if not 1 <= i <= len(advice):
            raise UserError(
                f"FINDING {finding}: the run has {len(advice)} findings; give 1-{len(advice)}"
                " or a rule name"
            )
        return advice[i - 1]
    for a in advice:
        if a.rule == finding:
            return a
    rules = ", ".join(dict.fromkeys(a.rule for a in advice))
    raise UserError(f"FINDING {finding!r}: the run has no such finding; its findings: {rules}")


def plan(run: Run, metrics: Metrics, advice: list[Advice], finding: str | None,
         extra: list[str]) -> Plan:  # fmt: skip
    """The try of `finding` on `run`: its knob as `--set` lines, or `extra` where given (the
    user's own change, for a knob that is no spec field). Raises the one sentence that says a
    finding has no knob to apply."""
    from orchestrator.spec.yamlio import load_model

    a = pick(advice, finding)
    path = spec_file(run)
    if extra:
        return Plan(run, a, path, KnobChange(a.rule, tuple(extra), "; ".join(extra)))
    spec = load_model(path, JobSpec)
    w = metrics.settings.data_workers
    now = w.value if w is not None and isinstance(w.value, int) else None
    change = knob_change(a.rule, spec, now)
    if isinstance(change, NoKnob):
        raise UserError(change.sentence)
    return Plan(run, a, path, change)


def record(store: Store, p: Plan, try_run: Run) -> scores.Score:
    """The try, with its projection, in the state store before it has run."""
    pr = p.finding.projection
    s = scores.Score(
        try_run_id=try_run.run_id,
        base_run_id=p.run.run_id,
        rule=p.finding.rule,
        knob=" ".join(p.change.sets),
        created_at=time.time(),
        base_ms=pr.step_ms if pr else None,
        predicted_ms=pr.projected_ms if pr else None,
        low_ms=pr.low_ms if pr else None,
        high_ms=pr.high_ms if pr else None,
        note=None if pr is None or pr.projected_ms is not None else pr.none_because,
    )
    scores.add(store, s)
    return s


SLOWED_PCT = 10.0  # a capture that slowed the run more than this is no measure of its step


def measured_step_ms(metrics: Metrics, rank: int) -> float | None:
    """The step of entry `rank` (the first entry where no entry has that rank): its mean
    traced step, or, where gh-run finds that the capture slowed the run by more than
    SLOWED_PCT (`profiler_overhead`: the workload's own steps inside the capture against
    outside it), the workload's own step outside the capture."""
    r = next((x for x in metrics.ranks if x.rank == rank), None) or (
        metrics.ranks[0] if metrics.ranks else None
    )
    if r is None:
        return None
    po = r.profiler_overhead
    if po is not None and po.outside_step_ms and (po.slowdown_pct or 0.0) > SLOWED_PCT:
        return po.outside_step_ms
    if r.steps is None or not r.steps.count:
        return None
    return r.steps.mean_ns / 1e6


def score(store: Store, try_run: Run, metrics: Metrics | None, rank: int) -> scores.Score:
    """The try's measured step against its projection (None metrics: the try failed)."""
    if metrics is None:
        return scores.complete(store, try_run.run_id, None, f"the try ended {try_run.state}")
    got = measured_step_ms(metrics, rank)
    note = None if got is not None else "the try's trace shows no steps to measure"
    return scores.complete(store, try_run.run_id, got, note)


def sentence(s: scores.Score) -> str:
    """Predicted against measured, in one line."""
    if s.measured_ms is None:
        return f"{s.rule}: try {s.try_run_id} measured nothing ({s.note or 'not scored yet'})"
    was = f"step {s.base_ms:.1f} ms; " if s.base_ms is not None else ""
    if s.predicted_ms is None:
        return (
            f"{s.rule}: {was}measured {s.measured_ms:.1f} ms with {s.knob} ({s.try_run_id}); no"
            f" projection was made ({s.note})"
        )
    err = s.error_pct if s.error_pct is not None else 0.0
    held = "held" if abs(err) <= scores.WITHIN_PCT else "missed"
    rng = (
        f" ({s.low_ms:.1f}-{s.high_ms:.1f})"
        if s.low_ms is not None and s.high_ms is not None
        else ""
    )
    return (
        f"{s.rule}: {was}predicted {s.predicted_ms:.1f} ms{rng}, measured {s.measured_ms:.1f} ms"
        f" with {s.knob} ({s.try_run_id}): error {err:+.1f} %, the projection {held}"
    )


def analysed(store: Store, home: Path, run_id: str) -> Metrics:
    """A run's analysis (its collected artifacts, else its run folder)."""
    from orchestrator.analysis.loader import analyze_paths
    from orchestrator.runs.inputs import analysis_input

    inp = analysis_input(store, home, run_id)
    return analyze_paths(inp.paths, inp.label)


def finish(
    store: Store, home: Path, runs: list[Run], timeout: float | None, warn: Warn | None = None
) -> list[tuple[Run, scores.Score | None]]:
    """Track tries to their end (`timeout` 0: one look), collect, analyse and score those
    that ended; (run, its score, None where it has not ended)."""
    from orchestrator.runs import lifecycle as R

    final = R.wait(store, runs, warn=warn, timeout=timeout)
    ended = [r for r in final if r.terminal and r.state != "SUBMIT_FAILED"]
    got = R.collect_many(store, ended, home, warn)
    out: list[tuple[Run, scores.Score | None]] = []
    for r in final:
        if not r.terminal:
            out.append((r, None))
            continue
        came = got.get(r.run_id)
        if isinstance(came, GhRunError) and warn is not None:
            warn(str(came))
        ok = r.state == "COMPLETED" and came is not None and not isinstance(came, GhRunError)
        m = analysed(store, home, r.run_id) if ok else None
        # the first entry: a try is the finding's own job resubmitted, rank 0 first
        out.append((r, score(store, r, m, 0)))
    return out
