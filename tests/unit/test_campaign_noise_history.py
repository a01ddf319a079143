"""The canary's judgement replayed on a recorded history (issue 30): the nights of one
bench/campaign_noise.sh run on the dev cluster, 4 ordinary nights from an empty history
beside a bursty load (every 2-5 s a random number, 0 to 4, of busy loops), then a night with
data-bound's item cost raised from 20 to 40 (tests/data/campaign_noise/, its README says how
it was made). Each night's metrics, as measured, go into a state store and are judged again,
night after night, by the shipped campaigns/canary.yaml through evaluate() and explain(), and
the verdicts recorded as finish() records them: a deterministic form of the bench's claim.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.campaign import explain, load_campaign, plan
from orchestrator.campaign.results import CampaignResult, evaluate
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store
from tests.conftest import REPO

RECORDED = REPO / "tests" / "data" / "campaign_noise" / "bursty.json"
CANARY = REPO / "campaigns" / "canary.yaml"


def _nights() -> list[dict[str, Any]]:
    nights: list[dict[str, Any]] = json.loads(RECORDED.read_text())["nights"]
    return nights


def _replay(
    store: Store, home: Path, path: Path, nights: list[dict[str, Any]] | None = None
) -> list[CampaignResult]:
    results = []
    campaign = load_campaign(path)
    for night in _nights() if nights is None else nights:
        cid = plan(store, campaign, path, home, "local")
        for name, run in db.runs_of(store, cid).items():
            store.update_run(run.run_id, state="COMPLETED", event="recorded")
            store.put_metrics(run.run_id, night["variants"][name])
        result = evaluate(store, cid)
        explain.explain(store, home, result, {})
        db.set_verdicts(store, cid, {v.variant: v.regressed for v in result.variants})
        db.set_campaign(store, cid, state=result.state)
        results.append(result)
    return results


def test_the_recording_is_what_the_claim_is_about() -> None:
    """Four ordinary nights and a planted one, made beside the bursty load, every variant with
    its CPU figures and phases."""
    doc = json.loads(RECORDED.read_text())
    assert doc["load"].startswith("bursty load:") and doc["planted_item_cost"] == 40
    nights = _nights()
    assert [n["label"] for n in nights] == [f"ordinary-{i}" for i in range(1, 5)] + ["planted"]
    for n in nights:
        assert len(n["variants"]) == 7
        for m in n["variants"].values():
            assert m["step_cpu_relative"] > 0 and m["step_cpu_time_s"] > 0
            assert m["phase_cpu_s.data"] > 0 and m["phase_cpu_relative.data"] > 0


def test_the_canary_is_quiet_on_ordinary_nights_and_catches_the_planted_one(
    gh_home: Path,
) -> None:
    results = _replay(Store(gh_home), gh_home, CANARY)
    ordinary, planted = results[:4], results[4]
    for i, r in enumerate(ordinary):
        assert r.state == db.PASSED and not r.regressions, (i, r.regressions)
        rules = {f.rule for v in r.variants for f in v.findings}
        assert rules == ({"warm-up"} if i < 3 else {"band"}), (i, rules)
    assert [(f.variant, f.metric, f.rule) for f in planted.regressions] == [
        ("data-bound", "step_cpu_relative", "band")
    ]
    (finding,) = planted.regressions
    assert finding.value is not None and finding.baseline is not None
    assert finding.value > 1.25 * finding.baseline
    (bound,) = [v for v in planted.variants if v.variant == "data-bound"]
    w = bound.what_changed
    assert w is not None and w.finding.startswith("data phase +"), w
    assert w.finding.endswith("data loading (tokenisation, collation) got slower")
    data = next(p for p in w.phases if p.name == "data")
    assert data.change_pct is not None and data.change_pct > 50
    # the baseline run compared with is the newest good night's
    assert bound.baseline_run_id in {v.run_id for v in ordinary[3].variants}


# Wall-time figures and how a load factor moves them (a slower step: more time, fewer tokens/s).
WALL = {"step_time_s": 1, "data_time_s": 1, "elapsed_s": 1, "tokens_per_s": -1}


def _loaded(nights: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """A stand-in for a harsher load than the recording's: every variant's wall-time figures
    of every night moved by a random factor of 1 to 8 (issue 30 measured 2.5-8x on busy
    nights); its CPU figures as recorded."""
    rng = random.Random(seed)
    out = []
    for night in nights:
        variants = {}
        for name, m in night["variants"].items():
            f = rng.uniform(1, 8)
            variants[name] = {
                k: (v * f ** WALL[k] if k in WALL and v is not None else v) for k, v in m.items()
            }
        out.append({**night, "variants": variants})
    return out


def _verdicts(results: list[CampaignResult]) -> list[list[tuple[str, str, float | None, bool]]]:
    return [
        [(f.variant, f.metric, f.value, f.regression) for v in r.variants for f in v.findings]
        for r in results
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_busier_machine_does_not_move_the_verdicts_and_would_have_moved_the_old_ones(
    gh_home: Path, tmp_path: Path, seed: int
) -> None:
    """The same nights with their wall times moved 1-8x: the canary's verdicts are the same,
    figure for figure. Issue 30's canary (wall time against fixed limits, +150 % step time,
    -60 % tokens/s, a night before the band judged against one good night) cries wolf on
    them: what the test would catch if wall time crept back into the judgement."""
    nights = _nights()
    loaded = _loaded(nights, seed)
    assert _verdicts(_replay(Store(gh_home), gh_home, CANARY, loaded)) == _verdicts(
        _replay(Store(tmp_path / "quiet"), tmp_path / "quiet", CANARY, nights)
    )
    doc = yaml.safe_load(CANARY.read_text())
    doc["job"] = str(REPO / "jobs" / "smoke_train.yaml")
    doc["name"] = "before"
    doc["thresholds"] = {"step_time_s": {"increase_pct": 150}, "tokens_per_s": {"decrease_pct": 60}}
    doc["include"][0]["thresholds"] = {}
    doc["baseline"]["band"]["warmup_factor"] = 1.0001  # ~ judged by the threshold alone
    before = tmp_path / "before.yaml"
    before.write_text(yaml.safe_dump(doc, sort_keys=False))
    results = _replay(Store(tmp_path / "old"), tmp_path / "old", before, loaded)
    assert sum(len(r.regressions) for r in results[:4]) >= 1
