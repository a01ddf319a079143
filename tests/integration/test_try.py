"""`gh-run try` end to end (issue 41 item 3), on the REAL dev SLURM cluster and the local executor
(nothing mocked: sbatch, sacct, submitit, bash under the supervisor, the collection with its
checksums, the state store). The job's workload is the STAND-IN loop
(tests/fixtures/standin_loop.py: an nsys-schema export written by a script, since this machine
has no GPU), run as a job with its knobs as flags: `--num-workers 0` with 12 ms of loading a
step on the main thread (4 workers then keep up with the step). Its first finding is the data
loader; `try` resubmits the run's spec.lock.yaml with `--num-workers 4`, tracks it, collects it,
analyses it and keeps the score: predicted against measured within 10 % (the stand-in's workers
behave as the projection assumes: this checks the plumbing and the replay, not the knob's
constants, which the held-out GPU pairs of tests/unit/test_critical_path.py and
test_projection_pairs_h200.py check). A finding whose knob is no spec field is refused in one
sentence, exit 2.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.store import scores
from orchestrator.store.db import Store

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


def _spec(tmp_path: Path, *args: str) -> Path:
    spec = {
        "name": "standin-try",
        "cluster": "dev",
        "partition": "gh",
        "resources": {"nodes": 1, "cpus_per_task": 1, "mem": "1G", "time": "00:03:00"},
        "container": {"runtime": "none"},
        "workload": {
            "kind": "command",
            "command": sys.executable,
            "args": [str(REPO / "tests" / "fixtures" / "standin_loop.py"), *args],
        },
        "artifacts": {"include": ["*.sqlite", "metrics.json"]},
    }
    path = tmp_path / "standin.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("executor", ["slurm", "local"])
def test_try_runs_the_knob_and_scores_the_projection(
    dev_cluster, cli, gh_home: Path, tmp_path: Path, executor: str
) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, "--num-workers", "0", "--load-ms", "12")
    res = cli("submit", str(spec), "--executor", executor, "--wait", "--timeout", "240",
              timeout=300)  # fmt: skip
    assert res.rc == 0, res.text
    base = Store(gh_home).find_run("last")
    shown = cli("analyze", base.run_id)
    assert shown.rc == 0, shown.text
    assert "advice data-loader" in shown.out and "projected step" in shown.out

    res = cli("try", base.run_id, "--executor", executor, "--timeout", "240", timeout=300)
    assert res.rc == 0, res.text
    assert "trying: --num-workers 4" in res.out, res.out
    store = Store(gh_home)
    kept = scores.all_scores(store)
    assert len(kept) == 1
    s = kept[0]
    assert s.base_run_id == base.run_id and s.rule == "data-loader"
    assert s.knob == "workload.args.2='4'"
    tried = store.get_run(s.try_run_id)
    assert tried.state == "COMPLETED" and tried.executor == executor
    assert yaml.safe_load(tried.spec_json)["workload"]["args"][1:3] == ["--num-workers", "4"]
    assert s.predicted_ms is not None and s.measured_ms is not None and s.error_pct is not None
    assert abs(s.error_pct) <= 10.0, s
    assert f"measured {s.measured_ms:.1f} ms" in res.out

    listed = cli("scores")
    assert listed.rc == 0, listed.text
    assert "data-loader: 1 of 1 projections within 10 %" in listed.out


def test_try_in_rounds_runs_the_run_again_between_its_tries(
    dev_cluster, cli, gh_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """`--rounds 2` on the dev cluster: the run's spec without the knob, then with it, twice,
    each job submitted once the one before it has ended; the score is the base run's step times
    the rounds' mean ratio, with their spread, and each round is kept. `--no-wait` with rounds
    is refused before anything is submitted."""
    spec = _spec(tmp_path, "--num-workers", "0", "--load-ms", "12")
    res = cli("submit", str(spec), "--executor", "slurm", "--wait", "--timeout", "240",
              timeout=300)  # fmt: skip
    assert res.rc == 0, res.text
    base = Store(gh_home).find_run("last")
    refused = cli("try", base.run_id, "--rounds", "2", "--no-wait")
    assert refused.rc == 2 and "drop --no-wait" in refused.err, refused.text
    assert len(Store(gh_home).list_runs()) == 1

    res = cli("try", base.run_id, "--rounds", "2", "--executor", "slurm", "--timeout", "480",
              timeout=560)  # fmt: skip
    assert res.rc == 0, res.text
    assert "round 2/2: " in res.out and "2 rounds, each against the run again without it" in res.out
    store = Store(gh_home)
    (s,) = scores.all_scores(store)
    assert s.rounds == 2 and s.rule == "data-loader" and s.base_run_id == base.run_id
    assert s.measured_ms is not None and s.error_pct is not None and abs(s.error_pct) <= 10, s
    assert s.measured_low_ms is not None and s.measured_high_ms is not None
    assert s.measured_low_ms <= s.measured_ms <= s.measured_high_ms
    rounds = scores.rounds_of(store, s.try_run_id)
    assert [r.round for r in rounds] == [1, 2] and rounds[0].round_run_id == s.try_run_id
    order = [store.get_run(x) for r in rounds for x in (r.control_run_id, r.round_run_id) if x]
    assert len(order) == 4 and all(r.state == "COMPLETED" for r in order)
    for before, after in itertools.pairwise(order):  # one after the other, never together
        assert before.ended_at is not None and after.submitted_at is not None
        assert before.ended_at <= after.submitted_at, (before, after)
    args = [yaml.safe_load(r.spec_json)["workload"]["args"][1:3] for r in order]
    assert args == [["--num-workers", w] for w in ("0", "4", "0", "4")]
    for r in rounds:  # each round's own ratio: the workers take the loading off the step
        assert r.ratio is not None and r.ratio < 0.9, r
    listed = cli("scores", "--json")
    assert listed.rc == 0, listed.text
    doc = json.loads(listed.out)
    (kept,) = doc["tries"]
    assert kept["try_run_id"] == s.try_run_id and kept["rounds"] == 2
    assert [x["ratio"] for x in kept["round_runs"]] == [r.ratio for r in rounds]
    assert doc["rules"][0]["rule"] == "data-loader" and doc["rules"][0]["checked"] == 1


def test_a_finding_without_a_spec_field_is_named_not_guessed(
    dev_cluster, cli, gh_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Host work every third step: the finding is host compute, whose knob (move the work off
    the step) no flag of this command holds. `try` says so in one sentence and submits
    nothing."""
    spec = _spec(tmp_path, "--load-ms", "0.5", "--host-ms", "40", "--host-every", "3",
                 "--steps", "9")  # fmt: skip
    res = cli("submit", str(spec), "--executor", "local", "--wait", "--timeout", "240",
              timeout=300)  # fmt: skip
    assert res.rc == 0, res.text
    runs_before = len(Store(gh_home).list_runs())
    res = cli("try", "last")
    assert res.rc == 2, res.text
    line = res.err.strip().splitlines()[-1]
    assert "host-compute: no field in the command's arguments turns" in line
    assert "does not guess" in line
    assert len(Store(gh_home).list_runs()) == runs_before
    assert scores.all_scores(Store(gh_home)) == []


