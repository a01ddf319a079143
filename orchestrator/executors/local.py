"""The local executor: the very script SLURM would run, started with bash on this machine.

A supervisor (`supervise`, started as `python -c ...`, detached from gh-run in a session of its
own) starts the job script in a new session too, so that every process of the job can be found
again: its process group, and on Linux every process of its session (which also catches
workloads that make process groups of their own, such as a nested `timeout` or `set -m`).
The supervisor stops the whole job as SLURM does, with SIGTERM and then SIGKILL after a grace,
in three cases: the time limit is reached, gh-run cancels the run (SIGTERM to the supervisor),
or the script ends and leaves processes behind. Only when no process of the job is left does
it write `local_exit`: the script's exit status, and `time-limit` when the limit stopped it.
So a local run turns terminal only once its job is gone, and its state is known after gh-run
has exited. A command's own exit status 124 or 137 is its own, never taken for a time limit.

Files in the run folder: `local_pid` (the supervisor; the job id is `local-<pid>`), `local_job`
(the job's session and process-group id), `local_exit`, and `local_cancelled` (gh-run's cancel).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.errors import RuntimeFailure
from orchestrator.executors.base import Executor, JobStatus
from orchestrator.store import Run
from orchestrator.units import parse_time

# Seconds between SIGTERM and SIGKILL (the `-k 10` of the former `timeout` supervisor).
GRACE_SECONDS = 10.0
TIME_LIMIT = "time-limit"
STOPPED = "stopped"
_FILES = ("local_exit", "local_cancelled", "local_job", "local_pid")
# The supervisor's whole program: arguments arrive as argv; nothing from a spec is part of it.
_SUPERVISOR_MAIN = (
    "import sys; sys.path[0] = sys.argv.pop(1); "
    "from orchestrator.executors.local import supervise; sys.exit(supervise(sys.argv[1:]))"
)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class LocalExecutor(Executor):
    name = "local"
    launcher = "direct"

    def __init__(self, time_limit: str | None = None, grace: float = GRACE_SECONDS) -> None:
        self.time_limit = time_limit
        self.grace = grace

    def submit(self, script: Path, run: Run) -> str:
        folder = Path(run.run_dir)
        seconds = parse_time(self.time_limit) if self.time_limit else 3600
        for name in _FILES:  # a retry reuses the run folder
            (folder / name).unlink(missing_ok=True)
        # The job id is known only after the start; logs are renamed to submitit's convention.
        out, err = self.log_paths(run)
        try:
            with err.open("ab") as supervisor_err:  # a supervisor failure lands in the job's log
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        _SUPERVISOR_MAIN,
                        _PACKAGE_ROOT,
                        str(seconds),
                        str(self.grace),
                        str(script),
                        str(out),
                        str(err),
                        str(folder),
                    ],
                    cwd=folder,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=supervisor_err,
                    start_new_session=True,
                    env={**os.environ, "GH_RUN_EXECUTOR": "local"},
                )
        except OSError as exc:
            raise RuntimeFailure(f"could not start bash for {script}: {exc.strerror}") from None
        (folder / "local_pid").write_text(f"{proc.pid}\n")
        return f"local-{proc.pid}"

    def log_stem(self, run: Run) -> str:
        # The logs are opened before the supervisor (and so the job id) exists.
        return "local"

    @staticmethod
    def _pid(run: Run) -> int:
        """The supervisor's pid from the job id (`local-<pid>`; a bare pid is accepted too)."""
        text = (run.job_id or "").rpartition("-")[2]
        return int(text) if text.isdigit() else -1

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
                out[run.run_id] = self._status_from_exit(exit_file.read_text(), folder)
                continue
            pid = self._pid(run)
            if pid > 0 and self._alive(pid):
                out[run.run_id] = JobStatus(state="RUNNING")
            elif exit_file.is_file():
                out[run.run_id] = self._status_from_exit(exit_file.read_text(), folder)
            elif (folder / "local_cancelled").exists():
                out[run.run_id] = JobStatus(state="CANCELLED", reason="cancelled by gh-run")
            else:
                out[run.run_id] = JobStatus(
                    state="FAILED", reason="the local job's supervisor vanished (killed?)"
                )
        return out

    @staticmethod
    def _status_from_exit(text: str, folder: Path) -> JobStatus:
        """`local_exit` is `<exit status>[ time-limit|stopped]`, written by the supervisor."""
        words = text.split()
        rc = int(words[0]) if words and words[0].isdigit() else 1
        how = words[1] if len(words) > 1 else ""
        if (folder / "local_cancelled").exists():
            return JobStatus(state="CANCELLED", exit_code=rc, reason="cancelled by gh-run")
        if how == TIME_LIMIT:
            return JobStatus(state="TIMEOUT", exit_code=rc, reason="time limit reached")
        if how == STOPPED:
            return JobStatus(
                state="CANCELLED", exit_code=rc, reason="the local supervisor was signalled"
            )
        if rc == 0:
            return JobStatus(state="COMPLETED", exit_code=0)
        # The code and the signal are fields of their own: a reason repeating them would be
        # shown twice ("exit code 127 (exit code 127)").
        if rc > 128:
            return JobStatus(state="FAILED", exit_code=rc, signal=rc - 128)
        return JobStatus(state="FAILED", exit_code=rc)

    def cancel(self, run: Run) -> None:
        """SIGTERM to the supervisor, which stops the whole job (SIGTERM, then SIGKILL after the
        grace) and records its end; when the supervisor is gone, SIGKILL what is left of the
        job here."""
        if not run.job_id:
            return
        folder = Path(run.run_dir)
        (folder / "local_cancelled").write_text("cancelled by gh-run\n")
        pid = self._pid(run)
        # The supervisor leads its own session: a reused pid almost never does.
        if pid > 0 and self._alive(pid) and _session_of(pid) == pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                return
        job_file = folder / "local_job"
        text = job_file.read_text().strip() if job_file.is_file() else ""
        if text.isdigit():
            signal_job(int(text), signal.SIGKILL)


