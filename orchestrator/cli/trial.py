"""`gh-run try` (a finding's knob, run and scored) and `gh-run scores` (how the projections
held): the CLI side of runs/trial.py and store/scores.py."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.state import STATE, warn
from orchestrator.cli.table import paint
from orchestrator.executors.choose import ExecutorKind

if TYPE_CHECKING:
    from orchestrator.store.db import Run, Store
    from orchestrator.store.scores import Score


def try_cmd(
    run: Annotated[str, typer.Argument(help="The run whose finding to try (id, prefix, 'last').")],
    finding: Annotated[
        str | None,
        typer.Argument(
            help="the finding: its rule (data-loader, fp32-kernels, launch-bound, ...) or its"
            " place in the ranking (1: the costliest); default the costliest",
            show_default=False,
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            "-s",
            metavar="KEY=VALUE",
            help="apply this change instead of the finding's mapped knob (repeatable): for a"
            " knob that is no spec field, e.g. --set workload.args.3=--cuda-graphs",
        ),
    ] = None,
    executor: Annotated[
        ExecutorKind,
        typer.Option("--executor", "-x", help="slurm, local, or auto (as submit)."),
    ] = "auto",
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="track the try to its end, collect it and score it (--no-wait: `gh-run scores"
            " --refresh` scores it later)",
        ),
    ] = True,
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds",
            "-n",
            min=1,
            max=20,
            metavar="N",
            help="measure the knob in N rounds in turn, each the run's spec again without the"
            " knob and then with it, one job after the other: the score is the run's step times"
            " the rounds' mean ratio, with their spread. For a machine whose speed drifts: one"
            " run after another misread a host-bound loop by 20-25 % on a lent H200, where three"
            " rounds did not. Needs --wait",
        ),
    ] = 1,
) -> None:
    """Run a finding's knob and check its projection.

    Submits the run's own spec (its spec.lock.yaml) again with the finding's knob as a --set
    of the spec field it maps to (data-loader workers, precision, pinned memory, CUDA graphs,
    NeMo's fields), tracks it, and reports the step the finding's projection predicted against
    the step the try measured. The score is kept in the state store (`gh-run scores`). A knob
    that is no spec field is named, not guessed: give it with --set.

    With --rounds N the run's spec runs again without the knob and then with it, N times in
    turn, and the score is the run's step times the rounds' mean ratio (with their spread):
    a drifting machine moves both sides of each round alike."""
    from orchestrator.analysis.presentation.advise import advise
    from orchestrator.checks import prepare as P
    from orchestrator.core.errors import UserError
    from orchestrator.executors.choose import choose_executor
    from orchestrator.runs import lifecycle as R
    from orchestrator.runs import trial
    from orchestrator.store import scores

    if rounds > 1 and not wait:
        raise UserError(
            f"--rounds {rounds} waits for each job before it submits the next: drop --no-wait"
        )
    store = STATE.store()
    base = store.find_run(run)
    metrics = trial.analysed(store, STATE.home, base.run_id)
    advice = advise(metrics, scores.often_wrong(store))
    plan = trial.plan(base, metrics, advice, finding, list(set_ or []))
    a = plan.finding
    print(f"{paint(a.rule, 'bold')} on {base.run_id}: {a.message}")
    if a.projection is not None:
        print(f"  {a.projection.sentence()}")
    print(f"  trying: {plan.change.says} ({' '.join('--set ' + s for s in plan.change.sets)})")
    prep = P.prepare(plan.spec_path, list(plan.change.sets), None)
    ex = choose_executor(executor, warn=warn, cluster=prep.cluster)
    if rounds > 1:
        control = P.prepare(plan.spec_path, [], None)
        print(f"  {rounds} rounds, each {base.run_id}'s spec again without the knob, then with it")
        got = trial.run_rounds(
            store,
            STATE.home,
            plan,
            lambda knob: R.submit(store, prep if knob else control, ex, STATE.home),
            rounds,
            timeout,
            warn,
        )
        if got is None:
            raise typer.Exit(1)
        print(trial.sentence(got))
        if got.measured_ms is None:
            raise typer.Exit(1)
        return
    tried = R.submit(store, prep, ex, STATE.home)
    trial.record(store, plan, tried)
    print(f"submitted {paint(tried.run_id, 'bold')} as {ex.name} job {tried.job_id}")
    if not wait:
        print(f"  score it once it ends: gh-run scores --refresh   (gh-run wait {tried.run_id})")
        return
    done = _finish(store, [tried], timeout)
    if not done:
        raise typer.Exit(1)


def _finish(store: Store, runs: list[Run], timeout: float | None) -> bool:
    """Wait for the tries, collect and score them (runs/trial.finish); False where one did
    not complete or measured nothing."""
    from orchestrator.runs import trial

    ok = True
    for r, s in trial.finish(store, STATE.home, runs, timeout, warn):
        if s is None:
            print(f"{r.run_id}: still {r.state}; `gh-run scores --refresh` scores it later")
            ok = False
            continue
        print(trial.sentence(s))
        ok &= r.state == "COMPLETED" and s.measured_ms is not None
    return ok


def scores_cmd(
    refresh: Annotated[
        bool,
        typer.Option("--refresh", help="score the tries that have ended since (collect them)"),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Machine-readable output: every try (with its rounds) and each rule's record.",
        ),
    ] = False,
) -> None:
    """How the projections held: each try, and the running accuracy per rule.

    A rule whose projections missed by more than 10 % on the median, over 3 checks or more,
    says so in its advice from then on."""
    from orchestrator.store import scores

    store = STATE.store()
    if refresh:
        pending = [
            store.get_run(s.try_run_id) for s in scores.all_scores(store) if s.scored_at is None
        ]
        if pending:
            _finish(store, pending, timeout=0)
    from orchestrator.runs import trial

    all_ = scores.all_scores(store)
    if as_json:
        typer.echo(json.dumps(_scores_doc(store, all_), indent=2))
        return
    if not all_:
        print("no projection has been tried yet: `gh-run try RUN` runs one")
        return
    for s in all_:
        print(trial.sentence(s))
    print()
    for acc in scores.accuracy(all_):
        flag = f" {paint('(often wrong)', 'bold red')}" if acc.often_wrong else ""
        print(f"{acc.sentence()}{flag}")


def _scores_doc(store: Store, all_: list[Score]) -> dict[str, Any]:
    """`gh-run scores --json`: every try with its rounds (a try of one round has none) and
    each rule's running record."""
    from orchestrator.store import scores

    def one_round(r: scores.Round) -> dict[str, Any]:
        return {**dataclasses.asdict(r), "ratio": r.ratio}

    return {
        "tries": [
            {
                **dataclasses.asdict(s),
                "round_runs": [one_round(r) for r in scores.rounds_of(store, s.try_run_id)],
            }
            for s in all_
        ],
        "rules": [
            {**dataclasses.asdict(a), "often_wrong": a.often_wrong} for a in scores.accuracy(all_)
        ],
    }


def register(app: typer.Typer) -> None:
    app.command("try")(try_cmd)
    app.command("scores")(scores_cmd)
