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
