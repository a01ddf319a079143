"""How a run's waiting and ending are told (issue 16, item 7), on the local executor: Ctrl-C
during `submit --wait` leaves the job running and says how to pick it up (`gh-run wait`); a
cancelled run shows no "exit code 0"; a failed one shows its exit code once; `logs --rank`;
a campaign's summary shows a failed variant's stderr tail as `submit --wait` does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from orchestrator.store.db import Store
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_wait_leaves_the_job_running_and_says_how_to_resume(
    gh_home: Path,
) -> None:
    sleeper = ["submit", SMOKE, "-x", "local", "--wait", "--set", "workload.args=[-c, 'sleep 60']"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *sleeper],
        cwd=REPO,
        env={**os.environ, "GH_RUN_HOME": str(gh_home), "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal's foreground command gets it: a run started from a background job
        # (`cmd &` in a script, as a CI harness may start the suite) inherits SIGINT ignored,
        # and Python then never turns Ctrl-C into KeyboardInterrupt (measured: the command
        # waited its job out and exited 0)
        preexec_fn=_default_sigint,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "submitted RUN as local job local-N on dev/gh"
    assert first.startswith("submitted "), first
    run_id = first.split()[1]
    time.sleep(1.0)  # inside the wait loop
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert f"interrupted: stopped waiting; {run_id} (job local-" in err
    assert f"keeps running. `gh-run wait {run_id}` waits again and collects" in err
    assert "Traceback" not in err

    run = Store(gh_home).find_run(run_id)
    status = run_cli(["status", run_id], gh_home)
    assert "RUNNING" in status.out, status.text  # the job did not stop with gh-run

    cancel = run_cli(["cancel", run_id], gh_home)
    assert cancel.rc == 0, cancel.text
    waited = run_cli(["wait", run_id, "--timeout", "60"], gh_home)
    assert waited.rc == 1  # it ended, but not COMPLETED
    assert f"{run_id}: CANCELLED" in waited.out
    run = Store(gh_home).find_run(run_id)
    assert run.state == "CANCELLED"
    # However the executor recorded the code, a cancelled run shows no exit code.
    Store(gh_home).update_run(run_id, exit_code=0)
    for args in (["status", run_id], ["status"]):
        shown = run_cli(args, gh_home)
        assert "exit code 0" not in shown.out, shown.out
    table = run_cli(["status"], gh_home).out.splitlines()
    assert table[1].split()[:3] == [run_id, "CANCELLED", "-"]
    fields = run_cli(["status", run_id], gh_home).out
    assert re.search(r"^exit code +-$", fields, re.MULTILINE), fields


def test_a_failed_run_shows_its_exit_code_once(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "local", "--wait", "--set", "workload.args=[-c, nosuchcmd]")
    assert res.rc == 1
    assert "FAILED, exit code 127 after" in res.out
    assert res.out.count("exit code 127") == 1, res.out
    assert "nosuchcmd: command not found" in res.out  # the stderr tail
    run = Store(gh_home).find_run("last")
    status = cli("status", run.run_id)
    assert "(exit code 127)" not in status.out and "exit code 127 (" not in status.out


def test_logs_of_a_rank(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "local", "--wait")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    rank0 = cli("logs", run.run_id, "--rank", "0")
    assert rank0.rc == 0 and rank0.out == cli("logs", run.run_id).out
    # Another rank's log, as a multi-task SLURM job writes it (<job id>_<rank>_log.out).
    Path(run.run_dir, "local_1_log.out").write_text("from rank 1\n")
    assert cli("logs", run.run_id, "--rank", "1").out == "from rank 1\n"
    missing = cli("logs", run.run_id, "--rank", "7")
    assert missing.rc == 2
    assert f"--rank 7: run {run.run_id} has no log of rank 7" in missing.err
    assert "it has logs of rank 0, 1" in missing.err


def test_campaign_summary_shows_a_failed_variants_stderr_tail(
    tmp_path: Path, gh_home: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "tails",
                "job": SMOKE,
                "executor": "local",
                "matrix": {
                    "mode": {
                        "ok": [],
                        "bad": ["workload.args=[-c, 'echo variant-broke-here >&2; exit 4']"],
                    }
                },
            }
        )
    )
    res = run_cli(["campaign", "run", str(path), "--wait"], gh_home, timeout=300)
    assert res.rc == 1, res.text
    lines = res.out.splitlines()
    failed = next(i for i, line in enumerate(lines) if "failed bad: FAILED" in line)
    assert "last lines of" in lines[failed + 1] and "_log.err" in lines[failed + 1]
    assert "variant-broke-here" in lines[failed + 2]
