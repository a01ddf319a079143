"""The real local SLURM dev cluster answers like a (tiny) GH200 site.

These run real sbatch/srun/sacct against scripts/devcluster.sh's cluster; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import devcluster

# the cluster itself: a daemon stopped, both nodes idle and then both taken
pytestmark = [pytest.mark.cluster, pytest.mark.cluster_exclusive]

POLL_TIMEOUT_S = 30.0
# `hostname` is the same machine for both "nodes"; SLURMD_NODENAME tells them apart.
BATCH_BOTH_NODES = (
    'hostname; echo "nodelist=$SLURM_JOB_NODELIST"; srun bash -c \'echo "step=$SLURMD_NODENAME"\''
)


@pytest.fixture(autouse=True)
def _cluster_up(dev_cluster: None) -> Iterator[None]:
    # the cluster itself: stopped daemons, both nodes idle (cluster_exclusive, below)
    yield


def slurm(
    *args: str, timeout: float = 30.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        env=devcluster.slurm_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


def node_states() -> dict[str, str]:
    out = slurm("sinfo", "-h", "-N", "-p", devcluster.PARTITION, "-o", "%N %t").stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def sacct_state(job_id: str) -> str:
    out = slurm("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State").stdout
    return out.strip().splitlines()[0] if out.strip() else ""


def poll(what: str, predicate: Callable[[], bool], timeout: float = POLL_TIMEOUT_S) -> None:
    """Wait for a condition (not a timed assertion: the timeout only bounds a hang)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.5)


def test_both_nodes_idle_in_partition_gh() -> None:
    poll("gh1 and gh2 idle", lambda: all(node_states().get(n) == "idle" for n in devcluster.NODES))
    out = slurm("sinfo", "-h", "-N", "-p", "gh", "-o", "%N %P %c %m %G").stdout.split("\n")
    rows = {line.split()[0]: line.split()[1:] for line in out if line.strip()}
    assert set(rows) == {"gh1", "gh2"}
    for node in devcluster.NODES:
        assert rows[node] == ["gh*", "2", "4000", "gpu:gh200:1"]


def test_batch_job_spans_both_nodes(tmp_path: Path) -> None:
    out_file = tmp_path / "out.txt"
    job = slurm(
        "sbatch",
        "--parsable",
        "--wait",
        "-N",
        "2",
        "-p",
        "gh",
        "-t",
        "00:02:00",
        "-o",
        str(out_file),
        "--wrap",
        BATCH_BOTH_NODES,
        timeout=60,
    )
    job_id = job.stdout.strip().split(";")[0]
    assert job_id.isdigit()
    lines = out_file.read_text().splitlines()
    assert "nodelist=gh[1-2]" in lines
    assert sorted(line for line in lines if line.startswith("step=")) == ["step=gh1", "step=gh2"]


def test_controller_refuses_more_gpus_than_a_node_has() -> None:
    too_many = slurm(
        "sbatch", "--test-only", "--gpus-per-node=2", "-p", "gh", "--wrap", "true", check=False
    )
    assert too_many.returncode != 0
    assert "Requested node configuration is not available" in too_many.stderr

    fits = slurm(
        "sbatch", "--test-only", "--gpus-per-node=1", "-p", "gh", "--wrap", "true", check=False
    )
    assert fits.returncode == 0, fits.stderr
    assert "to start at" in fits.stderr


def test_sacct_reports_completed_job(tmp_path: Path) -> None:
    job = slurm(
        "sbatch", "--parsable", "--wait", "-p", "gh", "-o", str(tmp_path / "o.txt"), "--wrap",
        "true", timeout=60,
    )  # fmt: skip
    job_id = job.stdout.strip().split(";")[0]
    # Accounting reaches slurmdbd asynchronously: poll until the record lands.
    poll(f"sacct to report job {job_id} COMPLETED", lambda: sacct_state(job_id) == "COMPLETED")


def test_srun_multi_node_step() -> None:
    res = slurm(
        "srun", "-N", "2", "-p", "gh", "-t", "00:01:00", "bash", "-c", 'echo "$SLURMD_NODENAME"',
        timeout=60,
    )  # fmt: skip
    assert sorted(res.stdout.split()) == ["gh1", "gh2"]


def test_stop_and_start_slurmctld() -> None:
    devcluster.stop("slurmctld")
    try:
        down = slurm("sinfo", "-h", check=False, timeout=60)
        assert down.returncode != 0
        assert "Unable to contact slurm controller" in down.stderr
    finally:
        devcluster.start("slurmctld")
    assert slurm("sinfo", "-h").returncode == 0


def test_a_checkout_without_its_own_cluster_reuses_the_running_one(tmp_path: Path) -> None:
    """Another checkout of the repository (here: the script alone, in a folder of its own,
    GH_RUN_DEVCLUSTER_DIR unset) finds the dev cluster that runs, through the link `up` made at
    /etc/slurm/slurm.conf, and reuses it instead of starting a second one on the same ports."""
    link = devcluster.ETC_LINK
    if not (link.is_symlink() and Path(os.readlink(link)) == devcluster.SLURM_CONF):
        pytest.skip(f"{link} does not link to this session's cluster ({devcluster.SLURM_CONF})")
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(devcluster.SCRIPT, clone / "scripts" / "devcluster.sh")
    env = {k: v for k, v in os.environ.items() if k not in ("GH_RUN_DEVCLUSTER_DIR", "SLURM_CONF")}

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(clone / "scripts" / "devcluster.sh"), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    said = script("env")
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == f"export SLURM_CONF={devcluster.SLURM_CONF}"
    assert f"reusing the dev cluster running in {devcluster.STATE_DIR}" in said.stderr
    up = script("up")
    assert up.returncode == 0, up.stderr
    assert "already up (reused)" in up.stderr and not (clone / ".devcluster" / "pids").exists()
    # the tests of such a checkout find it the same way
    assert devcluster.find_state_dir({})[0] == devcluster.STATE_DIR
