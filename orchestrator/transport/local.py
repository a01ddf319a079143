"""The local transport: the SLURM clients, the run folders and the crontab are on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.core.errors import RuntimeFailure
from orchestrator.transport.base import Transport


class LocalTransport(Transport):
    remote = False
    where = "this machine"
    key = "local"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if shutil.which(argv[0]) is None:
            raise RuntimeFailure(
                f"{argv[0]} is not installed on this machine, so SLURM cannot be reached from "
                "here; run gh-run where the SLURM clients are (a login node of the cluster), or "
                "reach the cluster over SSH (transport: ssh in its cluster file)"
            )
        self.round_trips += 1
        try:
            return subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=timeout,
                env={**os.environ, **(env or {})},
                input=stdin,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(
                f"{argv[0]} did not answer within {timeout:.0f} s; the SLURM controller may be "
                "overloaded or down"
            ) from None

    def read_from(self, path: str, offset: int) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return fh.read()
        except FileNotFoundError:
            return None

    def read_tail(self, path: str, nbytes: int) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - nbytes))
                return fh.read()
        except FileNotFoundError:
            return None

    def tails(self, folder: str, job_id: str, nbytes: int) -> list[str]:
        out = []
        for err in sorted(Path(folder).glob(f"{job_id}_*_log.err")):
            try:
                data = self.read_tail(str(err), nbytes)
            except OSError:
                continue
            if data is not None:
                out.append(data.decode("utf-8", "replace"))
        return out

    def push(self, local_root: Path, names: Sequence[str], remote_root: str) -> None:
        # The run folders were written where the jobs read them.
        return None

    def resolve_path(self, text: str, where: str) -> str:
        return text


LOCAL = LocalTransport()
