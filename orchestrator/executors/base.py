"""One interface for every executor: submit, poll (batched), cancel, log paths."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from orchestrator.base import Strict
from orchestrator.store import Run

Warn = Callable[[str], None]


class JobStatus(Strict):
    """What the executor knows of one job now."""

    state: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    nodes: str | None = None


class Executor(ABC):
    name: str
    launcher: str

    @abstractmethod
    def submit(self, script: Path, run: Run) -> str:
        """Start the job; return its id. Raises UserError when refused, RuntimeFailure else."""

    @abstractmethod
    def poll(self, runs: list[Run]) -> dict[str, JobStatus]:
        """The status of every given run (by run_id), in one batched query."""

    @abstractmethod
    def cancel(self, run: Run) -> None: ...

    def log_paths(self, run: Run) -> tuple[Path, Path]:
        """stdout and stderr of the batch step / rank 0 (submitit's naming)."""
        folder = Path(run.run_dir)
        jid = run.job_id or "unknown"
        return folder / f"{jid}_0_log.out", folder / f"{jid}_0_log.err"
