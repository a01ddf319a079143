"""What gh-run's watcher (executors/slurm_watch.py) takes from submitit beyond its public API.

`GhRunWatcher` subclasses submitit's `SlurmInfoWatcher`, replaces `update()` (the batched sacct
with more columns and the squeue/scontrol fallback) and so reads and writes five private
attributes of `InfoWatcher`, and edits the format field of `_make_command()`'s argv. submitit
is pinned to the minor version these were read from (pyproject.toml: >=1.5.4,<1.6); this test
is what a bump of the pin must pass: each assumption, checked on the installed submitit. The
integration tests track real jobs through it on the dev cluster.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import submitit
from submitit.core.core import InfoWatcher
from submitit.slurm.slurm import SlurmInfoWatcher

from orchestrator.executors.slurm_watch import GhRunWatcher, TrackedJob, job_class
from orchestrator.transport.local import LOCAL

REPO = Path(__file__).resolve().parents[2]


def test_the_pin_names_the_installed_minor_version() -> None:
    text = (REPO / "pyproject.toml").read_text()
    major, minor = version("submitit").split(".")[:2]
    assert f'"submitit>={major}.{minor}.' in text and f",<{major}.{int(minor) + 1}" in text


def test_the_private_state_the_watcher_uses() -> None:
    """`update()` keeps InfoWatcher's books itself: these are the attributes it touches."""
    w = SlurmInfoWatcher(delay_s=60)
    assert isinstance(w._registered, set) and isinstance(w._finished, set)
    assert isinstance(w._info_dict, dict)
    assert isinstance(w._num_calls, int) and w.num_calls == w._num_calls
    assert w._last_status_check == float("-inf")
    w.register_job("41")
    assert w._registered == {"41"}


def test_the_sacct_command_whose_format_field_is_replaced() -> None:
    w = SlurmInfoWatcher(delay_s=60)
    assert w._make_command() is None  # nothing registered: no call
    w.register_job("41_3")
    w.register_job("42")
    cmd = w._make_command()
    assert cmd is not None
    assert cmd[:4] == ["sacct", "-o", "JobID,State,NodeList", "--parsable2"]
    assert sorted(cmd[4:]) == sorted(["-j", "41", "-j", "42"])  # arrays by their job id
    ours = GhRunWatcher(delay_s=60)
    ours.register_job("42")
    mine = ours._make_command()
    assert mine is not None and mine[2] == "JobID,State,NodeList,ExitCode,Reason,DerivedExitCode"


def test_submitit_calls_the_replaced_update_and_reads_its_books() -> None:
    """A job's state comes from `_info_dict` as `update()` left it; a forced query calls
    `update()`; `is_done` in cache mode calls nothing (update() marks finished jobs with it)."""
    calls = []

    class Books(SlurmInfoWatcher):  # type: ignore[misc]
        def update(self) -> None:
            calls.append(1)
            self._info_dict.update({"7": {"JobID": "7", "State": "COMPLETED"}})

    w = Books(delay_s=60)
    assert w.get_state("7", mode="cache") == "UNKNOWN" and calls == []
    assert not w.is_done("7", mode="cache")
    assert w.get_state("7", mode="force") == "COMPLETED" and calls == [1]
    assert w.is_done("7", mode="cache") and calls == [1]
    assert InfoWatcher.update is not GhRunWatcher.update  # ours is the one that runs


def test_a_tracked_job_registers_with_its_clusters_watcher(tmp_path: Path) -> None:
    """submitit.SlurmJob registers its id with the class's `watcher`: one watcher per cluster
    (job_class) is what batches every run of that cluster into one sacct."""
    assert issubclass(TrackedJob, submitit.SlurmJob)
    cls = job_class(LOCAL, "c9-contract")
    assert cls is job_class(LOCAL, "c9-contract") and cls.watcher is not TrackedJob.watcher
    job = cls(folder=tmp_path, job_id="9001")
    assert "9001" in cls.watcher._registered
    assert job.watcher is cls.watcher
