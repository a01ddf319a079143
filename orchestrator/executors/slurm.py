"""The SLURM executor: sbatch to submit, submitit to track, scancel to cancel.

Tracking goes through submitit: every job is a `submitit.SlurmJob`, and one shared watcher
per cluster asks `sacct` about all registered jobs in one batched call per poll, whatever their
number (`slurm_watch.py`). Every SLURM command goes through the cluster's transport
(orchestrator/transport/): on this machine, or on the login node over SSH. submitit is imported
only when a job is tracked: submitting, cancelling and reading logs do not need it, and commands
that only read the store must start fast.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core import gpu_oom
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.executors.base import Executor, JobStatus, NotHere, Warn
from orchestrator.executors.slurm_cli import SLURM_TIMEOUT_S as SLURM_TIMEOUT_S
from orchestrator.executors.slurm_cli import TAKES_CLUSTERS as TAKES_CLUSTERS
from orchestrator.executors.slurm_cli import UNREACHABLE as UNREACHABLE
from orchestrator.executors.slurm_cli import run_slurm as run_slurm
from orchestrator.executors.slurm_cli import with_clusters as with_clusters
from orchestrator.transport.base import Transport, TransportError
from orchestrator.transport.local import LOCAL

if TYPE_CHECKING:
    from orchestrator.executors.slurm_watch import GhRunWatcher, TrackedJob
    from orchestrator.site.cluster import Cluster
    from orchestrator.store.db import Run

# slurmstepd's own words when it kills a step over its --mem: jobacct_gather's OverMemoryKill
# ("Exceeded job memory limit"; SLURM then reports the job FAILED, not OUT_OF_MEMORY) or the
# cgroup OOM handler ("Detected N oom-kill event(s)"). Only slurmstepd's lines count.
MEMORY_KILL = re.compile(
    r"^slurmstepd(?:-[\w.-]+)?: error: (Exceeded (?:job|step) memory limit|"
    r"Detected \d+ oom[_-]kill events?)",
    re.MULTILINE,
)
LOG_TAIL_BYTES = 64 * 1024


def memory_kill_match(tails: Iterable[str]) -> str | None:
    """slurmstepd's memory-kill line in one of the given log tails, if any."""
    for text in tails:
        match = MEMORY_KILL.search(text)
        if match:
            return match.group(1)
    return None


# srun's own line for a task a signal ended ("srun: error: NODE: task 0: Killed", strsignal's
# words): sacct may give the job ExitCode 9:0 with no signal before the step's record says 0:9.
SRUN_KILLED = re.compile(r"^srun: error: \S+: tasks? [\d,-]+: Killed$", re.MULTILINE)


def srun_killed(tails: Iterable[str]) -> bool:
    """Whether srun said, in one of the given log tails, that SIGKILL ended a task."""
    return any(SRUN_KILLED.search(text) for text in tails)


def memory_kill_evidence(run_dir: Path, job_id: str) -> str | None:
    """slurmstepd's memory-kill line in the tail of one of the job's stderr logs, if any."""
    return memory_kill_match(LOCAL.tails(str(run_dir), job_id, LOG_TAIL_BYTES))


# sbatch --parsable's answer: `JOBID` or `JOBID;CLUSTER` (an array: its job id alone) on a line
PARSABLE = re.compile(r"\s*(\d+)(?:_\d+)?(?:;[\w.-]+)?\s*")


def parsable_job_id(stdout: str) -> str | None:
    """The job id in `sbatch --parsable`'s answer: the one line of stdout that is such an answer.
    Banners, notices and warnings that a site's sbatch wrapper or its plugins print around it are
    other lines; None when no line, or more than one, reads as an answer (then only the job's
    name can say which job it is)."""
    found = [m.group(1) for ln in stdout.splitlines() if (m := PARSABLE.fullmatch(ln))]
    return found[0] if len(found) == 1 else None


