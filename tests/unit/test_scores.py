"""Projections checked by running them, kept in the state store (issue 41 item 4): each try
with its prediction and what it measured, the running accuracy per rule, and the sentence a
rule's advice carries once its projections were often wrong."""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.store import scores
from orchestrator.store.db import Run, Store


def _run(store: Store, rid: str) -> None:
    store.add_run(
        Run(run_id=rid, name="t", job_name=f"gh-run-{rid}", spec_path=None, spec_json="{}",
            cluster="dev", partition="gh", executor="local", run_dir=f"/tmp/{rid}")
    )  # fmt: skip


def _try(store: Store, rid: str, rule: str, predicted: float, measured: float) -> scores.Score:
    _run(store, rid)
    scores.add(store, scores.Score(rid, "base", rule, "workload.args.2='4'", time.time(),
                                   100.0, predicted, predicted * 0.9, predicted * 1.1))  # fmt: skip
    return scores.complete(store, rid, measured)


def test_a_try_is_kept_then_scored(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _run(store, "base")
    s = _try(store, "t1", "data-loader", 73.6, 74.9)
    assert s.measured_ms == 74.9 and s.scored_at is not None
    assert abs(s.error_pct - 100 * (73.6 - 74.9) / 74.9) < 1e-9  # type: ignore[operator]
    assert scores.all_scores(Store(tmp_path))[0].try_run_id == "t1"  # reopened: it persisted


def test_accuracy_per_rule_and_the_rule_often_wrong(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _run(store, "base")
    for i, (p, m) in enumerate([(70, 74), (80, 79), (60, 61)]):
        _try(store, f"d{i}", "data-loader", p, m)
    for i, (p, m) in enumerate([(50, 80), (40, 75), (90, 60)]):
        _try(store, f"f{i}", "fp32-kernels", p, m)
    acc = {a.rule: a for a in scores.accuracy(scores.all_scores(store))}
    assert acc["data-loader"].checked == 3 and acc["data-loader"].within == 3
    assert not acc["data-loader"].often_wrong
    assert acc["fp32-kernels"].often_wrong and acc["fp32-kernels"].within == 0
    wrong = scores.often_wrong(store)
    assert set(wrong) == {"fp32-kernels"}
    assert "0 of 3" in wrong["fp32-kernels"]


def test_the_advice_carries_the_rule_record(tmp_path: Path) -> None:
    from orchestrator.analysis.loader import analyze_paths
    from orchestrator.analysis.presentation.advise import advise
    from tests.fixtures.standin_loop import Knobs, write

    (tmp_path / "x").mkdir()
    m = analyze_paths([write(tmp_path / "x" / "l.sqlite", Knobs(num_workers=0, load_ms=30))])
    said = advise(m, {"data-loader": "careful: this rule's projections were often wrong (...)"})
    a = next(x for x in said if x.rule == "data-loader")
    assert a.projection is not None and a.projection.sentence().endswith(
        "careful: this rule's projections were often wrong (...)"
    )


def test_the_report_and_json_carry_the_rule_record(tmp_path: Path) -> None:
    """The record is said wherever the projection is: the report's html and md (issue 41 item 4
    said it in analyze and try only) and analyze --json's findings; without a record, not."""
    from orchestrator.analysis.loader import analyze_paths
    from orchestrator.analysis.presentation.advise import with_findings
    from orchestrator.analysis.presentation.report import write_report
    from tests.fixtures.standin_loop import Knobs, write

    (tmp_path / "x").mkdir()
    m = analyze_paths([write(tmp_path / "x" / "l.sqlite", Knobs(num_workers=0, load_ms=30))])
    said = "careful: the projections of this rule were often wrong (1 of 4 within 10 %)"
    paths = write_report([m], tmp_path / "with", "t", {"data-loader": said})
    plain = write_report([m], tmp_path / "without", "t")
    for kind in ("html", "md"):  # each escapes its own way: the words are what must be there
        assert "the projections of this rule were often wrong" in paths[kind].read_text()
        assert "often wrong" not in plain[kind].read_text()
    found = with_findings(m, {"data-loader": said}).findings
    assert any(f.rule == "data-loader" and said in (f.projection or "") for f in found)
    assert not any("often wrong" in (f.projection or "") for f in with_findings(m).findings)


def test_a_try_in_rounds_measures_the_base_step_times_the_rounds_mean_ratio(
    tmp_path: Path,
) -> None:
    """Three rounds, each the run again without the knob then with it: a host that slowed
    between rounds (the controls 80, 100, 90 ms) moves both sides of each round alike. The try
    measures the base run's 100 ms times the mean ratio (0.5, 0.6, 0.55): 55 ms, spread 50-60;
    the error is against that, and the count of rounds is kept."""
    store = Store(tmp_path)
    _run(store, "base")
    _run(store, "t1")
    s = scores.Score("t1", "base", "data-loader", "workload.args.2='4'", time.time(), 100.0,
                     57.0, 50.0, 70.0, rounds=3)  # fmt: skip
    scores.add(store, s)
    for i, (c, t) in enumerate([(80.0, 40.0), (100.0, 60.0), (90.0, 49.5)], start=1):
        for rid in (f"c{i}", f"r{i}"):
            _run(store, rid)
        scores.add_round(store, scores.Round("t1", i, f"c{i}", f"r{i}", c, t))
    got = scores.complete_rounds(store, "t1")
    assert got.rounds == 3 and got.note is None
    assert abs(got.measured_ms - 55.0) < 1e-9  # type: ignore[operator]
    assert abs(got.measured_low_ms - 50.0) < 1e-9  # type: ignore[operator]
    assert abs(got.measured_high_ms - 60.0) < 1e-9  # type: ignore[operator]
    assert abs(got.error_pct - 100 * (57.0 - 55.0) / 55.0) < 1e-9  # type: ignore[operator]
    # a plain mean of the tries' steps (49.8) against the base's 100 would have read the drift
    assert [r.round_run_id for r in scores.rounds_of(Store(tmp_path), "t1")] == ["r1", "r2", "r3"]


def test_a_round_that_measured_nothing_is_left_out_and_said(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for rid in ("base", "t1", "c1", "c2", "r2"):
        _run(store, rid)
    scores.add(store, scores.Score("t1", "base", "sync", "k", time.time(), 40.0, 36.0,
                                   rounds=2))  # fmt: skip
    scores.add_round(store, scores.Round("t1", 1, "c1", "t1", 40.0, None))
    scores.add_round(store, scores.Round("t1", 2, "c2", "r2", 40.0, 38.0))
    got = scores.complete_rounds(store, "t1")
    assert got.rounds == 1 and abs(got.measured_ms - 38.0) < 1e-9  # type: ignore[operator]
    assert got.note == "1 of 2 rounds measured nothing"
    # no round with both sides: nothing measured, and why
    _run(store, "t2")
    scores.add(store, scores.Score("t2", "base", "sync", "k", time.time(), 40.0, 36.0, rounds=2))
    scores.add_round(store, scores.Round("t2", 1, "c1", "t2", None, 30.0))
    empty = scores.complete_rounds(store, "t2")
    assert empty.measured_ms is None and empty.error_pct is None
    assert empty.note == "no round measured the step both without and with the knob"


def test_an_interrupted_try_in_rounds_is_scored_from_the_rounds_it_ran(tmp_path: Path) -> None:
    """`gh-run scores --refresh` after a `try --rounds 3` stopped after its second round: the
    rounds measured score it, and the note says one was not run."""
    from orchestrator.runs import trial

    store = Store(tmp_path)
    for rid in ("base", "t1", "c1", "c2", "r2"):
        _run(store, rid)
    s = scores.Score("t1", "base", "data-loader", "k", time.time(), 100.0, 60.0, rounds=3)
    scores.add(store, s)
    scores.add_round(store, scores.Round("t1", 1, "c1", "t1", 90.0, 54.0))
    scores.add_round(store, scores.Round("t1", 2, "c2", "r2", 110.0, 66.0))
    got = trial.finish_rounds(store, tmp_path, scores.get(store, "t1"), timeout=0)
    assert got is not None and got.rounds == 2
    assert abs(got.measured_ms - 60.0) < 1e-9  # type: ignore[operator]
    assert got.note == "1 of 3 rounds were not run"
    assert "2 rounds, each against the run again without it: 60.0-60.0" in trial.sentence(got)
