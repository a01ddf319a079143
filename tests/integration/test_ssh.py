"""The dev cluster reached over SSH (clusters/dev-ssh.yaml), as from a laptop: gh-run runs with
no SLURM client on its PATH and the run folders hidden from it (tests/laptop.py), so every
sbatch, sacct, squeue, scontrol, scancel, crontab and file goes through the real sshd of
scripts/devcluster.sh: submit to verified artifacts, a failing job followed with `logs
--follow`, cancel, a 2-node job, `check`, a campaign, and a cron schedule on the login node.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests import devcluster
from tests.laptop import Laptop, cluster_file, connections, jobs_named
from tests.laptop import run_id_of as _run_id

pytestmark = pytest.mark.cluster


def _status(laptop: Laptop, run_id: str) -> dict[str, object]:
    res = laptop.cli("status", run_id, "--json")
    assert res.rc == 0, res.text
    return dict(json.loads(res.out)[0])


def _remote_dir(laptop: Laptop, run_id: str) -> Path:
    """Where the run folder is on the cluster side (seen by the test, not by gh-run)."""
    run = _status(laptop, run_id)["run"]
    assert isinstance(run, dict)
    path = Path(str(run["run_dir"]))
    assert path.is_relative_to(devcluster.SCRATCH), path
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _job(tmp: Path, name: str, script: str, **resources: object) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "cluster": "dev-ssh",
                "resources": {"cpus_per_task": 1, "mem": "100M", "time": "00:05:00", **resources},
                "workload": {"command": "bash", "args": ["-c", script]},
                "artifacts": ["*.txt"],
            }
        )
    )
    return path


def _first_campaign_state(db: Path) -> str | None:
    """The remote campaign's state, or None while the remote gh-run has not yet made its state
    database (the file appears a moment before its tables do)."""
    if not db.is_file():
        return None
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        try:
            row = con.execute("SELECT state FROM campaigns ORDER BY created_at").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
    return str(row[0]) if row else None


def test_laptop_sees_neither_slurm_nor_the_run_folders(laptop: Laptop, tmp_path: Path) -> None:
    """The test's own premise: no SLURM client, and the scratch file system is empty here."""
    # Something the cluster side can see, whatever ran before (on a fresh cluster this test may
    # be the first to touch scratch).
    marker = devcluster.SCRATCH / f"premise-{tmp_path.name}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("only the cluster side sees this\n")
    listing = f"import os; print(os.listdir({str(devcluster.SCRATCH)!r}))"
    try:
        assert any(devcluster.SCRATCH.iterdir()), "the real scratch is not empty"
        res = subprocess.run(
            [*laptop.argv([])[:-2], "-c", listing],
            env=laptop.env(),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        marker.unlink()
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr
    assert shutil.which("sbatch", path=laptop.path) is None


# counts the sshd's accepted connections: another test's SSH session would count too
@pytest.mark.cluster_exclusive
def test_submit_over_ssh_to_verified_artifacts_on_one_connection(laptop: Laptop) -> None:
    before = connections()
    res = laptop.cli("submit", "jobs/smoke.yaml", "--cluster", "dev-ssh", "--wait")
    assert res.rc == 0, res.text
    assert "COMPLETED" in res.out and "sha256 verified" in res.out, res.text
    # One SSH connection for the whole process: render, copy, sbatch, every sacct, the copy back.
    assert connections() - before == 1
    run_id = _run_id(res)
    remote = _remote_dir(laptop, run_id)
    collected = laptop.home / "artifacts" / run_id / "artifacts" / "hello.txt"
    assert collected.read_text() == f"hello from {run_id}\n"
    assert _sha(collected) == _sha(remote / "artifacts" / "hello.txt")
    dump = _status(laptop, run_id)
    run = dump["run"]
    assert isinstance(run, dict) and run["state"] == "COMPLETED" and run["collected_at"]
    assert json.loads(str(run["transport"]))["host"] == "127.0.0.1"
    records = {a["relpath"]: a for a in dump["artifacts"]}  # type: ignore[union-attr]
    assert records["artifacts/hello.txt"]["sha256"] == _sha(remote / "artifacts" / "hello.txt")
    assert f"logs/{run['job_id']}_0_log.out" in records
    # Exactly one job was queued for the run, whatever gh-run asked SLURM.
    assert len(jobs_named(f"ghr-{run_id}")) == 1
    logs = laptop.cli("logs", run_id)
    assert logs.rc == 0 and "smoke on" in logs.out, logs.text
    again = laptop.cli("fetch", run_id)
    assert again.rc == 0 and "sha256 verified" in again.out, again.text


def test_failing_job_followed_over_ssh(laptop: Laptop, tmp_path: Path) -> None:
    job = _job(tmp_path, "fails", 'echo first; sleep 4; echo second; echo "bad input" >&2; exit 3')
    res = laptop.cli("submit", str(job))
    assert res.rc == 0, res.text
    run_id = _run_id(res)
    follow = laptop.cli("logs", run_id, "--follow", timeout=180)
    assert follow.rc == 0, follow.text
    assert "first" in follow.out and "second" in follow.out, follow.text
    assert f"{run_id} ended: FAILED" in follow.err
    status = laptop.cli("status", run_id)
    assert "FAILED" in status.out and "bad input" in status.out, status.text
    run = _status(laptop, run_id)["run"]
    assert isinstance(run, dict) and run["exit_code"] == 3
    err = laptop.cli("logs", run_id, "--err")
    assert "bad input" in err.out, err.text


def test_cancel_over_ssh(laptop: Laptop, tmp_path: Path) -> None:
    job = _job(tmp_path, "long", "sleep 300")
    res = laptop.cli("submit", str(job))
    assert res.rc == 0, res.text
    run_id = _run_id(res)
    deadline = time.monotonic() + 60
    while _status(laptop, run_id)["run"]["state"] != "RUNNING":  # type: ignore[index]
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(1)
    cancel = laptop.cli("cancel", run_id)
    assert cancel.rc == 0 and "cancel sent" in cancel.out, cancel.text
    waited = laptop.cli("wait", run_id, timeout=120)
    assert waited.rc == 1 and "CANCELLED" in waited.out, waited.text


def test_two_node_job_over_ssh(laptop: Laptop, tmp_path: Path) -> None:
    job = _job(
        tmp_path,
        "pair",
        'echo "rank $RANK of $WORLD_SIZE on $(hostname)"; '
        'echo "$RANK" > "$GH_RUN_ARTIFACTS/r$RANK.txt"',
        nodes=2,
        gpus_per_node=1,
    )
    res = laptop.cli("submit", str(job), "--wait")
    assert res.rc == 0, res.text
    run_id = _run_id(res)
    run = _status(laptop, run_id)["run"]
    assert isinstance(run, dict) and run["state"] == "COMPLETED"
    art = laptop.home / "artifacts" / run_id / "artifacts"
    assert sorted(p.name for p in art.iterdir()) == ["r0.txt", "r1.txt"]


def test_check_asks_the_remote_controller(laptop: Laptop) -> None:
    ok = laptop.cli(
        "check", "jobs/smoke.yaml", "--cluster", "dev-ssh", "--set", "resources.nodes=2"
    )
    assert ok.rc == 0 and "accepts" in ok.out and "gh[1-2]" in ok.out, ok.text


def _tiny_campaign(
    tmp: Path, cluster: str | Path, n: int = 4, name: str = "tinyc", **extra: object
) -> Path:
    job = tmp / "tiny.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "cluster": str(cluster),
                "resources": {"cpus_per_task": 1, "mem": "50M", "time": "00:02:00"},
                "workload": {
                    "command": "bash",
                    "args": [
                        "-c",
                        'printf \'{"median_step_time_s": 0.01, "tokens_per_s": 1000}\\n\' '
                        '> "$GH_RUN_ARTIFACTS/metrics.json"',
                    ],
                },
                "artifacts": ["metrics.json"],
            }
        )
    )
    camp = tmp / f"{name}.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "job": str(job),
                "executor": "slurm",
                "matrix": {
                    "mem": {"m50": [], "m60": ["resources.mem=60M"]},
                    "i": {str(i): [f"workload.env.I={i}"] for i in range(n // 2)},
                },
                "variant_name": "{mem}-{i}",
                **extra,
            }
        )
    )
    return camp


