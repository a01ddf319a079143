"""One interface for every executor: submit, poll (batched), cancel, log paths."""

from __future__ import annotations

import glob
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store is imported by what reads it, not by every executor user
    from orchestrator.site.cluster import Cluster
    from orchestrator.store.db import Run


Warn = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class JobStatus:
    """What the executor knows of one job now (a plain record, like the store's rows)."""

    state: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    nodes: str | None = None


@dataclass(frozen=True)
class NotHere:
    """Why `--executor auto` cannot give an executor the jobs of a cluster on this machine:
    `where` the file and field that decide it, `why` the fact, `fix` what the user can do."""

    why: str
    where: str = ""
    fix: str = ""


class Executor(ABC):
    name: str
    launcher: str

    @classmethod
    @abstractmethod
    def not_here(cls, clusters: Sequence[Cluster], render_only: bool = False) -> NotHere | None:
        """Whether this executor takes these clusters' jobs under `--executor auto` on this
        machine: None when it does, else why not (submitit's AutoExecutor asks each executor
        the same question; executors/choose.py asks them in order). `render_only`: the
        script is only printed, nothing is sent."""

    @abstractmethod
    def submit(self, script: Path, run: Run) -> str:
        """Start the job; return its id. Raises UserError when refused, RuntimeFailure else."""

    @abstractmethod
    def poll(self, runs: list[Run]) -> dict[str, JobStatus]:
        """The status of every given run (by run_id), in one batched query."""

    @abstractmethod
    def cancel(self, run: Run) -> None: ...

    def log_stem(self, run: Run) -> str:
        """What a run's log names start with: the job id (submitit's naming)."""
        return run.job_id or "unknown"

    def log_paths(self, run: Run, rank: int = 0) -> tuple[Path, Path]:
        """stdout and stderr of task `rank`; rank 0's also hold the batch step's output."""
        folder, stem = Path(run.run_dir), self.log_stem(run)
        return folder / f"{stem}_{rank}_log.out", folder / f"{stem}_{rank}_log.err"

    def ranks_with_logs(self, run: Run) -> list[int]:
        """The ranks whose stdout log exists in the run folder."""
        stem = self.log_stem(run)
        ranks = []
        for path in Path(run.run_dir).glob(f"{glob.escape(stem)}_*_log.out"):
            middle = path.name[len(stem) + 1 : -len("_log.out")]
            if middle.isdigit():
                ranks.append(int(middle))
        return sorted(ranks)
