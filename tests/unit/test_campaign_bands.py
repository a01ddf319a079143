"""Noise bands on histories known by construction: the band itself (median / MAD, outliers,
a quiet history's floor), the rule (outside the band AND past the threshold, in the bad
direction), too little history (said, and the single-night rule used), a slow trend,
repeats (the median of a night), band-width thresholds, the model's validation, and the
trend plot (failed and missing nights marked, never a point at zero).

Histories are written straight into a state store: each night is a planned campaign whose
runs are set COMPLETED with chosen metrics (no job runs)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from orchestrator.campaign import bands, load_campaign, plan
from orchestrator.campaign.model import Band, Threshold, expand, repeat_of
from orchestrator.campaign.report import band_svg
from orchestrator.campaign.results import Finding, NightPoint, evaluate
from orchestrator.core.errors import UserError
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store
from tests.conftest import REPO

BAND = Band(nights=10, min_nights=3, width=4.0, floor_pct=2.0)
STEP = Threshold(increase_pct=20)


def test_band_is_the_median_and_mad_and_ignores_an_outlier() -> None:
    b = bands.learn([1.0, 1.02, 0.98, 1.01, 0.99, 5.0], BAND)
    assert b is not None
    assert b.center == pytest.approx(1.005)
    # MAD of |x - 1.005| = (0.005, 0.015, 0.025, 0.005, 0.015, 3.995) → median 0.015
    assert b.sigma == pytest.approx(1.4826 * 0.015)
    assert b.half_width == pytest.approx(4 * 1.4826 * 0.015)
    assert b.samples == 6 and b.low < 1.0 < b.high < 1.2  # the 5.0 night does not widen it


def test_a_quiet_history_gets_the_floor_width_and_nan_is_left_out() -> None:
    b = bands.learn([2.0, 2.0, 2.0, math.nan], BAND)
    assert b is not None and b.sigma == 0 and b.half_width == pytest.approx(0.04)
    assert bands.learn([math.nan], BAND) is None


def test_a_steady_negative_metric_gets_the_floor_width_of_its_size() -> None:
    """Noise bands around a negative centre (issue 43): the floor is a share of the centre's
    size, so a steady series at -2.0 gets a half-width of 0.04 (2 %), as one at +2.0 does; a
    signed centre would give it none, and any change of a steady negative metric (a
    difference, a slope, a change against a baseline) would alarm."""
    b = bands.learn([-2.0] * 4, BAND)
    assert b is not None and b.sigma == 0
    assert b.half_width == pytest.approx(0.04)
    assert (b.low, b.high) == (pytest.approx(-2.04), pytest.approx(-1.96))
    widths = Threshold(decrease_widths=2, increase_widths=2)
    assert bands.judge(-2.01, b, widths) is None  # jitter inside the band: quiet
    assert bands.judge(-2.2, b, widths) is not None  # five half-widths down: caught


@pytest.mark.parametrize(
    ("value", "regressed"),
    [
        (1.10, False),  # outside the band, not past +20%: a harmless shift
        (1.25, True),  # outside the band and past +20%
        (0.70, False),  # far outside, but the good direction
    ],
)
def test_regression_needs_outside_the_band_and_past_the_threshold(
    value: float, regressed: bool
) -> None:
    b = bands.learn([1.0, 1.01, 0.99, 1.0], BAND)
    assert b is not None and b.high < 1.10
    assert (bands.judge(value, b, STEP) is not None) is regressed


def test_a_wide_band_keeps_a_threshold_crossing_quiet() -> None:
    """A noisy history: +30% is past the threshold but inside the noise."""
    b = bands.learn([1.0, 1.3, 0.8, 1.2, 0.9, 1.1], BAND)
    assert b is not None and b.high > 1.3 * b.center
    assert bands.judge(1.3 * b.center, b, STEP) is None


def test_width_thresholds_count_band_half_widths() -> None:
    th = Threshold(decrease_widths=2)
    b = bands.learn([100.0, 101.0, 99.0, 100.0], Band(width=1, floor_pct=0))
    assert b is not None
    assert bands.judge(b.center - 1.5 * b.half_width, b, th) is None
    why = bands.judge(b.center - 2.5 * b.half_width, b, th)
    assert why is not None and "band widths" in why


def test_band_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="min_nights 5 is more than nights 4"):
        Band(nights=4, min_nights=5)
    with pytest.raises(ValueError):
        Band(width=math.inf)
    with pytest.raises(ValueError):
        Threshold(increase_widths=math.nan)


# -- evaluate() against a constructed history ---------------------------------------------


def _file(tmp: Path, **over: object) -> Path:
    data: dict[str, object] = {
        "name": "noisy",
        "job": str(REPO / "jobs" / "smoke.yaml"),
        "include": [{"name": "a"}, {"name": "b"}],
        "baseline": {"policy": "last-good", "band": {"nights": 6, "min_nights": 3}},
        "thresholds": {"step_time_s": {"increase_pct": 20}},
    }
    data.update(over)
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _night(
    store: Store,
    home: Path,
    path: Path,
    values: dict[str, float | list[float] | None],
    state: str = db.PASSED,
    failed: tuple[str, ...] = (),
    flagged: tuple[str, ...] | None = None,
) -> str:
    """One night: every run COMPLETED (or FAILED) with its step_time_s, then the state and,
    with `flagged`, each variant's verdict as finish() records it."""
    cid = plan(store, load_campaign(path), path, home, "local")
    names = repeat_of(load_campaign(path))
    for name, run in db.runs_of(store, cid).items():
        variant = names[name]
        v = values.get(variant)
        if isinstance(v, list):
            v = v[int(name.rsplit(".r", 1)[1]) - 1]
        store.update_run(
            run.run_id, state="FAILED" if variant in failed else "COMPLETED", event="constructed"
        )
        if v is not None:
            store.put_metrics(run.run_id, {"step_time_s": v})
    db.set_campaign(store, cid, state=state)
    if flagged is not None:
        db.set_verdicts(store, cid, {n: names[n] in flagged for n in names})
    return cid