def slurm_reachable(
    timeout: float = 5.0, transport: Transport | None = None, clusters: str | None = None
) -> bool:
    """Whether a controller answers: the same one query (cached) that tells its cluster name
    (cluster_identity.controller_facts), so `--executor auto` and the identity check cost one."""
    from orchestrator.executors import cluster_identity

    try:
        cluster_identity.controller_facts(transport or LOCAL, clusters, timeout=timeout)
    except RuntimeFailure:
        return False
    return True


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """sacct/scontrol ExitCode `code:signal` → (code, signal)."""
    if not text or ":" not in text:
        return None, None
    code, _, sig = text.partition(":")
    try:
        return int(code), int(sig)
    except ValueError:
        return None, None


class SlurmExecutor(Executor):
    name = "slurm"
    launcher = "srun"

    def __init__(
        self,
        warn: Warn | None = None,
        transport: Transport | None = None,
        clusters: str | None = None,
    ) -> None:
        self._warn = warn
        self.transport = transport or LOCAL
        # --clusters for every SLURM command (a cluster file's slurm.multi_cluster, or what a
        # run recorded when it was submitted); None: the clients' own cluster.
        self.clusters = clusters
        if warn is not None:
            self.transport.warn = warn

    @classmethod
    def not_here(cls, clusters: Sequence[Cluster], render_only: bool = False) -> NotHere | None:
        """Where a controller answers (one cached query: the same that tells its cluster name).
        A script only printed for a cluster that bars the local executor is an srun script
        whether a controller answers or not: nothing to ask."""
        from orchestrator.executors.cluster_identity import clusters_option

        unscheduled = next((c for c in clusters if c.scheduler == "none"), None)
        if unscheduled is not None:
            return NotHere(f"cluster {unscheduled.name} has no scheduler (scheduler: none)")
        if render_only and any(not c.local_fallback for c in clusters):
            return None
        if slurm_reachable(clusters=clusters_option(clusters[0]) if clusters else None):
            return None
        return NotHere("no SLURM controller answers on this machine")

    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run_slurm(
            argv, stdin=stdin, transport=self.transport, env=env, clusters=self.clusters
        )

    @property
    def job_class(self) -> type[TrackedJob]:
        """The tracked-job class of this executor's cluster (its watcher: one batched sacct
        per poll for all of the user's runs there)."""
        from orchestrator.executors.slurm_watch import job_class

        cls = job_class(self.transport, self.clusters)
        cls.watcher.warn = self._warn
        return cls

    @property
    def watcher(self) -> GhRunWatcher:
        return self.job_class.watcher

    def submit(self, script: Path, run: Run) -> str:
        return self.sbatch(script, env=secrets_of(run), job_name=run.job_name)

    def sbatch(
        self,
        script: Path | str,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        job_name: str | None = None,
    ) -> str:
        """sbatch --parsable SCRIPT (a single job or a whole job array); the job id.

        `env`: variables the job must get from here (secrets named by the spec), for a remote
        sbatch whose environment is the login node's (locally sbatch inherits them anyway).
        `job_name`: the script's unique job name, by which a job whose answer holds no clear id
        is found (`parsable_job_id`); without it, or when SLURM cannot say, the submission is
        reported as one that may have run (the caller keeps its intent for the repair).
        """
        try:
            res = self.run(
                ["sbatch", "--parsable", *extra, str(script)],
                env=env if self.transport.remote else None,
            )
        except TransportError as exc:
            if not exc.maybe_ran:
                raise TransportError(f"{exc}; nothing was submitted", maybe_ran=False) from None
            raise
        job_id = parsable_job_id(res.stdout)
        if res.returncode != 0 and job_id is not None:
            # a job id printed, then a failure (a site wrapper's own step after sbatch): the
            # job is queued, and is recorded as such
            if self._warn is not None:
                why = " ".join(res.stderr.split()) or "no message"
                self._warn(f"sbatch exited {res.returncode} after submitting job {job_id} ({why})")
            return job_id
        if res.returncode != 0:
            msg = " ".join(res.stderr.split()) or f"sbatch exited {res.returncode}"
            msg = msg.removeprefix("sbatch: error: ")
            if UNREACHABLE.search(msg):
                raise RuntimeFailure(
                    f"the SLURM controller could not be reached ({msg}); nothing was submitted: "
                    "check that slurmctld is up (`sinfo`) and submit again"
                )
            raise UserError(
                f"the SLURM controller refused the job: {msg}; change the request in the "
                "spec (resources/partition) to fit the partition"
            )
        if job_id is None:
            job_id = self._unclear_answer(res.stdout, job_name)
        return job_id

    def _unclear_answer(self, stdout: str, job_name: str | None) -> str:
        """The id of a job sbatch submitted (exit 0) without a clear answer, found by its unique
        name; a TransportError that may have run (the caller keeps the intent, and `status`
        repairs it by name later) when the name is unknown or SLURM cannot say yet."""
        shown = " ".join(stdout.split())[:200] or "nothing"
        if job_name is not None:
            try:
                found = self.find_array_by_name(job_name)
            except RuntimeFailure:
                found = None
            if found is not None:
                if self._warn is not None:
                    self._warn(
                        f"sbatch's answer held no clear job id ({shown!r}): found job {found} by"
                        f" its name {job_name}"
                    )
                return found
        raise TransportError(
            f"sbatch succeeded, but its answer held no clear job id ({shown!r})",
            maybe_ran=True,
        )

    def test_only(self, script_text: str) -> tuple[bool, str]:
        """Ask the controller whether it would run the script (`sbatch --test-only`, the
        script on stdin: nothing needs to be copied to a remote cluster for it)."""
        res = self.run(["sbatch", "--test-only"], stdin=script_text)
        text = " ".join((res.stderr + res.stdout).split())
        text = text.replace("sbatch: error: ", "").replace("sbatch: ", "")
        if res.returncode != 0 and UNREACHABLE.search(text):
            raise RuntimeFailure(f"the SLURM controller could not be reached ({text})")
        return res.returncode == 0, text

    def job(self, run: Run) -> TrackedJob:
        assert run.job_id
        return self.job_class(folder=run.run_dir, job_id=run.job_id)

    def poll(self, runs: list[Run]) -> dict[str, JobStatus]:
        jobs = {run.run_id: self.job(run) for run in runs if run.job_id}
        self.watcher.update()
        out: dict[str, JobStatus] = {}
        for run_id, job in jobs.items():
            info: dict[str, Any] = self.watcher.get_info(job.job_id, mode="cache")
            raw = (info.get("State") or "UNKNOWN").split()
            state = raw[0] if raw else "UNKNOWN"
            code, sig = parse_exit_code(info.get("ExitCode"))
            _, step_sig = parse_exit_code(info.get("DerivedExitCode"))
            sig = sig or step_sig
            reason = info.get("Reason") or None
            if reason in ("None", "(null)"):
                reason = None
            if state == "FAILED":
                # Without cgroups (jobacct_gather OverMemoryKill) SLURM reports a step SIGKILLed
                # over its --mem as FAILED; slurmstepd says why in the step's stderr. (Not the
                # signal: sacct's DerivedExitCode may still read 0:0 when the job is FAILED.)
                tails = self.transport.tails(str(job.paths.folder), job.job_id, LOG_TAIL_BYTES)
                evidence = memory_kill_match(tails)
                if evidence:
                    state = "OUT_OF_MEMORY"
                    reason = f"slurmstepd: {evidence}; sacct state FAILED" + (
                        f"; {reason}" if reason else ""
                    )
                elif gpu := gpu_oom.match(tails):  # the GPU's memory: PyTorch says so
                    reason = gpu + (f"; {reason}" if reason else "")
                elif not sig and srun_killed(tails):
                    sig = 9
            out[run_id] = JobStatus(
                state=state,
                exit_code=code,
                signal=sig or None,
                reason=reason,
                nodes=info.get("NodeList") or None,
            )
        return out

    def cancel(self, run: Run) -> None:
        if not run.job_id:
            return
        from orchestrator.executors import cluster_identity

        # The same job id on another cluster is another job: never scancel it there.
        cluster_identity.check_run(run, self.transport, "nothing was cancelled")
        res = self.run(["scancel", run.job_id])
        if res.returncode != 0:
            raise RuntimeFailure(f"scancel {run.job_id} failed: {res.stderr.strip()}")

    def find_by_name(self, job_name: str) -> str | None:
        """The job id of a job with this (unique) name, from the queue or accounting.

        Raises RuntimeFailure when the controller cannot be asked (see find_all_by_name).
        """
        ids = self.find_all_by_name(job_name)
        return ids[-1] if ids else None

    def find_all_by_name(self, job_name: str) -> list[str]:
        """Every job id carrying this name (queue and accounting), oldest first.

        A run's retries reuse its job name, so repairing an interrupted retry looks for an id
        newer than the one already recorded.

        "Not found" must mean SLURM said so: callers send the job again on it. So when the
        controller cannot be asked this raises RuntimeFailure instead of answering []. When
        only accounting (sacct) fails, the controller's answer stands (with --states=all it
        still holds jobs that ended less than MinJobAge ago), and that is said once.
        """
        found: set[str] = set()
        # --states=all: the controller keeps an ended job for MinJobAge, while accounting may
        # not have it yet (slurmdbd lags by seconds); a job that ran in under a second is in
        # neither the default squeue nor sacct right after sbatch answered.
        res = self.run(["squeue", "-h", "--states=all", "-o", "%i", "--name", job_name])
        if res.returncode != 0:
            why = " ".join(res.stderr.split()) or f"squeue exited {res.returncode}"
            raise RuntimeFailure(
                f"the SLURM controller could not be asked whether a job named {job_name} exists "
                f"({why}); try again once `sinfo` answers"
            )
        found.update(res.stdout.split())
        argv = ["sacct", "-n", "-X", "-P", "-o", "JobID", "--name", job_name, "-S", "now-7days"]
        acct_error: str | None = None
        try:
            res = self.run(argv)
            if res.returncode != 0:
                acct_error = " ".join(res.stderr.split()) or f"sacct exited {res.returncode}"
        except TransportError:
            raise
        except RuntimeFailure as exc:  # sacct missing or hung: the same as slurmdbd down
            acct_error = str(exc)
        if acct_error is None:
            found.update(i for i in res.stdout.split() if i)
        else:
            self.watcher.accounting_unavailable(
                acct_error,
                "relying on the controller alone (squeue/scontrol), which forgets jobs that "
                "ended more than MinJobAge ago",
            )
        return sorted(found, key=lambda j: [int(x) for x in re.findall(r"\d+", j)])

    def find_array_by_name(self, job_name: str) -> str | None:
        """The (array) job id of the newest job with this unique name, from the queue or
        accounting: 123 for an array whose elements show as 123_0, 123_[1-5%2].

        Raises RuntimeFailure when the controller cannot be asked (see find_all_by_name).
        """
        found = {
            int(m.group()) for i in self.find_all_by_name(job_name) if (m := re.match(r"\d+", i))
        }
        return str(max(found)) if found else None

    def requeue_count(self, job_id: str) -> tuple[str, int] | None:
        """The controller's state of the job and how often SLURM has requeued it (scontrol's
        Restarts), or None when the controller no longer holds the job.

        Used to tell a job SLURM requeued (same id, restart count grown) from an accounting
        answer that lags behind the controller: slurmdbd may still say PENDING for a job that
        the controller already runs.
        """
        res = self.run(["scontrol", "show", "job", "-o", job_id])
        if res.returncode != 0 and UNREACHABLE.search(res.stderr):
            # Not knowing is not "gone": deciding on a retry now could double the job.
            raise RuntimeFailure(
                f"the SLURM controller could not be reached to check job {job_id}; will ask again"
            )
        fields = dict(re.findall(r"(\w+)=(\S*)", res.stdout)) if res.returncode == 0 else {}
        if "JobState" not in fields or not fields.get("Restarts", "").isdigit():
            return None
        return fields["JobState"], int(fields["Restarts"])

    def stdout_path(self, run: Run) -> Path:
        return Path(self.job(run).paths.stdout)


def secrets_of(run: Run) -> dict[str, str]:
    """The secrets the run's spec names (workload.secret_env), from this environment."""
    from orchestrator.spec.job import JobSpec

    names = JobSpec.model_validate_json(run.spec_json).workload.secret_env
    return {n: os.environ[n] for n in names if n in os.environ}
