"""What the SLURM executor reads from a job's own logs (pure functions; no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.executors.slurm import LOG_TAIL_BYTES, memory_kill_evidence

# The lines below are slurmstepd's, copied from the dev cluster (OverMemoryKill) and from
# SLURM's cgroup plugin source (task/cgroup's oom counter).
JOBACCT = (
    "slurmstepd-gh1: error: StepId=41.0 exceeded memory limit (642904064 > 209715200), "
    "being killed\nslurmstepd-gh1: error: Exceeded job memory limit\n"
)
CGROUP = (
    "slurmstepd: error: Detected 1 oom_kill event in StepId=7.batch. "
    "Some of the step tasks have been OOM Killed.\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (JOBACCT, "Exceeded job memory limit"),
        (
            "slurmstepd: error: Exceeded step memory limit at some point.\n",
            "Exceeded step memory limit",
        ),
        (CGROUP, "Detected 1 oom_kill event"),
        (
            "slurmstepd-gh2: error: Detected 3 oom-kill events in StepId=9.0\n",
            "Detected 3 oom-kill events",
        ),
    ],
)
def test_slurmstepd_memory_kill_lines_are_evidence(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "41_0_log.err").write_text("workload says hi\n" + text)
    assert memory_kill_evidence(tmp_path, "41") == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Traceback...\nMemoryError\n",
        # the workload quoting the words is not slurmstepd saying them
        "echo: slurmstepd: error: Exceeded job memory limit\n",
        "  slurmstepd: error: Exceeded job memory limit\n",
        "slurmstepd: error: *** JOB 41 ON gh1 CANCELLED AT 2026-11-23T01:00:00 ***\n",
    ],
)
def test_other_failures_are_not_memory_kills(tmp_path: Path, text: str) -> None:
    (tmp_path / "41_0_log.err").write_text(text)
    assert memory_kill_evidence(tmp_path, "41") is None


def test_only_this_jobs_logs_and_only_their_tail(tmp_path: Path) -> None:
    # Another job's log in the same folder says nothing about job 41.
    (tmp_path / "42_0_log.err").write_text(JOBACCT)
    (tmp_path / "41_0_log.err").write_text("fine\n")
    assert memory_kill_evidence(tmp_path, "41") is None
    # The evidence is looked for in the tail: a line buried before it is not read.
    (tmp_path / "41_0_log.err").write_text(JOBACCT + "x" * (LOG_TAIL_BYTES + 10))
    assert memory_kill_evidence(tmp_path, "41") is None
    # An array element (job 41_3) logs as 41_3_<task>_log.err, submitit's %A_%a_%t convention.
    (tmp_path / "41_3_0_log.err").write_text(JOBACCT)
    assert memory_kill_evidence(tmp_path, "41_3") == "Exceeded job memory limit"
