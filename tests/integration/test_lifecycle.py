"""The spine's done-means on the REAL dev cluster, through the real CLI (a subprocess per call):
submit → PENDING/RUNNING → COMPLETED with verified artifacts; FAILED with its exit code and the
stderr tail; cancel → CANCELLED; a time limit → TIMEOUT; a 2-node job on gh1 and gh2; an
impossible request refused before anything is submitted; and the local fallback when no SLURM
is reachable. Nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from orchestrator.artifacts.collect import sha256_of
from orchestrator.runs import lifecycle as runs
from orchestrator.store.db import Store
from tests import devcluster
from tests.unit.test_properties import check_echoed, echo_specs, submit_generated

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
Cli = Callable[..., object]


def _squeue_names(name: str) -> list[str]:
    res = subprocess.run(
        ["squeue", "-h", "-o", "%i", "--name", name],
        env=devcluster.slurm_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return res.stdout.split()


def _until(pred: Callable[[], bool], timeout: float = 60.0, step: float = 0.5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def _state(cli, run_id: str) -> str:  # type: ignore[no-untyped-def]
    res = cli("status", run_id, "--json")
    assert res.rc == 0, res.text
    return str(json.loads(res.out)[0]["run"]["state"])


# The smoke job's work, held until the test lets it go: so the controller reports the job
# RUNNING to gh-run before it can complete (no race with a short job, no sleeps to tune).
GATED = (
    'while [ ! -e "$GH_RUN_DIR/go" ]; do sleep 0.2; done; '
    'printf \'hello from %s\\n\' "$GH_RUN_ID" > "$GH_RUN_ARTIFACTS/hello.txt"'
)


def test_submit_track_complete_artifacts_verified(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "slurm", "--set", f"workload.args=[-c, {json.dumps(GATED)}]")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert run.executor == "slurm" and run.job_id and run.job_id.isdigit()
    try:
        first = _state(cli, run.run_id)
        assert first in {"PENDING", "RUNNING"}
        # gh-run writes PENDING itself at submission; RUNNING only ever comes from SLURM.
        assert _until(lambda: _state(cli, run.run_id) == "RUNNING", 60)
    finally:
        (Path(run.run_dir) / "go").touch()
    done = cli("wait", run.run_id)
    assert done.rc == 0, done.text
    run = Store(gh_home).get_run(run.run_id)
    assert run.state == "COMPLETED" and run.exit_code == 0
    events = Store(gh_home).events(run.run_id)
    states = [e.state for e in events]
    assert states[:2] == ["INTENT", "PENDING"] and "COMPLETED" in states, states
    assert events[1].detail == f"submitted as job {run.job_id} (slurm)"
    # The controller's report, seen between gh-run's own PENDING and the end.
    assert "RUNNING" in states[2 : states.index("COMPLETED")], states
    # Recompute every sha256 from the run folder and the store copy.
    arts = Store(gh_home).artifacts(run.run_id)
    assert any(a.relpath == "artifacts/hello.txt" for a in arts)
    for a in arts:
        assert sha256_of(Path(a.source)) == (a.size, a.sha256)
        copy = gh_home / "artifacts" / run.run_id / a.relpath
        assert sha256_of(copy) == (a.size, a.sha256)
    manifest = json.loads((gh_home / "artifacts" / run.run_id / "manifest.json").read_text())
    assert {f["relpath"] for f in manifest["files"]} == {a.relpath for a in arts}
    hello = gh_home / "artifacts" / run.run_id / "artifacts" / "hello.txt"
    assert hello.read_text() == f"hello from {run.run_id}\n"


def test_failing_command_shows_exit_code_and_stderr(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "workload.args=[-c, 'echo first-line >&2; echo boom-on-stderr >&2; exit 3']",
    )
    assert res.rc == 1, res.text
    assert "FAILED" in res.out and "exit code 3" in res.out and "boom-on-stderr" in res.out
    run = Store(gh_home).find_run("last")
    assert (run.state, run.exit_code) == ("FAILED", 3)
    status = cli("status", run.run_id)
    assert "FAILED" in status.out and "boom-on-stderr" in status.out
    err = cli("logs", run.run_id, "--err")
    assert err.rc == 0 and "first-line" in err.out and "boom-on-stderr" in err.out


def test_cancel_gives_cancelled(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "slurm", "--set", "workload.args=[-c, 'sleep 300']")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert _until(lambda: _state(cli, run.run_id) == "RUNNING", 60)
    assert cli("cancel", run.run_id).rc == 0
    done = cli("wait", run.run_id, timeout=120)
    run = Store(gh_home).get_run(run.run_id)
    assert run.state == "CANCELLED", done.text
    assert not _squeue_names(run.job_name)
    # SLURM records a cancelled job's exit code as 0 (0:15): it says nothing, so none is shown.
    assert f"{run.run_id}: CANCELLED" in done.out and "exit code 0" not in done.out, done.out
    shown = cli("status", run.run_id).out
    assert "exit code 0" not in shown and "CANCELLED" in shown, shown


def test_time_limit_gives_timeout(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    """SLURM enforces limits at minute granularity: this one takes 1-2 minutes."""
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "resources.time=00:01:00",
        "--set",
        "workload.args=[-c, 'echo started-then-sleeping; sleep 300']",
        timeout=300,
    )
    assert res.rc == 1, res.text
    run = Store(gh_home).find_run("last")
    assert run.state == "TIMEOUT", res.text
    assert "TIMEOUT" in res.out
    assert "started-then-sleeping" in cli("logs", run.run_id).out


def test_two_nodes_one_task_each(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "resources.nodes=2",
        "--set",
        "workload.args=[-c, 'echo \"rank=$RANK node=$SLURMD_NODENAME\"']",
    )
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    text = "".join(p.read_text() for p in Path(run.run_dir).glob(f"{run.job_id}_*_log.out"))
    assert "rank=0 node=gh1" in text or "rank=0 node=gh2" in text, text
    nodes = {line.split("node=")[1] for line in text.splitlines() if "node=" in line}
    assert nodes == {"gh1", "gh2"}, text


def test_too_many_gpus_refused_nothing_submitted(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "slurm", "--set", "resources.gpus_per_node=2")
    assert res.rc == 2, res.text
    assert "resources.gpus_per_node" in res.err and "at most 1" in res.err
    assert "Traceback" not in res.text
    assert not (gh_home / "runs").exists()
    assert not (gh_home / "state.db").exists()


def test_smoke_falls_back_to_local_without_slurm(cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No cluster fixture: SLURM_CONF points nowhere, so `auto` must pick the local executor."""
    env = {"SLURM_CONF": str(tmp_path / "no-such-slurm.conf")}
    res = cli("submit", SMOKE, "--executor", "auto", "--wait", env=env)
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert run.executor == "local" and run.state == "COMPLETED"
    copy = gh_home / "artifacts" / run.run_id / "artifacts" / "hello.txt"
    assert copy.read_text() == f"hello from {run.run_id}\n"


@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(spec_data=echo_specs())
def test_generated_values_arrive_intact_on_slurm(
    dev_cluster: None, spec_data: dict[str, Any], tmp_path_factory: Any
) -> None:
    """5 generated specs (any printable unicode in args and env) as real SLURM jobs."""
    tmp = tmp_path_factory.mktemp("gen")
    home = tmp / "home"
    store, run_id = submit_generated(spec_data, home, tmp, "slurm")
    assert store.get_run(run_id).executor == "slurm"
    runs.wait(store, [store.get_run(run_id)], min_interval=0.3, max_interval=1.0, timeout=120)
    check_echoed(store, run_id, spec_data, home)
