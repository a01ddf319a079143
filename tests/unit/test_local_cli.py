"""The CLI end to end on the local executor (no SLURM needed): submit, wait, status, logs,
fetch, cancel, timeouts, and bad input → exit 2 without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts.collect import sha256_of
from orchestrator.executors.local import LocalExecutor
from orchestrator.runs import lifecycle as runs
from orchestrator.store.db import Store

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")


def test_smoke_on_local_executor(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "--executor", "local", "--wait")
    assert res.rc == 0, res.text
    assert "COMPLETED" in res.out
    run = Store(gh_home).find_run("last")
    assert run.state == "COMPLETED" and run.exit_code == 0 and run.executor == "local"
    copy = gh_home / "artifacts" / run.run_id / "artifacts" / "hello.txt"
    assert copy.read_text() == f"hello from {run.run_id}\n"
    src = Path(run.run_dir) / "artifacts" / "hello.txt"
    assert sha256_of(copy) == sha256_of(src)
    logs = cli("logs", run.run_id)
    assert logs.rc == 0 and "smoke on" in logs.out and "rank 0 of 1" in logs.out
    status = cli("status", run.run_id)
    assert status.rc == 0 and "COMPLETED" in status.out and "submitted as job" in status.out
    fetch = cli("fetch", run.run_id)
    assert fetch.rc == 0 and "sha256 verified" in fetch.out


def test_failure_shows_exit_code_and_stderr_tail(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "local",
        "--wait",
        "--set",
        "workload.args=[-c, 'echo boom-on-stderr >&2; exit 3']",
    )
    assert res.rc == 1
    assert "FAILED" in res.out and "exit code 3" in res.out
    assert "boom-on-stderr" in res.out
    run = Store(gh_home).find_run("last")
    assert (run.state, run.exit_code) == ("FAILED", 3)
    err = cli("logs", run.run_id, "--err")
    assert "boom-on-stderr" in err.out


@pytest.mark.parametrize(
    "script",
    [
        "sleep 30",
        # A job that catches SIGTERM and exits 0 was still stopped by the limit.
        "trap 'exit 0' TERM; sleep 30 & wait",
    ],
    ids=["killed", "exits-0-on-term"],
)
def test_local_time_limit_gives_timeout(cli, gh_home: Path, script: str) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "local",
        "--wait",
        "--set",
        "resources.time=0:02",
        "--set",
        f"workload.args=[-c, {json.dumps(script)}]",
    )
    assert res.rc == 1
    run = Store(gh_home).find_run("last")
    assert run.state == "TIMEOUT", res.text
    assert run.reason == "time limit reached"


@pytest.mark.parametrize("code", [124, 137])
def test_own_exit_124_or_137_is_not_a_timeout(cli, gh_home: Path, code: int) -> None:  # type: ignore[no-untyped-def]
    """124 and 137 are what coreutils `timeout` returns; a command may return them itself."""
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "local",
        "--wait",
        "--set",
        f"workload.args=[-c, 'exit {code}']",
    )
    assert res.rc == 1
    run = Store(gh_home).find_run("last")
    assert (run.state, run.exit_code) == ("FAILED", code), res.text
    assert "time limit" not in (run.reason or "")


def _until(pred: Callable[[], bool], timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def _pid_in(path: Path) -> int | None:
    """The pid a job wrote into `path`, once it is there whole."""
    text = path.read_text() if path.is_file() else ""
    return int(text) if text.endswith("\n") else None


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has ended; only its entry is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


# The workload: its pid, a nested `timeout` (which makes a process group of its own, as the
# former supervisor did), and a heartbeat file that grows while anything of the job runs.
BUSY = (
    "timeout 300 bash -c 'echo $$ > \"$GH_RUN_ARTIFACTS/inner.pid\"; exec sleep 300' & "
    'echo $$ > "$GH_RUN_ARTIFACTS/pid"; '
    'while :; do echo beat >> "$GH_RUN_ARTIFACTS/beat"; sleep 0.1; done'
)


def test_cancel_local(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "local", "--set", f"workload.args=[-c, {json.dumps(BUSY)}]")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    arts = Path(run.run_dir) / "artifacts"
    assert _until(lambda: _pid_in(arts / "inner.pid") is not None and (arts / "beat").is_file())
    pids = [_pid_in(arts / name) or 0 for name in ("pid", "inner.pid")]
    assert all(_running(p) for p in pids)
    assert cli("cancel", run.run_id).rc == 0

    def cancelled() -> bool:
        assert cli("status", run.run_id, "--json").rc == 0  # refreshes the run's state
        return Store(gh_home).get_run(run.run_id).state == "CANCELLED"

    assert _until(cancelled)
    # CANCELLED means the job is gone: the workload, its nested process group, the heartbeat.
    assert not [p for p in pids if _running(p)]
    size = (arts / "beat").stat().st_size
    time.sleep(1.0)
    assert (arts / "beat").stat().st_size == size


def test_cancel_kills_a_job_that_ignores_sigterm(tmp_path: Path) -> None:
    """SIGTERM first; SIGKILL after the grace (1 s here) for a job that ignores it."""
    spec = tmp_path / "t.yaml"
    spec.write_text(
        "name: t\ncluster: dev\nworkload:\n  command: bash\n  args: [-c, "
        + json.dumps('trap "" TERM; echo $$ > "$GH_RUN_ARTIFACTS/pid"; while :; do sleep 0.1; done')
        + "]\n"
    )
    home = tmp_path / "home"
    store = Store(home)
    run = runs.submit(store, runs.prepare(spec), LocalExecutor(grace=1.0), home)
    pid_file = Path(run.run_dir) / "artifacts" / "pid"
    assert _until(lambda: _pid_in(pid_file) is not None)
    pid = _pid_in(pid_file) or 0
    LocalExecutor().cancel(run)
    [run] = runs.wait(store, [run], min_interval=0.1, max_interval=0.3, timeout=60)
    assert run.state == "CANCELLED"
    assert not _running(pid)  # it ignored SIGTERM: only the SIGKILL after the grace ends it


def test_bad_input_exit_2_one_sentence_no_traceback(cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nresources:\n  nodes: 0\nworkload: {command: echo}\n")
    res = cli("submit", str(bad), "-x", "local")
    assert res.rc == 2
    assert "bad.yaml:3: resources.nodes: must be >= 1" in res.err
    assert "Traceback" not in res.text
    assert not (gh_home / "runs").exists()


def test_render_prints_the_script(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", SMOKE, "--run-id", "smoke-x")
    assert res.rc == 0
    assert res.out.startswith("#!/bin/bash\n")
    assert "#SBATCH --job-name=ghr-smoke-x" in res.out


def _render_bytes(home: Path, *args: str, env: dict[str, str]) -> bytes:
    """`gh-run render` as a subprocess, its stdout as bytes (no newline translation)."""
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "render", *args],
        cwd=REPO,
        env={**os.environ, "GH_RUN_HOME": str(home), **env},
        capture_output=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


@pytest.mark.parametrize("executor", [["--executor", "local"], []], ids=["local", "default"])
def test_render_is_byte_for_byte_what_submit_writes(  # type: ignore[no-untyped-def]
    cli, gh_home: Path, tmp_path: Path, executor: list[str]
) -> None:
    """No SLURM reachable: `auto` (both commands' default) means local, so the direct launch."""
    empty = tmp_path / "slurm.conf"  # sinfo refuses an empty configuration at once
    empty.write_text("")
    env = {"SLURM_CONF": str(empty)}
    rendered = _render_bytes(gh_home, SMOKE, *executor, "--run-id", "smoke-same", env=env)
    res = cli("submit", SMOKE, *executor, "--run-id", "smoke-same", "--wait", env=env)
    assert res.rc == 0, res.text
    run = Store(gh_home).get_run("smoke-same")
    assert run.executor == "local"
    assert (Path(run.run_dir) / "job.sbatch").read_bytes() == rendered
    assert b'\nbash "$GH_RUN_DIR/task.sh"' in rendered and b"srun " not in rendered


def test_bad_run_id_refused(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "local", "--run-id", "../escape")
    assert res.rc == 2
    assert "--run-id: '../escape' is not a run id" in res.err
    assert not (gh_home / "runs").exists()


def test_too_many_gpus_refused_before_submission(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "--set", "resources.gpus_per_node=2", "-x", "local")
    assert res.rc == 2
    assert "gpus_per_node: 2 GPUs per node asked, but partition 'gh' has 1" in res.err
    assert not (gh_home / "runs").exists()