# counts the sshd's accepted connections: another test's SSH session would count too
@pytest.mark.cluster_exclusive
def test_campaign_over_ssh(laptop: Laptop, tmp_path: Path) -> None:
    camp = _tiny_campaign(tmp_path, "dev-ssh")
    before = connections()
    res = laptop.cli("campaign", "run", str(camp), "--wait", timeout=300)
    assert res.rc == 0, res.text
    assert "4 variants in 2 submissions (2 job arrays)" in res.out and "PASSED" in res.out
    assert connections() - before == 1
    with contextlib.closing(sqlite3.connect(laptop.home / "state.db")) as con, con:
        rows = con.execute("SELECT state, collected_at, transport FROM runs").fetchall()
        metrics = con.execute("SELECT COUNT(*) FROM metrics WHERE key = 'tokens_per_s'").fetchone()
    assert len(rows) == 4 and all(r[0] == "COMPLETED" and r[1] and r[2] for r in rows), rows
    assert metrics == (4,)


@pytest.mark.crontab  # rewrites the machine's crontab, as another session's test may
def test_cron_schedule_installed_on_the_login_node_fires(laptop: Laptop, tmp_path: Path) -> None:
    """The crontab is the login node's (gh-run has no crontab on its PATH); cron fires the
    campaign there, with gh-run as ssh.gh_run names it, into a gh-run home beside the runs."""
    if shutil.which("cron") is None:
        pytest.skip("Debian's cron is not installed (apt-get install -y cron)")
    if subprocess.run(["pgrep", "-x", "cron"], capture_output=True, check=False).returncode != 0:
        subprocess.run(["cron"], check=True)  # daemonizes
    runs = f"$SCRATCH/gh-run/test-{tmp_path.name}/runs"
    cluster = cluster_file(
        tmp_path,
        "dev-ssh-sched",
        runs=runs,
        ssh_gh_run=[sys.executable, "-m", "orchestrator"],
    )
    camp = _tiny_campaign(
        tmp_path, cluster, n=2, schedule={"cron": "* * * * *", "tz": "UTC", "mode": "cron"}
    )
    remote_root = devcluster.SCRATCH / "gh-run" / f"test-{tmp_path.name}" / "runs"
    try:
        res = laptop.cli("campaign", "schedule", str(camp))
        assert res.rc == 0 and "login node's crontab" in res.out, res.text
        tab = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
        assert "# gh-run-campaign:tinyc" in tab and str(remote_root) in tab
        listed = laptop.cli("campaign", "list")
        assert "crontab entry present on root@127.0.0.1:16822" in listed.out, listed.text
        db = remote_root / "_home" / "state.db"
        # cron fires within a minute; the jobs may then queue behind other tests' jobs (this
        # test shares the cluster), so the wait is bounded well above that, and ends when done
        deadline = time.monotonic() + 300
        state = None
        while time.monotonic() < deadline and state not in ("PASSED", "FAILED", "REGRESSED"):
            time.sleep(2)
            state = _first_campaign_state(db)
        assert state == "PASSED", (state, (remote_root / "_schedules/tinyc/cron.log"))
    finally:
        gone = laptop.cli("campaign", "unschedule", "tinyc")
        shutil.rmtree(remote_root.parent, ignore_errors=True)
    assert gone.rc == 0 and "crontab entry removed" in gone.out, gone.text
    tab = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False).stdout
    assert "gh-run-campaign:tinyc" not in tab


