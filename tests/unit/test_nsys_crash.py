"""tests/nsys_crash.py: which failed recordings a test may make again. nsys's own crash texts
count, found in the CLI's text or in the task logs of the run folder it names, and, for a test
that expects success, a job whose tasks all died as they started with no report; gh-run's own
failures, and a bare "End of file", never do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import nsys_crash

AGENT_FSM = (
    "No transition in N5Agent6Client3FSM8Profiler8ShutdownE (1) for "
    "N5Agent6Client3FSM18SubscribeCompletedE."
)


def _failed_submit(run_dir: Path) -> str:
    return (
        "submitted smoke-profiled-1 as slurm job 348 on dev/gh\n"
        f"  run folder: {run_dir}\n"
        "  smoke-profiled-1: FAILED, exit code 1 after 0:00:01\n"
        "    srun: error: gh1: task 0: Exited with exit code 1\n"
    )


def test_each_known_crash_text_counts() -> None:
    for text in (
        "/build/QuadD/Common/ProcessWaiter/Src/POSIX/ProcessWaiterImpl.cpp(166): Throw in function",
        "Connection to Agent lost. This is most likely a bug.",
        "Local Endpoint is not available",
        AGENT_FSM,
        "Failed to probe the process (sync)",
    ):
        assert nsys_crash.crashed(text), text


def test_a_crash_only_in_a_task_log_counts(tmp_path: Path) -> None:
    (tmp_path / "348_0_log.err").write_text("End of file\nsrun: error: task 0\n")
    (tmp_path / "348_1_log.err").write_text(AGENT_FSM + "\n")
    text = _failed_submit(tmp_path)
    assert not nsys_crash.crashed(text)  # the CLI's tail shows none of it
    assert nsys_crash.run_crashed(text)


def test_gh_runs_own_failures_never_count(tmp_path: Path) -> None:
    (tmp_path / "348_0_log.err").write_text("End of file\nTraceback (most recent call last):\n")
    assert not nsys_crash.run_crashed(_failed_submit(tmp_path))
    assert not nsys_crash.run_crashed("error: no run folder named here")
    assert not nsys_crash.run_crashed(_failed_submit(tmp_path / "missing"))


def _died_at_start(run_dir: Path, ended: str = "0:00:01") -> str:
    return (
        "submitted smoke-profiled-1 as slurm job 116 on dev/gh\n"
        f"  run folder: {run_dir}\n"
        f"  smoke-profiled-1: FAILED, exit code 15 after {ended}\n"
        "    slurmstepd-gh1: error: *** STEP 116.0 ON gh1 CANCELLED AT 2026-11-30T18:28:16 ***\n"
        "    gh-run: post-processing: no report /x/smoke-profiled.0.nsys-rep: the profiled task"
        " wrote none (see its log); the reports are kept\n"
    )


def test_a_job_whose_tasks_died_as_they_started_counts_and_its_logs_are_kept(
    tmp_path: Path,
) -> None:
    """The shape a fresh-clone CI rehearsal met (both tasks of a two-node job in the container
    gone within a second, no report, the step cancelled): counted, and its task logs' heads
    given for the test's warning. A job that ran longer, or wrote a report, or was not
    cancelled does not count."""
    (tmp_path / "116_0_log.err").write_text("first line\nsecond line\n")
    text = _died_at_start(tmp_path)
    assert nsys_crash.died_at_start(text) and not nsys_crash.run_crashed(text)
    logs = nsys_crash.task_logs(text, lines=1)
    assert "== 116_0_log.err\nfirst line" in logs and "second line" not in logs
    assert not nsys_crash.died_at_start(_died_at_start(tmp_path, ended="0:01:05"))
    assert not nsys_crash.died_at_start(text.replace("CANCELLED", "ended"))
    assert not nsys_crash.died_at_start(text.replace("wrote none", "wrote one"))
    assert nsys_crash.task_logs("no folder") == "(no run folder named)"


def test_once_more_warns_with_the_first_try_and_asks_success(tmp_path: Path) -> None:
    (tmp_path / "116_0_log.err").write_text("nsys: something new\n")
    text = _died_at_start(tmp_path)
    with pytest.warns(UserWarning, match=r"(?s)once more.*116_0_log.err\nnsys: something new"):
        assert nsys_crash.once_more(text)
    assert not nsys_crash.once_more(text, expects_success=False)  # a test that wants a failure
    assert not nsys_crash.once_more(_failed_submit(tmp_path))
