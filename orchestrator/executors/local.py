"""The local executor: the very script SLURM would run, started with bash on this machine.

A supervisor (`supervise`, started as `python -c ...`, detached from gh-run in a session of its
own) makes itself a child subreaper (Linux `prctl(PR_SET_CHILD_SUBREAPER)`) and then starts the
job script. Every process the job starts stays below the supervisor, whatever it does: a child
that calls `setsid`, makes a process group of its own, or double-forks to become a daemon is
re-parented to the supervisor, not to init. So the job is the supervisor's process tree (read
from /proc), and the supervisor stops all of it as SLURM does, with SIGTERM and then SIGKILL
after a grace, in three cases: the time limit is reached, gh-run cancels the run (SIGTERM to the
supervisor), or the script ends and leaves processes behind. Only when no process of the job is
left does it write `local_exit`: the script's exit status, and `time-limit` when the limit
stopped it. So a local run turns terminal only once its job is gone, and its state is known
after gh-run has exited. A command's own exit status 124 or 137 is its own, never taken for a
time limit. (Without /proc or prctl, outside Linux, the job's session and process group stand
in for the tree.)

The end is recorded even when the job has filled the disk: `local_exit.reserved` is written
(and its space allocated) before the job starts, and the end status overwrites it in place and
renames it to `local_exit`, which needs no new space.

Files in the run folder: `local_pid` (the supervisor, written by the supervisor itself; the job
id is `local-<pid>`), `local_job` (the job script's pid, also its session and process group),
`local_exit`, and `local_cancelled` (gh-run's cancel).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.errors import RuntimeFailure
from orchestrator.core.units import parse_time
from orchestrator.executors.base import Executor, JobStatus, NotHere

if TYPE_CHECKING:  # the store is imported by what reads it, not by every executor user
    from orchestrator.site.cluster import Cluster
    from orchestrator.store.db import Run

# Seconds between SIGTERM and SIGKILL (the `-k 10` of the former `timeout` supervisor).
GRACE_SECONDS = 10.0
TIME_LIMIT = "time-limit"
STOPPED = "stopped"
_FILES = ("local_exit", "local_exit.reserved", "local_cancelled", "local_job", "local_pid")
RESERVED = "local_exit.reserved"
RESERVED_BYTES = 64
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
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

    @classmethod
    def not_here(cls, clusters: Sequence[Cluster], render_only: bool = False) -> NotHere | None:
        """Only where every cluster file allows it (`local_fallback`): without it a job meant
        for GPU nodes would run with bash on the submit host, often a shared login node."""
        barred = [c for c in clusters if not c.local_fallback]
        if not barred:
            return None
        from orchestrator.core.paths import display_path

        c = barred[0]
        src = display_path(Path(c.source)) if c.source else f"cluster {c.name}"
        return NotHere(
            f"cluster {c.name} does not let --executor auto run its jobs here",
            where=f"{src}: local_fallback",
            fix=f"submit from a {c.name} login node (where `sinfo` answers), or pass "
            "--executor local to run it on this machine anyway",
        )

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

    @staticmethod
    def started_job(run: Run) -> str | None:
        """The job id of the run's supervisor as its run folder records it (`local_pid`, which
        the supervisor writes itself), or None when no supervisor has started there."""
        try:
            text = (Path(run.run_dir) / "local_pid").read_text().strip()
        except OSError:
            return None
        return f"local-{text}" if text.isdigit() else None

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
            ended = _exit_text(folder)
            if ended is not None:
                out[run.run_id] = self._status_from_exit(ended, folder)
                continue
            pid = self._pid(run)
            if pid > 0 and self._alive(pid):
                out[run.run_id] = JobStatus(state="RUNNING")
            elif (ended := _exit_text(folder)) is not None:
                out[run.run_id] = self._status_from_exit(ended, folder)
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
        reason = gpu_oom_in_logs(folder)  # the GPU's memory, as PyTorch says in the log
        if rc > 128:
            return JobStatus(state="FAILED", exit_code=rc, signal=rc - 128, reason=reason)
        return JobStatus(state="FAILED", exit_code=rc, reason=reason)

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


def _proc_table() -> dict[int, tuple[int, int, int, str]] | None:
    """pid → (ppid, process group, session, state) of every process, from /proc (None without
    /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    table: dict[int, tuple[int, int, int, str]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 4:
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[3]), fields[0])
    return table


def tree_processes(root: int) -> list[int]:
    """The live processes below `root` (zombies excluded), from /proc."""
    table = _proc_table() or {}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if table[pid][3] not in ("Z", "X"):
            found.append(pid)
    return found


