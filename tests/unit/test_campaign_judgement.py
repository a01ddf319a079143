"""Issue 36, "A verdict never passes what it did not judge": a threshold, band or baseline
that cannot be evaluated is a failure of the judgement (its own state, UNJUDGED, exit 1, one
sentence naming the metric and why), never a pass. A campaign falls back to a figure that
measures the same thing only when its file says so (`fallback:`), and the report says which
figure judged.

The nights are put into a real state store as a campaign records them (runs COMPLETED, their
metrics as `collect_all` stores them) and judged by `evaluate`, as `finish` judges them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from orchestrator.campaign import load_campaign, plan, report
from orchestrator.campaign.finish import exit_code, verdict
from orchestrator.campaign.results import CampaignResult, evaluate
from orchestrator.core.errors import UserError
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store
from tests.conftest import REPO


def _file(tmp: Path, thresholds: dict[str, object], **over: object) -> Path:
    data: dict[str, object] = {
        "name": "steps",
        "job": str(REPO / "jobs" / "smoke.yaml"),
        "matrix": {"speed": {"fast": ["workload.env.STEP_MS=60"], "slow": ["workload.env.X=1"]}},
        "thresholds": thresholds,
    }
    data.update(over)
    path = tmp / "steps.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _night(
    store: Store, home: Path, path: Path, values: dict[str, dict[str, float]]
) -> CampaignResult:
    """One night: every run COMPLETED with `values[variant]` as its metrics, judged and
    recorded as `finish` records it."""
    cid = plan(store, load_campaign(path), path, home, "local")
    for name, run in db.runs_of(store, cid).items():
        store.update_run(run.run_id, state="COMPLETED", event="recorded", exit_code=0)
        if values.get(name):
            store.put_metrics(run.run_id, values[name])
    result = evaluate(store, cid)
    db.set_verdicts(store, cid, {v.variant: v.regressed for v in result.variants})
    db.set_campaign(store, cid, state=result.state)
    return result


def test_a_threshold_over_a_metric_nobody_measured_is_unjudged_not_passed(
    tmp_path: Path, gh_home: Path
) -> None:
    """The issue's night: `step_time_s: {increase_pct: 10}` over a job that writes no
    metrics.json: it said PASSED; it is UNJUDGED, exit 1, and says which metric and why."""
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    store = Store(gh_home)
    r = _night(store, gh_home, path, {})
    assert r.state == db.UNJUDGED
    assert exit_code(r) == 1
    assert "UNJUDGED (2 thresholds)" in verdict(r)
    assert len(r.unjudged) == 2 and not r.regressions
    for f in r.unjudged:
        assert f.metric == "step_time_s" and f.unjudged is not None
        assert "step_time_s was not measured" in f.unjudged
        assert "no metrics.json" in f.unjudged
        # the fix: the figure that measures the same thing, named as the file would say it
        assert "fallback: [step_time_mean_ms]" in f.unjudged
    # A night that could not be judged is no baseline for the next.
    r2 = _night(store, gh_home, path, {})
    assert r2.baseline_id is None and r2.state == db.UNJUDGED


def test_a_fallback_judges_only_when_the_file_allows_it_and_says_which_figure(
    tmp_path: Path, gh_home: Path
) -> None:
    """The same job with the fallback allowed: the traced steps' mean judges (in the primary
    metric's unit), the slowed variant (60 → 150 ms per step) regresses, and the finding and
    the report say which figure judged and why."""
    th = {"step_time_s": {"increase_pct": 10, "fallback": ["step_time_mean_ms"]}}
    path = _file(tmp_path, th)
    store = Store(gh_home)
    first = _night(
        store,
        gh_home,
        path,
        {"fast": {"step_time_mean_ms": 60.0}, "slow": {"step_time_mean_ms": 60.0}},
    )
    assert first.state == db.PASSED and not first.unjudged
    # the first night sets the baseline, and says so
    assert all(f.recorded for v in first.variants for f in v.findings)
    second = _night(
        store,
        gh_home,
        path,
        {"fast": {"step_time_mean_ms": 61.0}, "slow": {"step_time_mean_ms": 150.0}},
    )
    assert second.state == db.REGRESSED and exit_code(second) == 3
    (f,) = second.regressions
    assert (f.variant, f.metric, f.figure) == ("slow", "step_time_s", "step_time_mean_ms")
    assert f.value == pytest.approx(0.150) and f.baseline == pytest.approx(0.060)
    assert f.change is not None and f.change.startswith("+150.0%")
    assert f.figure_note is not None
    assert "step_time_s was not measured" in f.figure_note
    assert "thresholds.step_time_s.fallback" in f.figure_note
    out = report.write(store, second, tmp_path / "report")
    html = out["html"].read_text()
    md = out["md"].read_text().replace("\\", "")
    for text in (html, md):
        assert "judged by step_time_mean_ms" in text


def test_the_primary_figure_judges_when_both_nights_have_it(tmp_path: Path, gh_home: Path) -> None:
    th = {"step_time_s": {"increase_pct": 10, "fallback": ["step_time_mean_ms"]}}
    path = _file(tmp_path, th)
    store = Store(gh_home)
    both = {"step_time_s": 0.06, "step_time_mean_ms": 60.0}
    _night(store, gh_home, path, {"fast": both, "slow": both})
    r = _night(
        store,
        gh_home,
        path,
        {"fast": both, "slow": {"step_time_s": 0.2, "step_time_mean_ms": 61.0}},
    )
    (f,) = r.regressions
    assert f.figure == "step_time_s" and f.figure_note is None


def test_without_a_fallback_the_other_figure_is_never_used(tmp_path: Path, gh_home: Path) -> None:
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    store = Store(gh_home)
    traced = {"step_time_mean_ms": 60.0}
    r = _night(store, gh_home, path, {"fast": traced, "slow": traced})
    assert r.state == db.UNJUDGED
    assert all(f.figure is None and f.value is None for f in r.unjudged)


def test_a_fallback_must_measure_the_same_thing(tmp_path: Path) -> None:
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10, "fallback": ["gpu_idle_pct"]}})
    with pytest.raises(UserError) as exc:
        load_campaign(path)
    text = str(exc.value)
    assert "step_time_s.fallback" in text
    assert "gpu_idle_pct does not measure step time" in text
    assert "step_time_mean_ms" in text  # the fix: the figures that do


def test_a_pinned_baseline_that_lost_the_figure_is_unjudged(tmp_path: Path, gh_home: Path) -> None:
    store = Store(gh_home)
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    base = _night(store, gh_home, path, {"fast": {"step_time_s": 0.06}, "slow": {}})
    pinned = _file(
        tmp_path,
        {"step_time_s": {"increase_pct": 10}},
        baseline={"policy": "pinned", "campaign_id": base.campaign_id},
    )
    r = _night(
        store, gh_home, pinned, {"fast": {"step_time_s": 0.06}, "slow": {"step_time_s": 0.06}}
    )
    assert r.state == db.UNJUDGED and exit_code(r) == 1
    (f,) = r.unjudged
    assert f.variant == "slow" and f.unjudged is not None
    assert f"the pinned baseline {base.campaign_id} has no step_time_s" in f.unjudged


def test_a_baseline_value_that_is_nan_is_unjudged(tmp_path: Path, gh_home: Path) -> None:
    store = Store(gh_home)
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    first = _night(
        store, gh_home, path, {"fast": {"step_time_s": 0.06}, "slow": {"step_time_s": 0.06}}
    )
    # a good night whose value is NaN (written by an older gh-run, or by hand)
    store.put_metrics(first.variants[1].run_id, {"step_time_s": math.nan})
    r = _night(store, gh_home, path, {"fast": {"step_time_s": 0.06}, "slow": {"step_time_s": 0.06}})
    assert r.state == db.UNJUDGED
    (f,) = r.unjudged
    assert f.variant == "slow" and f.unjudged is not None and "NaN" in f.unjudged


def test_a_regression_outranks_an_unjudged_threshold(tmp_path: Path, gh_home: Path) -> None:
    store = Store(gh_home)
    path = _file(
        tmp_path, {"step_time_s": {"increase_pct": 10}, "tokens_per_s": {"decrease_pct": 5}}
    )
    both = {"step_time_s": 0.06, "tokens_per_s": 100.0}
    _night(store, gh_home, path, {"fast": both, "slow": both})
    r = _night(
        store, gh_home, path, {"fast": {"step_time_s": 0.2}, "slow": both}
    )  # fast: slower, and its throughput unmeasured
    assert r.state == db.REGRESSED and exit_code(r) == 3
    assert [f.metric for f in r.unjudged] == ["tokens_per_s"]
    words = verdict(r)
    assert "REGRESSED (1 regression)" in words and "UNJUDGED (1 threshold)" in words


def test_the_report_says_what_was_not_judged_and_why(tmp_path: Path, gh_home: Path) -> None:
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    store = Store(gh_home)
    r = _night(store, gh_home, path, {})
    out = report.write(store, r, tmp_path / "report")
    # Markdown escapes trace text's punctuation (`\_`): read it as it renders
    html, md = out["html"].read_text(), out["md"].read_text().replace("\\", "")
    for text in (html, md):
        assert "UNJUDGED" in text
        assert "not judged" in text
        assert "step_time_s was not measured" in text
    assert "no data yet" not in html
    assert '"unjudged"' in out["json"].read_text()


def test_a_failed_variant_is_failed_not_unjudged(tmp_path: Path, gh_home: Path) -> None:
    """A variant that did not complete has nothing to judge: its night is FAILED (exit 1)
    for that reason, and its thresholds are not counted as unjudged."""
    path = _file(tmp_path, {"step_time_s": {"increase_pct": 10}})
    store = Store(gh_home)
    cid = plan(store, load_campaign(path), path, gh_home, "local")
    runs = db.runs_of(store, cid)
    store.update_run(runs["fast"].run_id, state="COMPLETED", event="recorded", exit_code=0)
    store.put_metrics(runs["fast"].run_id, {"step_time_s": 0.06})
    store.update_run(runs["slow"].run_id, state="FAILED", event="recorded", exit_code=1)
    r = evaluate(store, cid)
    assert r.state == db.FAILED and exit_code(r) == 1
    assert not r.unjudged and [v.variant for v in r.failed] == ["slow"]


def test_a_campaign_is_judged_where_its_analyses_arrive(tmp_path: Path, gh_home: Path) -> None:
    """`analyze --on-cluster CAMPAIGN` gives one analysis per run (the reduce's); where they
    arrive the campaign is judged from them: a night left UNJUDGED for want of its traces'
    figures is judged again, its run reports written from the analyses, nothing read again."""
    from orchestrator.analysis import analyze_paths
    from orchestrator.campaign.finish import judge, judge_arrived

    path = _file(tmp_path, {"step_time_mean_ms": {"increase_pct": 10}})
    store = Store(gh_home)
    cid = plan(store, load_campaign(path), path, gh_home, "local")
    runs = db.runs_of(store, cid)
    for run in runs.values():
        store.update_run(run.run_id, state="COMPLETED", event="recorded", exit_code=0)
    before = judge(store, cid, gh_home, {})
    assert before.result.state == db.UNJUDGED and before.exit_code == 1
    # the reduce's analysis of each run (a real nsys export of a CPU job: 6 traced steps)
    trace = REPO / "tests" / "data" / "nsys_cpu" / "smoke-profiled.sqlite"
    arrived = {r.run_id: analyze_paths([trace], label=r.run_id) for r in runs.values()}
    after = judge_arrived(store, cid, gh_home, arrived)
    assert after.result.state == db.PASSED and after.exit_code == 0, after.result.unjudged
    assert db.get_campaign(store, cid).state == db.PASSED
    for v in after.result.variants:
        assert v.metrics["step_time_mean_ms"] == pytest.approx(50.92, abs=0.01)
        assert v.report and (after.paths["html"].parent / v.report).is_file()
