"""Projections checked by running them (issue 41 item 4): for each `gh-run try`, the finding's
rule, the knob applied (the `--set` lines), the step predicted (with its range) and the step
the run with the knob measured, and the error. Written when the try is submitted (measured
empty) and completed when it has been analysed, so a try that is still running is listed as
such and `gh-run scores` can finish it later.

A try of several rounds (`gh-run try --rounds N`) runs the base run's spec again without the knob
and then with it, N times in turn (`projection_rounds`): its measured step is the base run's
step times the mean of the rounds' ratios (with the knob over without), so that a machine whose
speed drifts between two runs moves both sides of each ratio alike; the rounds' lowest and
highest ratio give the spread.

`accuracy` is each rule's running record: how many checks, the median absolute error, how
many landed within `WITHIN_PCT`; `often_wrong` the rules whose record says their projections
should not be trusted, in a sentence their advice carries."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from orchestrator.store.db import Store, record

WITHIN_PCT = 10.0  # a projection within this of the measured step held
OFTEN_WRONG_PCT = 10.0  # a rule whose median error is over this is often wrong...
OFTEN_WRONG_MIN = 3  # ...once it has been checked this many times


@dataclass
class Score:
    try_run_id: str
    base_run_id: str
    rule: str
    knob: str
    created_at: float
    base_ms: float | None = None
    predicted_ms: float | None = None
    low_ms: float | None = None
    high_ms: float | None = None
    measured_ms: float | None = None
    error_pct: float | None = None
    scored_at: float | None = None
    note: str | None = None
    rounds: int = 1
    measured_low_ms: float | None = None
    measured_high_ms: float | None = None

    @property
    def within_range(self) -> bool | None:
        if self.measured_ms is None or self.low_ms is None or self.high_ms is None:
            return None
        return self.low_ms * 0.95 <= self.measured_ms <= self.high_ms * 1.05


@dataclass
class RuleAccuracy:
    rule: str
    checked: int
    within: int
    median_abs_error_pct: float | None
    pending: int

    @property
    def often_wrong(self) -> bool:
        return (
            self.checked >= OFTEN_WRONG_MIN
            and self.median_abs_error_pct is not None
            and self.median_abs_error_pct > OFTEN_WRONG_PCT
        )

    def sentence(self) -> str:
        if not self.checked:
            return f"{self.rule}: not checked yet ({self.pending} running)"
        return (
            f"{self.rule}: {self.within} of {self.checked} projections within {WITHIN_PCT:.0f} %"
            f" of the measured step, median error {self.median_abs_error_pct:.1f} %"
        )


def add(store: Store, score: Score) -> None:
    """A try as submitted (measured empty)."""
    with store.tx() as db:
        db.execute(
            "INSERT INTO projection_scores (try_run_id, base_run_id, rule, knob, base_ms,"
            " predicted_ms, low_ms, high_ms, measured_ms, error_pct, created_at, scored_at, note,"
            " rounds) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                score.try_run_id, score.base_run_id, score.rule, score.knob, score.base_ms,
                score.predicted_ms, score.low_ms, score.high_ms, score.measured_ms,
                score.error_pct, score.created_at, score.scored_at, score.note, score.rounds,
            ),
        )  # fmt: skip


def complete(
    store: Store,
    try_run_id: str,
    measured_ms: float | None,
    note: str | None = None,
    rounds: tuple[int, float, float] | None = None,
) -> Score:
    """The try's measured step, and its error against the prediction; `rounds`: how many
    rounds measured it and the lowest and highest step they give (a try of several)."""
    s = get(store, try_run_id)
    err = (
        100.0 * (s.predicted_ms - measured_ms) / measured_ms
        if measured_ms and s.predicted_ms is not None
        else None
    )
    n, low, high = rounds if rounds is not None else (s.rounds, None, None)
    with store.tx() as db:
        db.execute(
            "UPDATE projection_scores SET measured_ms = ?, error_pct = ?, scored_at = ?,"
            " note = ?, rounds = ?, measured_low_ms = ?, measured_high_ms = ?"
            " WHERE try_run_id = ?",
            (measured_ms, err, time.time(), note, n, low, high, try_run_id),
        )
    return get(store, try_run_id)


@dataclass
class Round:
    """One round of a try of several: the base run's spec again without the knob (the
    control), then with it; each one's step in one frame (runs/trial.paired_steps)."""

    try_run_id: str  # the score's key: the first round's run with the knob
    round: int
    control_run_id: str | None = None
    round_run_id: str | None = None
    control_ms: float | None = None
    try_ms: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.control_ms and self.try_ms is not None:
            return self.try_ms / self.control_ms
        return None