def job_processes(sid: int) -> list[int]:
    """The live processes of session or process group `sid` (zombies excluded), from /proc;
    elsewhere [sid] while its process group has a member."""
    table = _proc_table()
    if table is None:
        try:
            os.killpg(sid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [sid]
    return [
        pid
        for pid, (_, pgrp, session, state) in table.items()
        if state not in ("Z", "X") and sid in (pgrp, session)
    ]


def signal_job(sid: int, sig: int) -> None:
    """Send `sig` to the job's process group and to every other process of its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, sig)
    for pid in job_processes(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _become_subreaper() -> bool:
    """Make orphaned descendants this process's children (Linux only)."""
    import ctypes  # only the supervisor needs it: `render -x local` imports this module too

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _reap_orphans(keep: int) -> None:
    """Collect the exit status of orphans re-parented here (not the job script's: its status
    is read by Popen)."""
    me = os.getpid()
    for pid, (ppid, _, _, state) in (_proc_table() or {}).items():
        if ppid == me and pid != keep and state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def supervise(argv: list[str]) -> int:
    """The supervisor (its own process; see the module docstring). argv: time limit (seconds),
    grace (seconds), script, stdout log, stderr log, run folder."""
    limit, grace = float(argv[0]), float(argv[1])
    script, out, err, folder = argv[2], argv[3], argv[4], Path(argv[5])
    subreaper = _become_subreaper()
    # Who this is, before anything else: gh-run may die before it records the job id.
    _write_atomic(folder / "local_pid", f"{os.getpid()}\n")
    reserved = folder / RESERVED
    fd = os.open(reserved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, b" " * RESERVED_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
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
    with contextlib.suppress(OSError):  # only cancel's fallback reads it
        _write_atomic(folder / "local_job", f"{job.pid}\n")

    def left() -> list[int]:
        _reap_orphans(job.pid)
        if subreaper:
            return [p for p in tree_processes(os.getpid()) if p != job.pid or job.poll() is None]
        return job_processes(job.pid)

    def stop(sig: int) -> None:
        signal_job(job.pid, sig)
        for pid in left() if subreaper else []:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    how = ""
    deadline = time.monotonic() + limit
    while job.poll() is None:
        if asked:
            how = STOPPED
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            how = TIME_LIMIT
            break
        nap(remaining)

    def gone() -> bool:
        return job.poll() is not None and not left()

    if how or not gone():
        # The limit, a cancel, or processes the script left behind: TERM, then KILL.
        stop(signal.SIGTERM)
        stop(signal.SIGCONT)
        until = time.monotonic() + grace
        while not gone() and time.monotonic() < until:
            nap(0.1)
        # SIGKILL until nothing is left; a process stuck in the kernel may outlast it, and
        # then the end is recorded anyway after a while (ps shows what remains).
        until = time.monotonic() + 3 * grace + 10
        while not gone() and time.monotonic() < until:
            stop(signal.SIGKILL)
            nap(0.1)
    rc = job.wait()
    _reap_orphans(job.pid)
    status = 128 - rc if rc < 0 else rc
    _record_exit(folder, f"{status} {how}".rstrip() + "\n")
    return 0


def gpu_oom_in_logs(folder: Path, nbytes: int = 64 * 1024) -> str | None:
    """`GPU out of memory: ...` when a stderr log of the run folder ends with PyTorch's words
    for it (orchestrator/core/gpu_oom.py), else None."""
    from orchestrator.core import gpu_oom

    tails = []
    for err in sorted(folder.glob("*_log.err")):
        try:
            with open(err, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - nbytes))
                tails.append(fh.read().decode("utf-8", "replace"))
        except OSError:
            continue
    return gpu_oom.match(tails)


def _record_exit(folder: Path, text: str) -> None:
    """Overwrite the reserved file in place (its space is allocated) and rename it: this needs
    no free space, so a job that filled the disk still gets its end recorded."""
    data = text.encode().ljust(RESERVED_BYTES)[:RESERVED_BYTES]
    fd = os.open(folder / RESERVED, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(folder / RESERVED, folder / "local_exit")


def _exit_text(folder: Path) -> str | None:
    """The supervisor's end record: `local_exit`, or the reserved file already overwritten
    when renaming it failed."""
    for name in ("local_exit", RESERVED):
        try:
            text = (folder / name).read_text()
        except OSError:
            continue
        if text.strip():
            return text
    return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
