"""Issue 15, class 7 (patterns match whole strings; `.inf` thresholds refused; a NaN metric is
reported) and class 9 (thresholds on both sides of their boundary, in both directions)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.campaign import cron
from orchestrator.campaign.model import Campaign, Schedule, Threshold
from orchestrator.core.errors import UserError
from orchestrator.core.units import parse_mem_mib
from orchestrator.nsys.profile import ProfileSpec
from orchestrator.site.cluster import ClusterDefaults, Partition
from orchestrator.spec import yamlio
from orchestrator.spec.envvars import check_env_name
from orchestrator.spec.job import JobSpec, Resources

SPEC: dict[str, Any] = {"name": "ok", "workload": {"command": "true"}}

# Each: a validator, and a value it accepts. The same value plus a trailing newline must be
# refused: `$` (unlike fullmatch or \Z) matches before a final "\n".
CASES: list[tuple[str, Callable[[str], object], str]] = [
    ("env name", check_env_name, "FOO"),
    ("job name", lambda v: JobSpec.model_validate({**SPEC, "name": v}), "sft-1"),
    ("partition", lambda v: JobSpec.model_validate({**SPEC, "partition": v}), "gh"),
    ("account", lambda v: Resources(account=v), "proj1"),
    ("constraint", lambda v: Resources(constraint=v), "gh200&ib"),
    ("site account", lambda v: ClusterDefaults(account=v), "proj1"),
    (
        "env in spec",
        lambda v: JobSpec.model_validate(
            {**SPEC, "workload": {"command": "true", "env": {v: "x"}}}
        ),
        "FOO",
    ),
    (
        "secret name",
        lambda v: JobSpec.model_validate(
            {**SPEC, "workload": {"command": "true", "secret_env": [v]}}
        ),
        "HF_TOKEN",
    ),
    ("template", lambda v: Partition(template=v), "gh"),
    ("sbatch option", lambda v: Partition(sbatch_options=[v]), "--exclusive"),
    ("profile name", lambda v: ProfileSpec(tool="nsys", output=v), "rep"),
    ("cron", cron.CronExpr.parse, "0 2 * * *"),
    ("schedule cron", lambda v: Schedule(cron=v), "0 2 * * *"),
    (
        "campaign name",
        lambda v: Campaign.model_validate({"name": v, "job": "j.yaml", "include": [{"name": "a"}]}),
        "nightly",
    ),
    (
        "axis label",
        lambda v: Campaign.model_validate({"name": "c", "job": "j.yaml", "matrix": {"a": {v: []}}}),
        "small",
    ),
    (
        "campaign id",
        lambda v: Campaign.model_validate(
            {
                "name": "c",
                "job": "j.yaml",
                "include": [{"name": "a"}],
                "baseline": {"policy": "pinned", "campaign_id": v},
            }
        ),
        "c-20250101-020000-abcd",
    ),
]


@pytest.mark.parametrize(("what", "check", "good"), CASES, ids=[c[0] for c in CASES])
def test_trailing_newline_is_refused(what: str, check: Callable[[str], object], good: str) -> None:
    check(good)
    with pytest.raises((ValueError, ValidationError, UserError)):
        check(good + "\n")


def test_cron_with_a_second_line_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        cron.CronExpr.parse("0 2 * * *\n* * * * * rm -rf ~")
    assert Schedule(cron="0  2 *\t* *").cron == "0 2 * * *"


def test_run_id_and_memory_whole_strings() -> None:
    from orchestrator.cli.jobs import _run_id

    assert _run_id("smoke-1") == "smoke-1"
    with pytest.raises(UserError):
        _run_id("smoke-1\n")
    assert parse_mem_mib("16G") == 16384
    with pytest.raises(ValueError):
        parse_mem_mib("16G\nX")


@pytest.mark.parametrize("bad", [".inf", "-.inf", ".nan", ".NaN", ".Inf"])
@pytest.mark.parametrize(
    "key", ["increase_pct", "decrease_pct", "increase_points", "decrease_points"]
)
def test_infinite_thresholds_are_refused(key: str, bad: str) -> None:
    doc = yamlio.parse_text(f"{key}: {bad}\n", "c.yaml")
    with pytest.raises(UserError) as exc:
        yamlio.to_model(doc, Threshold)
    text = str(exc.value)
    assert text.startswith(f"c.yaml:1: {key}: ")
    assert "finite number" in text or "> 0" in text
    assert "; " in text  # a fix follows


# Thresholds on both sides of their boundary. Base 100 (percent) and 50 (points).
BOUNDARY = [
    # (threshold, value, base, regression?)
    ({"increase_pct": 5}, 105.0, 100.0, False),
    ({"increase_pct": 5}, 105.5, 100.0, True),
    ({"increase_pct": 5}, 94.0, 100.0, False),
    ({"decrease_pct": 5}, 95.0, 100.0, False),
    ({"decrease_pct": 5}, 94.5, 100.0, True),
    ({"decrease_pct": 5}, 110.0, 100.0, False),  # an increase never crosses a decrease limit
    ({"decrease_pct": 5}, 200.0, 100.0, False),
    ({"increase_points": 3}, 53.0, 50.0, False),
    ({"increase_points": 3}, 53.5, 50.0, True),
    ({"increase_points": 3}, 40.0, 50.0, False),
    ({"decrease_points": 3}, 47.0, 50.0, False),
    ({"decrease_points": 3}, 46.5, 50.0, True),
    ({"decrease_points": 3}, 60.0, 50.0, False),  # an increase never crosses a decrease limit
    ({"decrease_points": 3}, 99.0, 50.0, False),
]


@pytest.mark.parametrize(("limits", "value", "base", "regressed"), BOUNDARY)
def test_threshold_boundaries(
    limits: dict[str, float], value: float, base: float, regressed: bool
) -> None:
    why = Threshold(**limits).crossed(value, base)
    assert (why is not None) is regressed, why
    if regressed:
        sign = "-" if next(iter(limits)).startswith("decrease") else "+"
        assert why is not None and why.startswith(sign)


def test_nan_metric_is_a_reported_regression(tmp_path: Path) -> None:
    from orchestrator.campaign.results import evaluate
    from orchestrator.store import campaigns as db
    from orchestrator.store.db import Run, Store

    store = Store(tmp_path / "home")
    campaign = Campaign.model_validate(
        {
            "name": "nan",
            "job": "j.yaml",
            "include": [{"name": "v"}],
            "thresholds": {"step_time_s": {"increase_pct": 5}, "tokens_per_s": {"decrease_pct": 5}},
        }
    )
    ids = []
    for i, (step, tokens) in enumerate([(1.0, math.nan), (math.nan, 100.0)]):
        cid = f"nan-2025010{i + 1}-020000-abc{i}"
        run = Run(
            run_id=f"{cid}.v",
            name="nan",
            job_name=f"ghr-{cid}.v",
            spec_path=None,
            spec_json="{}",
            cluster="dev",
            partition="gh",
            executor="local",
            run_dir=str(tmp_path / cid),
            state="COMPLETED",
            campaign_id=cid,
            variant="v",
            created_at=1000.0 + i,
        )
        group = db.GroupRecord(
            campaign_id=cid,
            group_index=0,
            job_name=f"ghr-{cid}",
            script="s",
            size=1,
            is_array=False,
            state=db.G_SUBMITTED,
        )
        variant = db.VariantRecord(
            campaign_id=cid,
            variant="v",
            overrides_json="[]",
            group_index=0,
            array_index=0,
            run_id=run.run_id,
        )
        db.write_plan(store, _record(cid, campaign, 1000.0 + i), [group], [variant], [run])
        store.put_metrics(run.run_id, {"step_time_s": step, "tokens_per_s": tokens})
        if i == 0:
            db.set_campaign(store, cid, state=db.PASSED)
        ids.append(cid)
    assert math.isnan(store.metrics(f"{ids[1]}.v")["step_time_s"] or 0.0)
    result = evaluate(store, ids[1])
    found = {f.metric: f for f in result.variants[0].findings}
    assert found["step_time_s"].regression  # NaN now: never "not a regression"
    assert "NaN" in (found["step_time_s"].change or "")
    assert not found["tokens_per_s"].regression  # NaN in the baseline: said, not blamed
    assert "baseline" in (found["tokens_per_s"].change or "")
    assert result.state == db.REGRESSED


def _record(cid: str, campaign: Campaign, created: float) -> Any:
    from orchestrator.store import campaigns as db

    return db.CampaignRecord(
        campaign_id=cid,
        name=campaign.name,
        file=None,
        campaign_json=campaign.model_dump_json(),
        executor="local",
        state=db.SUBMITTED,
        created_at=created,
    )


def test_threshold_messages_and_small_bases() -> None:
    """Survivors of `make mutate`: what the message says, and a base between 0 and 1."""
    assert Threshold(increase_pct=5).crossed(0.6, 0.5) == "+20.0% (limit +5%)"
    assert Threshold(decrease_pct=5).crossed(0.4, 0.5) == "-20.0% (limit -5%)"
    assert Threshold(increase_points=3).crossed(55.0, 50.0) == "+5.00 points (limit +3)"
    assert Threshold(decrease_points=3).crossed(45.0, 50.0) == "-5.00 points (limit -3)"


def test_booleans_are_quoted_as_words() -> None:
    from orchestrator.render.scripts import shell_quote

    assert (shell_quote(True), shell_quote(False)) == ("true", "false")
