"""tests/nsys_crash.py: which failed recordings a test may make again. Only nsys's own crash
texts count, found in the CLI's text or in the task logs of the run folder it names; gh-run's
own failures, and a bare "End of file", never do."""

from __future__ import annotations

from pathlib import Path

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