def test_secret_reaches_a_remote_job_by_stdin_only(laptop: Laptop, tmp_path: Path) -> None:
    """workload.secret_env over SSH: the value goes to sbatch through the session's stdin, the
    job gets it, and no file on either side holds it."""
    secret = "s3cr3t 'quoted' $NOT_EXPANDED `nor this`"
    job = tmp_path / "secret.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "secret",
                "cluster": "dev-ssh",
                "resources": {"cpus_per_task": 1, "mem": "100M", "time": "00:05:00"},
                "workload": {
                    "command": "bash",
                    "args": [
                        "-c",
                        'printf %s "$GH_RUN_T_TOKEN" | sha256sum > "$GH_RUN_ARTIFACTS/s.txt"',
                    ],
                    "secret_env": ["GH_RUN_T_TOKEN"],
                },
                "artifacts": ["*.txt"],
            }
        )
    )
    res = laptop.cli("submit", str(job), "--wait", env={"GH_RUN_T_TOKEN": secret})
    assert res.rc == 0, res.text
    run_id = _run_id(res)
    got = (laptop.home / "artifacts" / run_id / "artifacts" / "s.txt").read_text().split()[0]
    assert got == hashlib.sha256(secret.encode()).hexdigest()
    for root in (laptop.home, _remote_dir(laptop, run_id)):
        for path in root.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    assert secret not in res.text