def _session_of(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def job_processes(sid: int) -> list[int]:
    """The job's live processes (zombies excluded): on Linux every process of its session or
    process group, read from /proc; elsewhere [sid] while its process group has a member."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(sid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [sid]
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 4 or fields[0] in ("Z", "X"):
            continue
        if sid in (int(fields[2]), int(fields[3])):
            found.append(int(entry.name))
    return found


def signal_job(sid: int, sig: int) -> None:
    """Send `sig` to the job's process group and to every other process of its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, sig)
    for pid in job_processes(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def supervise(argv: list[str]) -> int:
    """The supervisor (its own process; see the module docstring). argv: time limit (seconds),
    grace (seconds), script, stdout log, stderr log, run folder."""
    limit, grace = float(argv[0]), float(argv[1])
    script, out, err, folder = argv[2], argv[3], argv[4], Path(argv[5])
    # Signals wake the select() below through this pipe, so none is missed between checks.
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    asked: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: asked.append(n))
    signal.signal(signal.SIGCHLD, lambda _n, _f: None)

    def nap(seconds: float) -> None:
        select.select([wake_r], [], [], max(0.0, seconds))
        with contextlib.suppress(BlockingIOError):
            os.read(wake_r, 1024)

    with open(out, "ab") as fout, open(err, "ab") as ferr:
        job = subprocess.Popen(
            ["bash", script],
            stdin=subprocess.DEVNULL,
            stdout=fout,
            stderr=ferr,
            start_new_session=True,
        )
    _write_atomic(folder / "local_job", f"{job.pid}\n")

    how = ""
    deadline = time.monotonic() + limit
    while job.poll() is None:
        if asked:
            how = STOPPED
            break
        left = deadline - time.monotonic()
        if left <= 0:
            how = TIME_LIMIT
            break
        nap(left)

    def gone() -> bool:
        return job.poll() is not None and not job_processes(job.pid)

    if how or not gone():
        # The limit, a cancel, or processes the script left behind: TERM, then KILL.
        signal_job(job.pid, signal.SIGTERM)
        signal_job(job.pid, signal.SIGCONT)
        until = time.monotonic() + grace
        while not gone() and time.monotonic() < until:
            nap(0.1)
        # SIGKILL until nothing is left; a process stuck in the kernel may outlast it, and
        # then the end is recorded anyway after a while (ps shows what remains).
        until = time.monotonic() + 3 * grace + 10
        while not gone() and time.monotonic() < until:
            signal_job(job.pid, signal.SIGKILL)
            nap(0.1)
    rc = job.wait()
    status = 128 - rc if rc < 0 else rc
    _write_atomic(folder / "local_exit", f"{status} {how}".rstrip() + "\n")
    return 0


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
