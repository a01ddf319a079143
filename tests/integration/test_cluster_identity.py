"""A job goes only to the SLURM cluster its cluster file names (issue 25), on the real dev
cluster (ClusterName ghdev), directly and through its login node over SSH.

A second cluster file that reaches the same controller under another cluster name stands in
for a site with several clusters, or a laptop whose SLURM configuration points elsewhere: it
is refused by check, submit and campaign run, and no job reaches SLURM. `multi_cluster: true`
makes gh-run pass --clusters to every SLURM command (the dev cluster is registered in its
slurmdbd, so `--clusters=ghdev` really goes through slurmdbd's cluster table), and status,
logs and cancel follow the cluster a run was submitted to.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.laptop import Laptop, cluster_file, jobs_named

pytestmark = pytest.mark.cluster

SMOKE = "jobs/smoke.yaml"
DEV = REPO / "clusters" / "dev.yaml"


def dev_copy(tmp: Path, name: str, **slurm: object) -> Path:
    """clusters/dev.yaml under another file name, its `slurm:` block changed (None: removed)."""
    doc = yaml.safe_load(DEV.read_text())
    doc["name"] = name
    for key, value in slurm.items():
        if value is None:
            doc["slurm"].pop(key, None)
        else:
            doc["slurm"][key] = value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def fresh_id(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:10]}"


def test_a_file_naming_another_cluster_is_refused_and_nothing_reaches_slurm(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, gh_home: Path, tmp_path: Path
) -> None:
    other = dev_copy(tmp_path, "other", cluster_name="otherdev")
    check = cli("check", SMOKE, "--cluster", str(other))
    assert check.rc == 2, check.text
    # a cluster file given as a path is noted first (not the site's); the refusal follows
    assert "is given as a path, not a site file" in check.err
    sentence = check.err[check.err.index("error: ") :].strip()
    assert sentence.startswith(f"error: {other}: slurm.cluster_name: "), sentence
    assert "SLURM cluster 'otherdev'" in sentence and "is cluster 'ghdev'" in sentence
    assert "the SLURM controller accepts" not in check.out  # never asked for a verdict
    rid = fresh_id("wrong-cluster")
    submit = cli("submit", SMOKE, "--cluster", str(other), "-x", "slurm", "--run-id", rid)
    assert submit.rc == 2, submit.text
    assert "SLURM cluster 'otherdev'" in submit.err and "'ghdev'" in submit.err
    assert "nothing was sent" in submit.err
    assert jobs_named(f"ghr-{rid}", settle_s=3) == []
    assert "no runs yet" in cli("status").out  # nothing written either
    # The same job through the dev cluster's own file goes through.
    ok = cli("check", SMOKE)
    assert ok.rc == 0, ok.text
    assert "ok: cluster: the SLURM controller that this machine's SLURM clients reach" in ok.out
    assert "is cluster ghdev, the one clusters/dev.yaml names" in ok.out


def test_a_file_naming_the_cluster_in_other_case_is_accepted(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    """Cluster names compare without case (issue 43): the controller's ClusterName is `ghdev`
    (SLURM lower-cases it); a cluster file that writes `GHDev` names that cluster, and check
    says so, while a file naming another cluster is refused (the test above)."""
    upper = dev_copy(tmp_path, "upper", cluster_name="GHDev")
    ok = cli("check", SMOKE, "--cluster", str(upper))
    assert ok.rc == 0, ok.text
    assert "is cluster ghdev, the one" in ok.out and "names" in ok.out
    assert "the SLURM controller accepts" in ok.out  # and then asked for its verdict


def test_a_file_without_a_cluster_name_is_refused_with_the_name_to_set(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    unnamed = dev_copy(tmp_path, "unnamed", cluster_name=None)
    res = cli("submit", SMOKE, "--cluster", str(unnamed), "-x", "slurm")
    assert res.rc == 2, res.text
    assert "slurm.cluster_name: not set" in res.err
    assert "add `slurm: {cluster_name: ghdev}`" in res.err
    assert "no runs yet" in cli("status").out


def test_campaign_run_to_another_cluster_writes_and_sends_nothing(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, gh_home: Path, tmp_path: Path
) -> None:
    other = dev_copy(tmp_path, "other", cluster_name="otherdev")
    job = tmp_path / "job.yaml"
    job.write_text((REPO / SMOKE).read_text().replace("cluster: dev", f"cluster: {other}"))
    camp = tmp_path / "camp.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": "identity",
                "job": str(job),
                "executor": "slurm",
                "matrix": {"t": {"a": ["resources.time=00:01:00"], "b": []}},
            }
        )
    )
    res = cli("campaign", "run", str(camp))
    assert res.rc == 2, res.text
    assert "SLURM cluster 'otherdev'" in res.err and "'ghdev'" in res.err
    assert not (gh_home / "campaigns").exists() or not any((gh_home / "campaigns").iterdir())
    assert "no runs yet" in cli("status").out


@pytest.mark.parametrize("mode", ["slurm", "cron"])
def test_a_schedule_for_another_cluster_is_not_installed(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, gh_home: Path, tmp_path: Path, mode: str
) -> None:
    other = dev_copy(tmp_path, "other", cluster_name="otherdev")
    job = tmp_path / "job.yaml"
    job.write_text((REPO / SMOKE).read_text().replace("cluster: dev", f"cluster: {other}"))
    name = f"identity{mode}"
    camp = tmp_path / "camp.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "job": str(job),
                "executor": "slurm",
                "matrix": {"t": {"a": [], "b": ["resources.time=00:01:00"]}},
                "schedule": {"cron": "30 4 * * *", "tz": "UTC", "mode": mode},
            }
        )
    )
    res = cli("campaign", "schedule", str(camp))
    assert res.rc == 2, res.text
    assert "SLURM cluster 'otherdev'" in res.err and "'ghdev'" in res.err
    assert jobs_named(f"ghr-schedule-{name}", settle_s=3) == []  # no launcher queued
    assert "no schedules installed" in cli("campaign", "list").out


def test_unreachable_controller_is_a_runtime_failure(  # type: ignore[no-untyped-def]
    cli, dead_controller: Path, tmp_path: Path
) -> None:
    dead = dev_copy(tmp_path, "dead", cluster_name="dead")
    res = cli("check", SMOKE, "--cluster", str(dead), env={"SLURM_CONF": str(dead_controller)})
    assert res.rc == 1, res.text
    assert "could not be reached" in res.err and "cannot confirm that it is cluster dead" in res.err


def test_multi_cluster_passes_clusters_and_runs_follow_it(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, gh_home: Path, tmp_path: Path
) -> None:
    multi = dev_copy(tmp_path, "multi", multi_cluster=True)
    done = cli("submit", SMOKE, "--cluster", str(multi), "-x", "slurm", "--wait", timeout=300)
    assert done.rc == 0, done.text
    (row,) = json.loads(cli("status", "last", "--json").out)
    assert row["run"]["slurm_cluster"] == "ghdev"
    assert row["run"]["clusters_option"] == "ghdev"
    assert row["run"]["state"] == "COMPLETED"
    assert "rank 0 of 1" in cli("logs", "last").out
    assert "multi/gh (SLURM cluster ghdev, --clusters=ghdev)" in cli("status", "last").out
    # --clusters really reaches the SLURM clients: a name slurmdbd does not know is refused
    # by them, and said as the cluster file's error.
    unknown = dev_copy(tmp_path, "unknown", cluster_name="nosuchcluster", multi_cluster=True)
    res = cli("check", SMOKE, "--cluster", str(unknown))
    assert res.rc == 2, res.text
    assert f"{unknown}: slurm.cluster_name: SLURM does not know a cluster 'nosuchcluster'" in (
        res.err
    )


def test_cancel_refuses_a_controller_of_another_cluster(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, gh_home: Path
) -> None:
    res = cli("submit", SMOKE, "-x", "slurm", "--set", "workload.args=[-c, 'sleep 300']")
    assert res.rc == 0, res.text
    (row,) = json.loads(cli("status", "last", "--json").out)
    run_id, job_name = row["run"]["run_id"], row["run"]["job_name"]
    assert row["run"]["slurm_cluster"] == "ghdev"
    # Stand-in for "this machine's SLURM now points at another cluster": the run's record says
    # it went to cluster `elsewhere`, while the controller reached says ghdev.
    with contextlib.closing(sqlite3.connect(gh_home / "state.db")) as db, db:
        db.execute("UPDATE runs SET slurm_cluster = 'elsewhere' WHERE run_id = ?", (run_id,))
    try:
        refused = cli("cancel", run_id)
        assert refused.rc == 2, refused.text
        assert f"run {run_id} was submitted to SLURM cluster 'elsewhere'" in refused.err
        assert "is cluster 'ghdev'" in refused.err and "nothing was cancelled" in refused.err
        assert jobs_named(job_name, settle_s=0)  # still there
        status = cli("status", run_id)
        assert "its state was not refreshed" in status.err, status.text
    finally:
        with contextlib.closing(sqlite3.connect(gh_home / "state.db")) as db, db:
            db.execute("UPDATE runs SET slurm_cluster = 'ghdev' WHERE run_id = ?", (run_id,))
    assert cli("cancel", run_id).rc == 0
    assert cli("wait", run_id, timeout=120).rc == 1
    (row,) = json.loads(cli("status", run_id, "--json").out)
    assert row["run"]["state"] == "CANCELLED"


def test_over_ssh_the_login_nodes_controller_is_checked(laptop: Laptop, tmp_path: Path) -> None:
    ok = laptop.cli("check", SMOKE, "--cluster", "dev-ssh")
    assert ok.rc == 0, ok.text
    assert "that the SLURM clients reach on root@127.0.0.1:16822 is cluster ghdev" in ok.out
    assert "is cluster ghdev" in ok.out
    other = cluster_file(tmp_path, "other-ssh", slurm={"cluster_name": "otherdev"})
    rid = fresh_id("wrong-ssh")
    res = laptop.cli("submit", SMOKE, "--cluster", str(other), "--run-id", rid)
    assert res.rc == 2, res.text
    assert "SLURM cluster 'otherdev'" in res.err and "is cluster 'ghdev'" in res.err
    assert jobs_named(f"ghr-{rid}", settle_s=3) == []
