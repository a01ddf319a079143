"""Try a finding's knob (issue 41 items 3-4): the run's own spec submitted again with the knob
applied (`advice_knobs`), its projection kept in the state store with the try
(`store/scores.py`), and once the try has run and been collected, the step it measured set
against the step predicted.

The step compared is the same figure on both sides: the mean step of the finding's entry as
gh-run measures it (the projection starts from it and predicts it).

With rounds (`gh-run try --rounds N`), the run's own spec is submitted again without the knob and
then with it, N times in turn, each waited for before the next: each round's two steps are read
in one frame (`paired_steps`), and the try measures the base run's step times the mean of the
rounds' ratios (store/scores.py). A machine whose speed drifts moves both sides of a round alike:
on the lent H200 a host-bound loop's ratio moved from 0.85 to 1.40 between three such rounds,
and one run before and one after misread two held-out pairs by 20-25 %
(tests/data/heldout_h200/README.md, "kineto/").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.analysis.metrics import Metrics, RankMetrics
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


def record(store: Store, p: Plan, try_run: Run, rounds: int = 1) -> scores.Score:
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
        rounds=rounds,
    )
    scores.add(store, s)
    return s


# a capture whose steps differ from the run's own outside it by more than this is no measure of
# its step: slower, the profiler's cost; faster, a window too short for the run's rhythm (a
# loader whose workers deliver in bursts stalls one step in N)
SLOWED_PCT = 10.0


def _traced_ms(r: RankMetrics) -> float | None:
    return r.steps.mean_ns / 1e6 if r.steps is not None and r.steps.count else None


def _unlike(r: RankMetrics) -> bool:
    """The capture is no measure of the run's step: the workload's own steps inside it differ
    from those outside by over SLOWED_PCT (medians: the profiler's cost), or the traced mean
    step from the mean outside (the window caught fewer or more of the run's slow steps)."""
    po, traced = r.profiler_overhead, _traced_ms(r)
    if po is None or not po.outside_mean_ms:
        return False
    if abs(po.slowdown_pct or 0.0) > SLOWED_PCT:
        return True
    return traced is not None and 100 * abs(traced / po.outside_mean_ms - 1) > SLOWED_PCT


def measured_step_ms(metrics: Metrics, rank: int) -> float | None:
    """The step of entry `rank` (the first entry where no entry has that rank): its mean
    traced step, or, where the capture is no measure of it (`_unlike`: `profiler_overhead`,
    the workload's own steps inside the capture against outside it), the workload's own mean
    step outside the capture."""
    r = _entry(metrics, rank)
    if r is None:
        return None
    po = r.profiler_overhead
    if po is not None and po.outside_mean_ms and _unlike(r):
        return po.outside_mean_ms
    return _traced_ms(r)


def _entry(metrics: Metrics, rank: int) -> RankMetrics | None:
    return next((x for x in metrics.ranks if x.rank == rank), None) or (
        metrics.ranks[0] if metrics.ranks else None
    )


def paired_steps(control: Metrics, tried: Metrics, rank: int) -> tuple[float, float] | None:
    """The step without the knob (`control`) and with it (`tried`) in one frame: the workload's
    own mean steps outside the capture for both where either run's capture is no measure of its
    step (`_unlike`) and both measured them, else each one's mean traced step. None where
    either has no step to read."""
    rc, rt = _entry(control, rank), _entry(tried, rank)
    if rc is None or rt is None:
        return None
    pc, pt = rc.profiler_overhead, rt.profiler_overhead
    oc = pc.outside_mean_ms if pc is not None else None
    ot = pt.outside_mean_ms if pt is not None else None
    if oc and ot and (_unlike(rc) or _unlike(rt)):
        return oc, ot
    c, t = _traced_ms(rc), _traced_ms(rt)
    return (c, t) if c is not None and t is not None else None


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
    spread = (
        f" ({s.rounds} rounds, each against the run again without it:"
        f" {s.measured_low_ms:.1f}-{s.measured_high_ms:.1f})"
        if s.rounds > 1 and s.measured_low_ms is not None and s.measured_high_ms is not None
        else ""
    )
    return (
        f"{s.rule}: {was}predicted {s.predicted_ms:.1f} ms{rng}, measured {s.measured_ms:.1f} ms"
        f" with {s.knob}{spread} ({s.try_run_id}): error {err:+.1f} %, the projection {held}"
    )


def analysed(store: Store, home: Path, run_id: str) -> Metrics:
    """A run's analysis (its collected artifacts, else its run folder)."""
    from orchestrator.analysis.loader import analyze_paths
    from orchestrator.runs.inputs import analysis_input

    inp = analysis_input(store, home, run_id)
    return analyze_paths(inp.paths, inp.label)


def settle(
    store: Store, home: Path, runs: list[Run], timeout: float | None, warn: Warn | None = None
) -> list[tuple[Run, Metrics | None]]:
    """Track runs to their end (`timeout` 0: one look), collect and analyse those that
    completed; (run as it stands, its analysis or None)."""
    from orchestrator.runs import lifecycle as R

    final = R.wait(store, runs, warn=warn, timeout=timeout)
    ended = [r for r in final if r.terminal and r.state != "SUBMIT_FAILED"]
    got = R.collect_many(store, ended, home, warn)
    out: list[tuple[Run, Metrics | None]] = []
    for r in final:
        came = got.get(r.run_id)
        if isinstance(came, GhRunError) and warn is not None:
            warn(str(came))
        ok = r.state == "COMPLETED" and came is not None and not isinstance(came, GhRunError)
        out.append((r, analysed(store, home, r.run_id) if ok else None))
    return out


def finish(
    store: Store, home: Path, runs: list[Run], timeout: float | None, warn: Warn | None = None
) -> list[tuple[Run, scores.Score | None]]:
    """Track tries to their end (`timeout` 0: one look), collect, analyse and score those
    that ended; (run, its score, None where it has not ended). A try of several rounds is
    scored from its rounds (`finish_rounds`)."""
    out: list[tuple[Run, scores.Score | None]] = []
    single = []
    for r in runs:
        s = _score_of(store, r.run_id)
        if s is not None and s.rounds > 1:
            out.append((r, finish_rounds(store, home, s, timeout, warn)))
        else:
            single.append(r)
    for r, m in settle(store, home, single, timeout, warn):
        # the first entry: a try is the finding's own job resubmitted, rank 0 first
        out.append((r, score(store, r, m, 0) if r.terminal else None))
    return out


def _score_of(store: Store, try_run_id: str) -> scores.Score | None:
    try:
        return scores.get(store, try_run_id)
    except KeyError:
        return None


def _measure(store: Store, home: Path, rd: scores.Round, timeout: float | None,
             warn: Warn | None) -> bool:  # fmt: skip
    """The round's steps kept, once both of its runs have ended; whether both ended."""
    ids = [x for x in (rd.control_run_id, rd.round_run_id) if x]
    got = settle(store, home, [store.get_run(x) for x in ids], timeout, warn)
    by = {r.run_id: (r, m) for r, m in got}
    ended = len(ids) == 2 and all(r.terminal for r, _ in by.values())
    c = by.get(rd.control_run_id or "", (None, None))[1]
    t = by.get(rd.round_run_id or "", (None, None))[1]
    pair = paired_steps(c, t, 0) if c is not None and t is not None else None
    if pair is not None:
        rd.control_ms, rd.try_ms = pair
        scores.add_round(store, rd)
    return ended


def finish_rounds(
    store: Store, home: Path, s: scores.Score, timeout: float | None, warn: Warn | None = None
) -> scores.Score | None:
    """A try of several rounds scored from the rounds submitted (`gh-run scores --refresh`
    after a `try --rounds` that was interrupted); None while one of their runs has not ended."""
    rounds = scores.rounds_of(store, s.try_run_id)
    for rd in rounds:
        if rd.ratio is None and not _measure(store, home, rd, timeout, warn):
            return None
    left = s.rounds - len(rounds)
    note = f"{left} of {s.rounds} rounds were not run" if left > 0 else None
    return scores.complete_rounds(store, s.try_run_id, note)


def run_rounds(
    store: Store,
    home: Path,
    p: Plan,
    submit: Callable[[bool], Run],
    n: int,
    timeout: float | None,
    warn: Warn | None = None,
    say: Callable[[str], None] = print,
) -> scores.Score | None:
    """`n` rounds in turn, each the run's spec again without the knob and then with it
    (`submit(with_knob)`), each run waited for before the next is submitted; scored from the
    rounds (store/scores.py). `timeout` bounds the whole: rounds left when it runs out are not
    run, and the note says so. None where the first run without the knob measured nothing
    (nothing was tried)."""
    end = None if timeout is None else time.monotonic() + timeout
    first: Run | None = None
    note = None
    for i in range(1, n + 1):
        left = None if end is None else max(end - time.monotonic(), 0.0)
        if left is not None and left <= 0 and first is not None:
            note = f"the timeout came after {i - 1} of {n} rounds"
            break
        control = submit(False)
        say(f"round {i}/{n}: {control.run_id} without the knob (job {control.job_id})")
        ((c_run, c_m),) = settle(store, home, [control], left, warn)
        if c_m is None:
            how = "did not end in time" if not c_run.terminal else f"ended {c_run.state}"
            note = f"round {i} of {n}: the run without the knob ({c_run.run_id}) {how}"
            say(note)
            break
        left = None if end is None else max(end - time.monotonic(), 0.0)
        tried = submit(True)
        if first is None:
            first = tried
            record(store, p, tried, rounds=n)
        say(f"round {i}/{n}: {tried.run_id} with it (job {tried.job_id})")
        ((t_run, t_m),) = settle(store, home, [tried], left, warn)
        pair = paired_steps(c_m, t_m, 0) if t_m is not None else None
        rd = scores.Round(first.run_id, i, control.run_id, tried.run_id, *(pair or (None, None)))
        scores.add_round(store, rd)
        if pair is not None:
            say(f"round {i}/{n}: {pair[0]:.1f} -> {pair[1]:.1f} ms ({pair[1] / pair[0]:.2f}x)")
        else:
            states = f"{c_run.state} and {t_run.state}"
            say(f"round {i}/{n}: measured nothing (the runs ended {states})")
        if not (c_run.terminal and t_run.terminal):
            note = f"the timeout came in round {i} of {n}"
            break
    if first is None:
        return None
    return scores.complete_rounds(store, first.run_id, note)