def test_slurm_schedule_queued_on_the_remote_cluster_fires(laptop: Laptop, tmp_path: Path) -> None:
    """--mode slurm over SSH: the launcher is queued by the login node's sbatch, runs the
    campaign there and queues tomorrow's launcher; unschedule cancels it there."""
    runs = f"$SCRATCH/gh-run/test-{tmp_path.name}/runs"
    cluster = cluster_file(
        tmp_path, "dev-ssh-sl", runs=runs, ssh_gh_run=[sys.executable, "-m", "orchestrator"]
    )
    # its own name: the launcher's job name is the campaign's, and other sessions share SLURM
    name = f"tinyc-{uuid.uuid4().hex[:8]}"
    camp = _tiny_campaign(
        tmp_path,
        cluster,
        n=2,
        name=name,
        schedule={"cron": "30 4 * * *", "tz": "UTC", "mode": "slurm", "launcher_time": "00:05:00"},
    )
    remote_root = devcluster.SCRATCH / "gh-run" / f"test-{tmp_path.name}" / "runs"
    try:
        res = laptop.cli("campaign", "schedule", str(camp), "--first-begin", "now+2")
        assert res.rc == 0 and "as launcher job" in res.out, res.text
        db = remote_root / "_home" / "state.db"
        deadline = time.monotonic() + 150
        state = None
        while time.monotonic() < deadline and state not in ("PASSED", "FAILED", "REGRESSED"):
            time.sleep(2)
            state = _first_campaign_state(db)
        assert state == "PASSED", state
        listed = laptop.cli("campaign", "list")
        assert "PENDING (begin " in listed.out and "T04:30:00" in listed.out, listed.text
    finally:
        gone = laptop.cli("campaign", "unschedule", name)
        shutil.rmtree(remote_root.parent, ignore_errors=True)
    assert gone.rc == 0 and "cancelled queued launcher job(s)" in gone.out, gone.text
    left = subprocess.run(
        ["squeue", "-h", "-t", "PENDING", "--name", f"ghr-schedule-{name}"],
        env=devcluster.slurm_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert left.strip() == ""


def test_up_reuses_the_running_login_node_and_slurm(dev_cluster: None) -> None:
    """`devcluster.sh up` again: sshd and the SLURM daemons keep running as they were."""
    pids = {d: (devcluster.STATE_DIR / "pids" / f"{d}.pid").read_text() for d in devcluster.DAEMONS}
    devcluster.ensure_up()
    after = {
        d: (devcluster.STATE_DIR / "pids" / f"{d}.pid").read_text() for d in devcluster.DAEMONS
    }
    assert after == pids
    assert devcluster.SSH_KNOWN_HOSTS.read_text().startswith(f"[127.0.0.1]:{devcluster.SSH_PORT} ")


def test_artifact_limits_hold_on_the_cluster_side(laptop: Laptop, tmp_path: Path) -> None:
    """The cluster file's artifact limits apply before the copy: a file over the per-file limit
    never crosses the wire, and the manifest and the output list it with the reason, as for a
    local run; a link on the cluster is listed as refused too."""
    cluster = cluster_file(
        tmp_path, "dev-ssh-limits", artifacts={"max_file_size": "4K", "max_run_size": "1G"}
    )
    job = _job(
        tmp_path,
        "limits",
        'cd "$GH_RUN_ARTIFACTS"; head -c 100 /dev/zero > small.txt;'
        " head -c 20000 /dev/zero > big.txt; ln -s small.txt link.txt",
    )
    res = laptop.cli("submit", str(job), "--cluster", str(cluster), "--wait")
    assert res.rc == 0, res.text
    run_id = _run_id(res)
    assert "big.txt" in res.text and "per-file limit of 4K" in res.text, res.text
    store = laptop.home / "artifacts" / run_id
    assert (store / "artifacts" / "small.txt").stat().st_size == 100
    assert not (store / "artifacts" / "big.txt").exists()
    manifest = json.loads((store / "manifest.json").read_text())
    refused = {r["path"]: r["reason"] for r in manifest["refused"]}
    assert "per-file limit of 4K" in refused["big.txt"], refused
    assert "symbolic link" in refused["link.txt"], refused
    # and never copied: the laptop's mirror of the run folder has no big.txt either
    assert not list(laptop.home.rglob("big.txt"))
