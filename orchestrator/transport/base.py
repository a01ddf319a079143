"""The one interface through which gh-run reaches the machine where the SLURM clients are:
this machine (`local.py`) or a login node over SSH (`ssh.py`).

The SLURM executor runs sbatch/sacct/squeue/scontrol/scancel through `run`, artifact
collection lists, hashes and copies through it, and cron scheduling edits the crontab through
it. Paths given to a transport are paths on the cluster side.
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.core.errors import RuntimeFailure

Warn = Callable[[str], None]


class TransportError(RuntimeFailure):
    """The cluster side could not be reached, or the connection dropped.

    `maybe_ran`: the command was sent before the connection failed, so it may have run there;
    a command that must not run twice (sbatch) is then never sent again blindly.
    """

    def __init__(self, message: str, *, maybe_ran: bool) -> None:
        super().__init__(message)
        self.maybe_ran = maybe_ran


class Transport(ABC):
    remote: bool
    # Where commands run, in words for messages: "this machine", "jdoe@login:22".
    where: str
    # One per distinct destination: the SLURM executor keeps one batched watcher per key.
    key: str

    def __init__(self) -> None:
        # Remote commands and copies sent, for benchmarks (a local transport counts its
        # processes the same way, so both read alike).
        self.round_trips = 0
        self.warn: Warn | None = None

    @abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run argv on the cluster side; its exit status is the command's own.

        `env`: variables the command (and so a job sbatch submits) gets on top of the cluster
        side's environment; values never appear on a command line. Raises TransportError when
        the cluster side cannot be reached, RuntimeFailure when argv[0] is not there.
        """

    @abstractmethod
    def read_from(self, path: str, offset: int) -> bytes | None:
        """The bytes of a file from `offset` on; None when the file does not exist."""

    @abstractmethod
    def read_tail(self, path: str, nbytes: int) -> bytes | None:
        """The last `nbytes` of a file; None when it does not exist."""

    @abstractmethod
    def tails(self, folder: str, job_id: str, nbytes: int) -> list[str]:
        """The last `nbytes` of each `<job_id>_*_log.err` in `folder` (slurmstepd's evidence)."""

    @abstractmethod
    def push(self, local_root: Path, names: Sequence[str], remote_root: str) -> None:
        """Copy the folders `names` of `local_root` to `remote_root` (nothing to do locally)."""

    @abstractmethod
    def resolve_path(self, text: str, where: str) -> str:
        """A cluster-side path with `~` and `$VAR` expanded where they mean something."""

    def connect(self) -> None:
        """Make sure the cluster side answers before anything is written (a submission to a
        login node that cannot be reached must leave nothing behind); nothing to do locally."""
        return None

    def close(self) -> None:
        """Release what the transport holds (the shared SSH connection)."""
        return None
