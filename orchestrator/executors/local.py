"""The local executor: the very script SLURM would run, started with bash on this machine.

The job runs detached from gh-run (its own session), under `timeout` for the spec's time
limit, and a fixed supervisor line records its exit status in `local_exit`, so its state is
known after gh-run has exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from orchestrator.errors import RuntimeFailure
from orchestrator.executors.base import Executor, JobStatus
from orchestrator.store import Run
from orchestrator.units import parse_time

# Arguments arrive as positional parameters: nothing from a spec is ever part of this line.
SUPERVISOR = (
    'timeout -k 10 "$1" bash "$2" >>"$3" 2>>"$4"; rc=$?; echo "$rc" > "$5.tmp"; mv "$5.tmp" "$5"'
)


class LocalExecutor(Executor):
    name = "local"
    launcher = "direct"

    def __init__(self, time_limit: str | None = None) -> None:
        self.time_limit = time_limit

    def submit(self, script: Path, run: Run) -> str:
        folder = Path(run.run_dir)
        seconds = parse_time(self.time_limit) if self.time_limit else 3600
        # The job id is known only after the start; logs are renamed to submitit's convention.
        out, err = folder / "local_0_log.out", folder / "local_0_log.err"
        try:
            proc = subprocess.Popen(
                [
                    "sh",
                    "-c",
                    SUPERVISOR,
                    "gh-run-local",
                    str(seconds),
                    str(script),
                    str(out),
                    str(err),
                    str(folder / "local_exit"),
                ],
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "GH_RUN_EXECUTOR": "local"},
            )
        except OSError as exc:
            raise RuntimeFailure(f"could not start bash for {script}: {exc.strerror}") from None
        (folder / "local_pid").write_text(f"{proc.pid}\n")
        return f"local-{proc.pid}"

    def log_paths(self, run: Run) -> tuple[Path, Path]:
        folder = Path(run.run_dir)
        return folder / "local_0_log.out", folder / "local_0_log.err"

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # A zombie child of this very process counts as ended: reap it.
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            return done == 0
        except ChildProcessError:
            return True

    def poll(self, runs: list[Run]) -> dict[str, JobStatus]:
        out: dict[str, JobStatus] = {}
        for run in runs:
            folder = Path(run.run_dir)
            exit_file = folder / "local_exit"
            if exit_file.is_file():
                rc = int(exit_file.read_text().strip() or "1")
                out[run.run_id] = self._status_from_rc(rc, folder)
                continue
            pid = int(run.job_id.split("-", 1)[1]) if run.job_id else -1
            if pid > 0 and self._alive(pid):
                out[run.run_id] = JobStatus(state="RUNNING")
            elif exit_file.is_file():
                out[run.run_id] = self._status_from_rc(int(exit_file.read_text().strip()), folder)
            elif (folder / "local_cancelled").exists():
                out[run.run_id] = JobStatus(state="CANCELLED", reason="cancelled by gh-run")
            else:
                out[run.run_id] = JobStatus(
                    state="FAILED", reason="the local job's supervisor vanished (killed?)"
                )
        return out

    @staticmethod
    def _status_from_rc(rc: int, folder: Path) -> JobStatus:
        if (folder / "local_cancelled").exists():
            return JobStatus(state="CANCELLED", exit_code=rc)
        if rc in (124, 137):
            return JobStatus(state="TIMEOUT", exit_code=rc, reason="time limit reached")
        if rc == 0:
            return JobStatus(state="COMPLETED", exit_code=0)
        if rc > 128:
            return JobStatus(
                state="FAILED", exit_code=rc, signal=rc - 128, reason=f"killed by signal {rc - 128}"
            )
        return JobStatus(state="FAILED", exit_code=rc, reason=f"exit code {rc}")

    def cancel(self, run: Run) -> None:
        if not run.job_id:
            return
        pid = int(run.job_id.split("-", 1)[1])
        (Path(run.run_dir) / "local_cancelled").write_text("cancelled by gh-run\n")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