def _finding(store: Store, cid: str, variant: str) -> Finding:
    res = evaluate(store, cid)
    return next(f for v in res.variants if v.variant == variant for f in v.findings)


def test_a_night_in_the_warm_up_is_recorded_not_judged(tmp_path: Path, gh_home: Path) -> None:
    """Two good nights, the band needs three: +30 % (past the +20 % threshold, which one
    night's limit would have flagged) is recorded and says why; the night then teaches the
    band like any good night."""
    store, path = Store(gh_home), _file(tmp_path)
    _night(store, gh_home, path, {"a": 1.0, "b": 2.0})
    _night(store, gh_home, path, {"a": 1.2, "b": 2.0})
    cid = _night(store, gh_home, path, {"a": 1.43, "b": 2.0}, state=db.PLANNED)
    res = evaluate(store, cid)
    f = next(f for v in res.variants if v.variant == "a" for f in v.findings)
    assert f.rule == "warm-up" and not f.regression, f
    assert f.baseline == pytest.approx(1.1)  # the median of the good nights so far
    assert f.change == "+30.0 % against the median of 2 good nights"
    assert f.note == (
        "2 good nights of history, the band needs 3: recorded, not judged (flagged only "
        "beyond x3 of the good nights' median)"
    )
    assert res.state == db.PASSED and "in its warm-up" in res.baseline_note
    db.set_campaign(store, cid, state=res.state)
    db.set_verdicts(store, cid, {"a": False, "b": False})
    # Three good nights now, the +30 % one among them: the band is learned from all three.
    cid = _night(store, gh_home, path, {"a": 1.2, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.rule == "band" and f.band_nights == 3 and f.baseline == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("threshold", "past", "value", "flagged"),
    [
        ({"increase_pct": 20}, [1.0, 1.0], 2.9, False),  # 2.9x: load can do that
        ({"increase_pct": 20}, [1.0, 1.0], 3.2, True),  # beyond 3x: no noise does that
        ({"increase_pct": 20}, [1.0, 1.0], 0.2, False),  # the good direction
        ({"decrease_pct": 20}, [300.0, 330.0], 110.0, False),  # /2.9
        ({"decrease_pct": 20}, [300.0, 330.0], 90.0, True),  # /3.5
        ({"increase_points": 3}, [0.5, 0.5], 1.8, False),  # 3.6x, but 1.3 points: noise
        ({"increase_points": 3}, [0.5, 0.5], 9.0, True),  # 18x and 8.5 points
        ({"increase_points": 3}, [0.0, 0.0], 2.5, False),  # from 0: only points can say
        ({"increase_points": 3}, [0.0, 0.0], 4.0, True),
        ({"increase_widths": 2}, [1.0, 1.0], 3.5, True),  # no band to count widths in
    ],
)
def test_the_warm_up_flags_only_a_change_beyond_any_plausible_noise(
    tmp_path: Path,
    gh_home: Path,
    threshold: dict[str, float],
    past: list[float],
    value: float,
    flagged: bool,
) -> None:
    store = Store(gh_home)
    path = _file(tmp_path, thresholds={"step_time_s": threshold})
    for v in past:
        _night(store, gh_home, path, {"a": v, "b": 2.0})
    cid = _night(store, gh_home, path, {"a": value, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.rule == "warm-up" and f.regression is flagged, f
    if flagged:
        assert f.change is not None and ("beyond" in f.change or "limit +3" in f.change)


def test_the_warm_up_factor_is_a_setting_and_the_first_night_only_records(
    tmp_path: Path, gh_home: Path
) -> None:
    store = Store(gh_home)
    band = {"nights": 6, "min_nights": 3, "warmup_factor": 1.5}
    path = _file(tmp_path, baseline={"policy": "last-good", "band": band})
    cid = _night(store, gh_home, path, {"a": 1.0, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.rule == "warm-up" and not f.regression and f.baseline is None and f.change is None
    assert f.note is not None and f.note.startswith("0 good nights of history")
    db.set_campaign(store, cid, state=db.PASSED)
    cid = _night(store, gh_home, path, {"a": 1.6, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.regression and f.change is not None and f.change.startswith("x1.60 (beyond x1.5")
    with pytest.raises(ValueError, match="warmup_factor"):
        Band(warmup_factor=1.0)
    with pytest.raises(ValueError, match="warmup_factor"):
        Band(warmup_factor=math.inf)


def test_a_nan_in_the_warm_up_is_a_regression(tmp_path: Path, gh_home: Path) -> None:
    store, path = Store(gh_home), _file(tmp_path)
    _night(store, gh_home, path, {"a": 1.0, "b": 2.0})
    cid = _night(store, gh_home, path, {"a": math.nan, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.rule == "warm-up" and f.regression and f.change is not None and "NaN" in f.change


def test_jitter_is_quiet_and_a_slowdown_is_caught_once_history_exists(
    tmp_path: Path, gh_home: Path
) -> None:
    store, path = Store(gh_home), _file(tmp_path)
    for a, b in [(1.0, 2.0), (1.15, 2.1), (0.9, 1.9), (1.1, 2.05), (0.95, 1.95)]:
        _night(store, gh_home, path, {"a": a, "b": b})
    # +18% on a, +8% on b: jitter of this history, no alarm.
    cid = _night(store, gh_home, path, {"a": 1.18, "b": 2.16}, state=db.PLANNED)
    res = evaluate(store, cid)
    assert res.state == db.PASSED and not res.regressions
    fa = next(f for v in res.variants if v.variant == "a" for f in v.findings)
    assert fa.rule == "band" and fa.band_nights == 5 and fa.baseline == pytest.approx(1.0)
    assert fa.band_low is not None and fa.band_high is not None
    assert fa.band_low < 1.0 < 1.18 < fa.band_high
    # +40% on b: caught; the good run compared with is the newest night's.
    cid = _night(store, gh_home, path, {"a": 1.0, "b": 2.8}, state=db.PLANNED)
    res = evaluate(store, cid)
    assert [(f.variant, f.metric) for f in res.regressions] == [("b", "step_time_s")]
    assert res.state == db.REGRESSED
    newest = db.list_campaigns(store, "noisy", 10)
    good = next(c for c in newest if c.state == db.PASSED)
    vb = next(v for v in res.variants if v.variant == "b")
    assert vb.baseline_run_id == db.runs_of(store, good.campaign_id)["b"].run_id


def test_a_regressed_or_failed_night_does_not_teach_the_band(tmp_path: Path, gh_home: Path) -> None:
    store, path = Store(gh_home), _file(tmp_path)
    for _ in range(3):
        _night(store, gh_home, path, {"a": 1.0, "b": 2.0})
    _night(store, gh_home, path, {"a": 3.0, "b": 2.0}, state=db.REGRESSED)
    _night(store, gh_home, path, {"a": 3.0, "b": 2.0}, state=db.FAILED, failed=("b",))
    cid = _night(store, gh_home, path, {"a": 3.0, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert f.regression and f.band_nights == 3


def test_a_variant_learns_from_nights_where_only_another_variant_regressed(
    tmp_path: Path, gh_home: Path
) -> None:
    """A noisy variant's alarms must not starve a steady one of history."""
    store, path = Store(gh_home), _file(tmp_path)
    for _ in range(3):
        _night(store, gh_home, path, {"a": 1.0, "b": 9.0}, state=db.REGRESSED, flagged=("b",))
    cid = _night(store, gh_home, path, {"a": 1.01, "b": 2.0}, state=db.PLANNED)
    fa, fb = _finding(store, cid, "a"), _finding(store, cid, "b")
    assert fa.rule == "band" and fa.band_nights == 3 and not fa.regression
    assert fb.rule == "warm-up" and fb.note is not None and fb.note.startswith("0 good nights")


def test_an_include_holds_its_variant_to_its_own_limits(tmp_path: Path, gh_home: Path) -> None:
    store = Store(gh_home)
    path = _file(
        tmp_path,
        include=[
            {"name": "a", "thresholds": {"step_time_s": {"increase_pct": 5}}},
            {"name": "b"},
        ],
    )
    for _ in range(3):
        _night(store, gh_home, path, {"a": 1.0, "b": 1.0})
    cid = _night(store, gh_home, path, {"a": 1.1, "b": 1.1}, state=db.PLANNED)
    assert _finding(store, cid, "a").regression  # +10%: past its own +5%, outside the band
    assert not _finding(store, cid, "b").regression  # the campaign's +20% holds b


def test_an_include_may_drop_a_campaign_limit_with_null(tmp_path: Path, gh_home: Path) -> None:
    """A variant whose figure the machine's drift moves is not judged on it (its own, steadier
    figure holds it), while the others still are."""
    store = Store(gh_home)
    path = _file(
        tmp_path, include=[{"name": "a", "thresholds": {"step_time_s": None}}, {"name": "b"}]
    )
    for _ in range(3):
        _night(store, gh_home, path, {"a": 1.0, "b": 1.0})
    cid = _night(store, gh_home, path, {"a": 5.0, "b": 5.0}, state=db.PLANNED)
    res = evaluate(store, cid)
    va, vb = res.variants
    assert va.findings == [] and va.metrics["step_time_s"] == 5.0  # measured, not judged
    assert [f.metric for f in res.regressions] == ["step_time_s"] and vb.regressed
    bad = _file(tmp_path, include=[{"name": "a", "thresholds": {"step_tme_s": None}}])
    with pytest.raises(UserError, match="unknown metric step_tme_s"):
        load_campaign(bad)


def test_the_band_follows_a_slow_trend(tmp_path: Path, gh_home: Path) -> None:
    """A drift of 2% a night over 10 nights: the band of the last 4 moves with it."""
    store, path = (
        Store(gh_home),
        _file(tmp_path, baseline={"band": {"nights": 4, "min_nights": 3, "width": 4}}),
    )
    for i in range(10):
        _night(store, gh_home, path, {"a": 1.0 * 1.02**i, "b": 2.0})
    cid = _night(store, gh_home, path, {"a": 1.02**10, "b": 2.0}, state=db.PLANNED)
    f = _finding(store, cid, "a")
    assert not f.regression
    assert f.baseline == pytest.approx((1.02**7 + 1.02**8) / 2)


def test_repeats_run_each_variant_n_times_and_a_night_is_their_median(
    tmp_path: Path, gh_home: Path
) -> None:
    path = _file(tmp_path, repeats=3)
    assert [(v.name, v.variant, v.repeat) for v in expand(load_campaign(path))][:3] == [
        ("a.r1", "a", 1),
        ("a.r2", "a", 2),
        ("a.r3", "a", 3),
    ]
    store = Store(gh_home)
    for _ in range(3):
        _night(store, gh_home, path, {"a": [1.0, 1.05, 0.95], "b": [2.0, 2.0, 2.1]})
    # One wild repeat (5.0) is outvoted by the median of three.
    cid = _night(store, gh_home, path, {"a": [1.0, 5.0, 1.02], "b": [2.0, 2.0, 2.0]}, db.PLANNED)
    res = evaluate(store, cid)
    va = next(v for v in res.variants if v.variant == "a")
    assert va.metrics["step_time_s"] == pytest.approx(1.02) and len(va.run_ids) == 3
    assert not res.regressions
    assert [v.variant for v in res.variants] == ["a", "b"]


def test_width_thresholds_need_a_band(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        baseline={"policy": "last-good"},
        thresholds={"step_time_s": {"increase_widths": 2}},
    )
    with pytest.raises(UserError, match=r"band widths need a band; add baseline\.band"):
        load_campaign(path)


def test_a_pinned_baseline_has_no_band(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        baseline={"policy": "pinned", "campaign_id": "noisy-20260101-000000-abcd", "band": {}},
    )
    with pytest.raises(UserError, match=r"use policy last-good with band, or remove band"):
        load_campaign(path)


def test_the_trend_marks_failed_and_missing_nights_and_draws_the_band() -> None:
    nights = [
        ("n1", NightPoint(value=1.0, state="COMPLETED")),
        ("n2", NightPoint(value=None, state="FAILED")),
        ("n3", NightPoint(value=None, state="ABSENT")),
        ("n4", NightPoint(value=1.1, state="COMPLETED")),
        ("n5", NightPoint(value=1.6, state="COMPLETED")),
    ]
    svg = str(
        band_svg(nights, "a<b: step_time_s", band=(0.9, 1.2), regressed=True, metric="step_time_s")
    )
    assert svg.startswith("<svg") and "a&lt;b" in svg and "href" not in svg
    assert "n2: FAILED" in svg and "n3: not run" in svg
    assert "band 900.00 ms..1.200 s" in svg  # in the metric's unit
    # the line breaks at the missing nights: one segment, n4 → n5; five nights, three points
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 3
    assert 'fill="#d62728"><title>n5: 1.600 s' in svg