def add_round(store: Store, r: Round) -> None:
    """A round as it stands (its runs submitted, its steps once measured)."""
    with store.tx() as db:
        db.execute(
            "INSERT OR REPLACE INTO projection_rounds (try_run_id, round, control_run_id,"
            " round_run_id, control_ms, try_ms) VALUES (?,?,?,?,?,?)",
            (r.try_run_id, r.round, r.control_run_id, r.round_run_id, r.control_ms, r.try_ms),
        )


def rounds_of(store: Store, try_run_id: str) -> list[Round]:
    return [
        record(Round, x)
        for x in store.rows(
            "SELECT * FROM projection_rounds WHERE try_run_id = ? ORDER BY round", (try_run_id,)
        )
    ]


def measured_from_rounds(
    base_ms: float | None, rounds: list[Round]
) -> tuple[float, float, float, int] | None:
    """(step, lowest, highest, rounds measured): the base run's step times the rounds' mean
    ratio (and their lowest and highest); None where no round measured both sides or the
    base run has no step."""
    ratios = [x for x in (r.ratio for r in rounds) if x is not None]
    if not ratios or not base_ms:
        return None
    mean = statistics.fmean(ratios)
    return base_ms * mean, base_ms * min(ratios), base_ms * max(ratios), len(ratios)


def complete_rounds(store: Store, try_run_id: str, note: str | None = None) -> Score:
    """A try of several rounds scored from its rounds (module docstring)."""
    s = get(store, try_run_id)
    rs = rounds_of(store, try_run_id)
    got = measured_from_rounds(s.base_ms, rs)
    if got is None:
        why = note or "no round measured the step both without and with the knob"
        return complete(store, try_run_id, None, why)
    ms, low, high, n = got
    if n < len(rs):
        left = f"{len(rs) - n} of {len(rs)} rounds measured nothing"
        note = f"{note}; {left}" if note else left
    return complete(store, try_run_id, ms, note, (n, low, high))


def get(store: Store, try_run_id: str) -> Score:
    rows = store.rows("SELECT * FROM projection_scores WHERE try_run_id = ?", (try_run_id,))
    if not rows:
        raise KeyError(try_run_id)
    return record(Score, rows[0])


def all_scores(store: Store) -> list[Score]:
    return [
        record(Score, r)
        for r in store.rows("SELECT * FROM projection_scores ORDER BY created_at, try_run_id")
    ]


def accuracy(scores: list[Score]) -> list[RuleAccuracy]:
    """Each rule's running record, the most checked first."""
    by: dict[str, list[Score]] = {}
    for s in scores:
        by.setdefault(s.rule, []).append(s)
    out = []
    for rule, ss in by.items():
        done = [abs(s.error_pct) for s in ss if s.error_pct is not None]
        out.append(
            RuleAccuracy(
                rule=rule,
                checked=len(done),
                within=sum(1 for e in done if e <= WITHIN_PCT),
                median_abs_error_pct=statistics.median(done) if done else None,
                pending=sum(1 for s in ss if s.scored_at is None),
            )
        )
    return sorted(out, key=lambda a: (-a.checked, a.rule))


def often_wrong(store: Store | None) -> dict[str, str]:
    """rule -> the sentence its advice carries, for the rules whose projections were often
    wrong (an empty dict without a store or scores)."""
    if store is None:
        return {}
    return {
        a.rule: f"careful: this rule's projections were often wrong ({a.sentence()})"
        for a in accuracy(all_scores(store))
        if a.often_wrong
    }
