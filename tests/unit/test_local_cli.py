"""The CLI end to end on the local executor (no SLURM needed): submit, wait, status, logs,
fetch, cancel, timeouts, and bad input → exit 2 without a traceback."""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.artifacts import sha256_of
from orchestrator.store import Store

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


def test_local_time_limit_gives_timeout(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "local",
        "--wait",
        "--set",
        "resources.time=0:02",
        "--set",
        "workload.args=[-c, 'sleep 30']",
    )
    assert res.rc == 1
    assert Store(gh_home).find_run("last").state == "TIMEOUT"


def test_cancel_local(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "local", "--set", "workload.args=[-c, 'sleep 60']")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert cli("cancel", run.run_id).rc == 0
    deadline = time.time() + 20
    while time.time() < deadline:
        cli("status", run.run_id)
        if Store(gh_home).get_run(run.run_id).state == "CANCELLED":
            break
        time.sleep(0.5)
    assert Store(gh_home).get_run(run.run_id).state == "CANCELLED"


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


def test_too_many_gpus_refused_before_submission(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "--set", "resources.gpus_per_node=2", "-x", "local")
    assert res.rc == 2
    assert "gpus_per_node: 2 GPUs per node asked, but partition 'gh' has 1" in res.err
    assert not (gh_home / "runs").exists()
