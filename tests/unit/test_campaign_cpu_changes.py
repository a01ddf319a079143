"""What changed, in the figures a busy machine does not move: a night judged on CPU time
(step_cpu_time_s) or on CPU time in units of a reference work (step_cpu_relative) is explained
by its phases measured the same way (the workload's --cpu-reference), taken from metrics.json;
histories written straight into a state store (no job runs), as in test_campaign_bands.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator.campaign import explain, load_campaign, plan
from orchestrator.campaign.cpu_changes import FIGURES, cpu_changes
from orchestrator.campaign.results import PHASE_SOURCES, evaluate, extract_metrics
from orchestrator.store import campaigns as db
from orchestrator.store.db import Run, Store
from tests.conftest import REPO

REF_S = 0.0007  # the reference work's CPU seconds in the good run
PHASE_KEY = PHASE_SOURCES["median_phase_cpu_relative"]
CPU_KEY = PHASE_SOURCES["median_phase_cpu_s"]
RELATIVE = {"step_cpu_relative"}


def _metrics(step: float, **phases: float) -> dict[str, float | None]:
    out: dict[str, float | None] = {"step_cpu_relative": step, "cpu_reference_s": REF_S}
    out.update({PHASE_KEY + k: v for k, v in phases.items()})
    return out


GOOD = _metrics(20.0, data=10.0, forward=3.0, backward=5.0, optimizer=1.2)


def test_a_heavier_data_phase_is_named_in_reference_units_shown_as_ms() -> None:
    run = _metrics(30.0, data=20.0, forward=3.0, backward=5.0, optimizer=1.2)
    w = cpu_changes(RELATIVE, GOOD, run, base_label="good", label="tonight")
    assert w is not None
    assert (
        w.finding == "data phase +100.0 %, step_cpu_relative +50.0 %: data loading (tokenisation,"
        " collation) got slower"
    )
    assert [p.name for p in w.phases] == [
        "step_cpu_relative",
        "data",
        "forward",
        "backward",
        "optimizer",
    ]
    step, data = w.phases[0], w.phases[1]
    # CPU ms at the good run's speed: reference units x the good run's reference time.
    assert step.baseline_ms == pytest.approx(14.0) and step.value_ms == pytest.approx(21.0)
    assert data.baseline_ms == pytest.approx(7.0) and data.change_pct == pytest.approx(100.0)
    assert w.step_change_pct == pytest.approx(50.0)
    assert (w.label, w.baseline_label, w.notes) == ("tonight", "good", [FIGURES[0].note])
    assert not w.kernels and not w.groups


def test_a_slower_backward_pass_is_named_and_a_new_phase_is_listed() -> None:
    run = _metrics(26.0, data=10.0, forward=3.0, backward=10.0, optimizer=1.2, host_snapshot=1.5)
    w = cpu_changes(RELATIVE, GOOD, run)
    assert w is not None
    assert w.finding == (
        "backward phase +100.0 %, step_cpu_relative +30.0 %: the backward pass got slower"
    )
    snap = next(p for p in w.phases if p.name == "host_snapshot")
    assert snap.baseline_ms is None and snap.change_pct is None


@pytest.mark.parametrize(
    ("run", "both_ways"),
    [
        ({k: v for k, v in GOOD.items() if not k.startswith(PHASE_KEY)}, True),  # no phases
        ({**GOOD, "step_cpu_relative": None}, True),
        # the good run's reference time turns units into ms: only its own is needed
        ({k: v for k, v in GOOD.items() if k != "cpu_reference_s"}, False),
        ({**GOOD, "cpu_reference_s": 0.0}, False),
    ],
)
def test_without_both_runs_measured_that_way_there_is_no_relative_comparison(
    run: dict[str, float | None], both_ways: bool
) -> None:
    assert cpu_changes(RELATIVE, run, GOOD) is None
    assert (cpu_changes(RELATIVE, GOOD, run) is None) is both_ways


def test_a_night_judged_on_cpu_time_is_explained_in_cpu_ms_and_the_ratio_comes_first() -> None:
    base = {"step_cpu_time_s": 0.014, CPU_KEY + "data": 0.007, CPU_KEY + "forward": 0.002}
    run = {"step_cpu_time_s": 0.0175, CPU_KEY + "data": 0.007, CPU_KEY + "forward": 0.0055}
    w = cpu_changes({"step_cpu_time_s"}, base, run)
    assert w is not None and w.notes == [FIGURES[1].note]
    assert w.finding == (
        "forward phase +175.0 %, step_cpu_time_s +25.0 %: the forward pass got slower"
    )
    assert w.phases[0].baseline_ms == pytest.approx(14.0) and w.phases[0].value_ms == 17.5
    # Not judged on it: nothing to say. Judged on both: the ratio, which also cancels drift.
    assert cpu_changes(RELATIVE, base, run) is None
    slow = _metrics(30.0, data=20.0, forward=3.0, backward=5.0, optimizer=1.2)
    both = cpu_changes({"step_cpu_time_s", *RELATIVE}, {**GOOD, **base}, {**slow, **run})
    assert both is not None and both.finding.startswith("data phase +100.0 %")


def test_metrics_json_phases_are_stored_one_key_each_and_odd_values_are_left_out(
    tmp_path: Path, gh_home: Path
) -> None:
    folder = tmp_path / "run" / "artifacts"
    folder.mkdir(parents=True)
    doc = {
        "median_step_cpu_relative": 20.5,
        "median_cpu_reference_s": 0.0008,
        "median_phase_cpu_relative": {
            "data": 10.0,
            "forward": 3,
            "odd": "x",
            "flag": True,
            "x" * 65: 1.0,
        },
        "median_phase_cpu_s": {"data": 0.007},
    }
    (folder / "metrics.json").write_text(json.dumps(doc))
    run = Run(
        run_id="r1",
        name="r1",
        job_name="r1",
        spec_path=None,
        spec_json="{}",
        cluster="dev",
        partition="gh",
        executor="local",
        run_dir=str(tmp_path / "run"),
    )
    values = extract_metrics(gh_home, run)
    assert values == {
        "step_cpu_relative": 20.5,
        "cpu_reference_s": 0.0008,
        PHASE_KEY + "data": 10.0,
        PHASE_KEY + "forward": 3.0,
        CPU_KEY + "data": 0.007,
    }
    (folder / "metrics.json").write_text(json.dumps({**doc, "median_phase_cpu_relative": [1]}))
    assert PHASE_KEY + "data" not in extract_metrics(gh_home, run)
    (folder / "metrics.json").write_text("[1, 2]")
    assert extract_metrics(gh_home, run) == {}


def _campaign(tmp: Path, watch: str) -> Path:
    path = tmp / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "relative",
                "job": str(REPO / "jobs" / "smoke.yaml"),
                "include": [{"name": "data-bound"}],
                "baseline": {"policy": "last-good", "band": {"nights": 6, "min_nights": 3}},
                "thresholds": {watch: {"increase_pct": 15}},
            },
            sort_keys=False,
        )
    )
    return path


def _night(
    store: Store, home: Path, path: Path, values: dict[str, float | None], state: str
) -> str:
    cid = plan(store, load_campaign(path), path, home, "local")
    for run in db.runs_of(store, cid).values():
        store.update_run(run.run_id, state="COMPLETED", event="constructed")
        store.put_metrics(run.run_id, values)
    db.set_campaign(store, cid, state=state)
    return cid


@pytest.mark.parametrize("watch", ["step_cpu_relative", "step_time_s"])
def test_a_night_judged_on_the_relative_figure_is_explained_in_it(
    tmp_path: Path, gh_home: Path, watch: str
) -> None:
    """The runs left no trace: judged on step_cpu_relative, what changed comes from their
    metrics; judged on wall time, there is nothing to explain it with."""
    store, path = Store(gh_home), _campaign(tmp_path, watch)
    for jitter in (1.05, 0.95, 1.0):  # the newest good night is the one compared with
        night = {k: (v * jitter if v is not None else None) for k, v in GOOD.items()}
        _night(store, gh_home, path, {**night, "step_time_s": 0.02 * jitter}, db.PASSED)
    slow = _metrics(30.0, data=20.0, forward=3.0, backward=5.0, optimizer=1.2)
    cid = _night(store, gh_home, path, {**slow, "step_time_s": 0.03}, db.PLANNED)
    result = evaluate(store, cid)
    assert [f.metric for f in result.regressions] == [watch]
    explain.explain(store, gh_home, result, {})
    w = result.variants[0].what_changed
    if watch == "step_time_s":
        assert w is None
        return
    assert w is not None and w.finding.startswith(
        f"data phase +100.0 %, {watch} +50.0 %: data loading"
    )
    assert w.label == result.variants[0].run_id
    assert w.baseline_label == result.variants[0].baseline_run_id
