"""executors/slurm.srun_killed: srun's own "task N: Killed" line is the evidence of a SIGKILL
when sacct gives the job ExitCode 9:0 before the step's record (0:9) arrives; a task that
exited with code 9, or "Killed" anywhere else in a log, is not."""

from __future__ import annotations

from orchestrator.executors.slurm import srun_killed


def test_srun_saying_a_task_was_killed_counts() -> None:
    assert srun_killed(["about-to-die\nsrun: error: gh1: task 0: Killed\n"])
    assert srun_killed(["srun: error: node-07: tasks 0-3: Killed\n"])


def test_an_exit_code_or_the_word_elsewhere_does_not() -> None:
    assert not srun_killed(["srun: error: gh1: task 0: Exited with exit code 9\n"])
    assert not srun_killed(["the workload printed: Killed\n", ""])