def test_a_campaign_tries_its_advice_and_scores_it_the_next_night(
    dev_cluster, cli, gh_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """`try_advice: true`: the night ends by submitting the variant's data-loader knob as a try
    of its own; the next night scores it first (collected, analysed, predicted against
    measured) and tries again."""
    job = _spec(tmp_path, "--num-workers", "0", "--load-ms", "12")
    camp = tmp_path / "camp.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "tries", "job": str(job), "executor": "local", "try_advice": True,
        "matrix": {"loader": {"w0": []}},
    }, sort_keys=False))  # fmt: skip
    first = cli("campaign", "run", str(camp), "--wait", "--timeout", "240", timeout=300)
    assert first.rc == 0, first.text
    assert "advice: w0: trying --num-workers 4 as " in first.out, first.out
    assert "projected step" in first.out
    kept = scores.all_scores(Store(gh_home))
    assert len(kept) == 1 and kept[0].scored_at is None
    # the try runs on its own; the next night scores it once it has ended
    assert cli("wait", kept[0].try_run_id, "--timeout", "240", timeout=300).rc == 0
    second = cli("campaign", "run", str(camp), "--wait", "--timeout", "240", timeout=300)
    assert second.rc == 0, second.text
    assert "advice: data-loader: step" in second.out and "the projection held" in second.out
    kept = scores.all_scores(Store(gh_home))
    assert len(kept) == 2 and kept[0].error_pct is not None and abs(kept[0].error_pct) <= 10
