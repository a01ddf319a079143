"""Faults of the SSH transport, for real, on the dev cluster's sshd (tests/laptop.py: gh-run
with no SLURM client and the run folders hidden): the connection dropped while polling and
while copying artifacts back, a changed and an unknown host key, a wrong key or user, the
login node unreachable at submit, and sbatch's answer lost with the connection.

"Dropped" is `devcluster.sh stop sshd`, which ends every SSH connection (the listener and its
sessions), then `start sshd` a moment later: what a login node reboot or a network cut does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests import devcluster
from tests.conftest import CliResult
from tests.laptop import Laptop, cluster_file, jobs_named
from tests.laptop import run_id_of as _run_id
from tests.laptop import runs_of as _runs

pytestmark = pytest.mark.cluster


def _events(laptop: Laptop, run_id: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(laptop.home / "state.db")) as con, con:
        rows = con.execute("SELECT detail FROM events WHERE run_id = ? ORDER BY id", (run_id,))
        return [r[0] or "" for r in rows]


def _one_line(res: CliResult) -> str:
    # A cluster file given as a path is not the site's: gh-run says so first, as a note.
    lines = [x for x in res.err.splitlines() if x.strip() and "not a site file" not in x]
    assert len(lines) == 1 and "Traceback" not in res.err, res.text
    return lines[0]


def _wait_until(what: str, check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.cluster_exclusive  # stops sshd
def test_connection_dropped_while_polling_reconnects_and_never_resubmits(laptop: Laptop) -> None:
    proc = laptop.popen(
        "submit",
        "jobs/smoke.yaml",
        "--cluster",
        "dev-ssh",
        "--set",
        'workload.args=["-c", "sleep 20; echo done > $GH_RUN_ARTIFACTS/done.txt"]',
        "--wait",
    )
    try:
        _wait_until("the job to run", lambda: any(r["state"] == "RUNNING" for r in _runs(laptop)))
        devcluster.stop("sshd")  # every connection dropped, and no new one for a while
        time.sleep(8)
        devcluster.start("sshd")
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "cannot be reached" in err and "(retry 1, next in 2 s)" in err, err
    assert "COMPLETED" in out and "sha256 verified" in out, out
    (run,) = _runs(laptop)
    assert len(jobs_named(str(run["job_name"]))) == 1
    submitted = [e for e in _events(laptop, str(run["run_id"])) if e.startswith("submitted as")]
    assert len(submitted) == 1


@pytest.mark.cluster_exclusive  # stops sshd
def test_connection_dropped_during_artifact_copy_resumes_and_records_only_whole(
    laptop: Laptop, tmp_path: Path
) -> None:
    # A login node that copies at 500 kB/s (ssh.rsync_options): the copy takes seconds.
    slow = cluster_file(tmp_path, "dev-ssh-slow", ssh_rsync_options=["--bwlimit=500"])
    res = laptop.cli(
        "submit",
        "jobs/smoke.yaml",
        "--cluster",
        str(slow),
        "--set",
        'workload.args=["-c", "head -c 4000000 /dev/urandom > $GH_RUN_ARTIFACTS/big.bin"]',
        "--set",
        'artifacts.include=["*.bin"]',
    )
    assert res.rc == 0, res.text
    run_id = _run_id(res)

    def ended() -> bool:
        laptop.cli("status", run_id)  # polls; never collects
        return _runs(laptop)[0]["state"] == "COMPLETED"

    _wait_until("the job to end", ended, timeout=120)
    mirror = laptop.home / "remote" / "dev-ssh-slow" / run_id / "artifacts"
    proc = laptop.popen("fetch", run_id)
    try:
        _wait_until(
            "rsync to be copying big.bin",
            lambda: any(
                p.name.startswith(".big.bin.") and p.stat().st_size > 0
                for p in (mirror.iterdir() if mirror.is_dir() else [])
            ),
        )
        devcluster.stop("sshd")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    assert "dropped" in err and f"`gh-run fetch {run_id}` resumes the copy" in err, err
    with contextlib.closing(sqlite3.connect(laptop.home / "state.db")) as con, con:
        assert con.execute("SELECT COUNT(*) FROM artifacts").fetchone() == (0,)
        assert con.execute("SELECT collected_at FROM runs").fetchone() == (None,)
    assert not (laptop.home / "artifacts" / run_id / "artifacts" / "big.bin").exists()
    partial = mirror / ".rsync-partial" / "big.bin"
    kept = partial.stat().st_size
    assert 0 < kept < 4_000_000
    devcluster.start("sshd")
    again = laptop.cli("fetch", run_id)
    assert again.rc == 0 and "sha256 verified" in again.out, again.text
    resumed = [e for e in _events(laptop, run_id) if e.startswith("resumed an interrupted copy")]
    assert len(resumed) == 1 and f"{kept} bytes were here already" in resumed[0], resumed
    copied = int(resumed[0].split("; ")[1].split()[0])
    assert copied < 4_000_000  # the second copy did not send the whole file again
    collected = laptop.home / "artifacts" / run_id / "artifacts" / "big.bin"
    remote = json.loads(laptop.cli("status", run_id, "--json").out)[0]["run"]["run_dir"]
    source = Path(remote) / "artifacts" / "big.bin"
    assert (
        hashlib.sha256(collected.read_bytes()).digest()
        == hashlib.sha256(source.read_bytes()).digest()
    )


def _other_key(tmp: Path) -> Path:
    key = tmp / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def test_changed_host_key_is_refused_with_the_fix(laptop: Laptop, tmp_path: Path) -> None:
    """known_hosts records another key for [127.0.0.1]:16822 than the one sshd presents."""
    other = _other_key(tmp_path)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{devcluster.SSH_PORT} {other.with_suffix('.pub').read_text()}")
    cluster = cluster_file(tmp_path, "dev-ssh-changed", known_hosts=known)
    res = laptop.cli("submit", "jobs/smoke.yaml", "--cluster", str(cluster))
    assert res.rc == 2, res.text
    line = _one_line(res)
    assert "the host key of root@127.0.0.1:16822 is not the one recorded" in line
    assert f"ssh-keygen -f {known} -R '[127.0.0.1]:16822'" in line
    assert _runs(laptop) == []


def test_unknown_host_key_is_refused_never_accepted(laptop: Laptop, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    cluster = cluster_file(tmp_path, "dev-ssh-unknown", known_hosts=empty)
    res = laptop.cli("submit", "jobs/smoke.yaml", "--cluster", str(cluster))
    assert res.rc == 2, res.text
    assert "is not in your known_hosts and gh-run never accepts an unseen one" in _one_line(res)
    assert empty.read_text() == ""  # nothing was added behind the user's back


@pytest.mark.parametrize("wrong", ["key", "user"])
def test_wrong_key_or_user_is_one_sentence(laptop: Laptop, tmp_path: Path, wrong: str) -> None:
    if wrong == "key":
        cluster = cluster_file(tmp_path, "dev-ssh-key", ssh_identity=str(_other_key(tmp_path)))
    else:
        cluster = cluster_file(tmp_path, "dev-ssh-user", login="nobody@127.0.0.1:16822")
    res = laptop.cli("submit", "jobs/smoke.yaml", "--cluster", str(cluster))
    assert res.rc == 2, res.text
    line = _one_line(res)
    assert "(Permission denied)" in line and "check the user in login: and the key" in line
    assert _runs(laptop) == []


@pytest.mark.cluster_exclusive  # stops sshd
def test_login_node_unreachable_at_submit_records_nothing(laptop: Laptop) -> None:
    devcluster.stop("sshd")
    try:
        res = laptop.cli("submit", "jobs/smoke.yaml", "--cluster", "dev-ssh")
    finally:
        devcluster.start("sshd")
    assert res.rc == 1, res.text
    assert "cannot be reached" in _one_line(res) and "Connection refused" in res.err
    assert _runs(laptop) == []


def _running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


@pytest.mark.cluster_exclusive  # stops sshd
def test_answer_lost_during_sbatch_leaves_an_intent_that_status_repairs(
    laptop: Laptop, tmp_path: Path
) -> None:
    """The controller holds sbatch's request (SIGSTOP) while the connection drops: sbatch may
    have queued the job, so the run stays an INTENT; once the login node answers, `status`
    finds the job by its name and records it, once. gh-run asks the controller which cluster it
    is before it writes anything: the controller is held only once the run folder is being
    copied (slowed to 1 KiB/s), so that what waits for it is sbatch."""
    slow = cluster_file(tmp_path, "dev-ssh-slow-copy", ssh_rsync_options=["--bwlimit=1"])
    proc = laptop.popen("submit", "jobs/smoke.yaml", "--cluster", str(slow))
    try:
        _wait_until("the run folder's copy", lambda: _running("^rsync --from0 .*--bwlimit=1"))
        with devcluster.paused("slurmctld"):
            _wait_until(
                "sbatch to wait for the controller",
                lambda: _running("^sbatch --parsable .*/smoke-"),
            )
            devcluster.stop("sshd")
    except BaseException:
        proc.kill()
        raise
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out + err
    assert "stays an intent" in err and "`gh-run status` finds the job by its name" in err, err
    (run,) = _runs(laptop)
    assert run["state"] == "INTENT" and run["job_id"] is None
    devcluster.start("sshd")
    deadline = time.monotonic() + 90
    while run["state"] == "INTENT" and time.monotonic() < deadline:
        time.sleep(2)
        laptop.cli("status")
        (run,) = _runs(laptop)
    assert run["job_id"] and run["state"] != "SUBMIT_FAILED", run
    assert any(e.startswith("repaired: found job") for e in _events(laptop, str(run["run_id"])))
    assert jobs_named(str(run["job_name"])) == [run["job_id"]]
