"""submitit's side of the SLURM executor: the batched sacct watcher and the tracked job.

Our watcher asks sacct for more columns (ExitCode, Reason, DerivedExitCode) and, when
accounting does not answer (slurmdbd down, accounting disabled) or does not know a job yet,
falls back to one `squeue` call and, for jobs already gone from the queue, `scontrol show job`,
and says so. Every command goes through the cluster's transport (this machine, or its login
node over SSH): one watcher per cluster, one batched sacct per poll for all of the user's runs
there. Imported only when jobs are tracked (see `slurm.py`).
"""

from __future__ import annotations

import re
import time

import submitit
from submitit.slurm.slurm import SlurmInfoWatcher, read_job_id

from orchestrator.core.errors import RuntimeFailure
from orchestrator.executors.base import Warn
from orchestrator.executors.slurm_cli import UNREACHABLE, run_slurm
from orchestrator.transport.base import Transport, TransportError
from orchestrator.transport.local import LOCAL


class GhRunWatcher(SlurmInfoWatcher):
    """submitit's batched sacct watcher, with ExitCode/Reason and a squeue/scontrol fallback."""

    def __init__(
        self, delay_s: int = 60, transport: Transport | None = None, clusters: str | None = None
    ) -> None:
        super().__init__(delay_s=delay_s)
        self.transport = transport or LOCAL
        self.clusters = clusters  # --clusters of every command (None: the clients' own)
        self.warn: Warn | None = None
        self.fallback_reason: str | None = None
        self.fallback_calls = 0
        self._warned = False

    def accounting_unavailable(self, why: str, consequence: str) -> None:
        """Say once per process that sacct does not answer: tracking and name lookups may
        each notice it first, and it is one fact."""
        if self.warn and not self._warned:
            self.warn(f"accounting (sacct) unavailable: {why}; {consequence}")
            self._warned = True

    def _make_command(self) -> list[str] | None:
        cmd = super()._make_command()
        if cmd is None:
            return None
        # DerivedExitCode: the worst step's code:signal (a task killed by a signal shows there).
        cmd[2] = "JobID,State,NodeList,ExitCode,Reason,DerivedExitCode"
        return cmd

    def update(self) -> None:
        command = self._make_command()
        if command is None:
            return
        self._num_calls += 1
        pending = {x.split("_")[0] for x in self._registered - self._finished}
        info: dict[str, dict[str, str]] = {}
        try:
            res = run_slurm(command, transport=self.transport, clusters=self.clusters)
            if res.returncode != 0:
                raise OSError(
                    res.stderr.strip().splitlines()[-1]
                    if res.stderr.strip()
                    else f"sacct exited {res.returncode}"
                )
            info = self.read_info(res.stdout)
            self.fallback_reason = None
        except TransportError:
            raise  # the login node, not accounting, is unreachable: the caller backs off
        except (OSError, RuntimeFailure) as exc:
            self.fallback_reason = f"accounting (sacct) unavailable: {exc}"
            self.accounting_unavailable(str(exc), "falling back to squeue/scontrol")
        # An array's elements come back as 123_4 (or 123_[5-9%2] while pending): known.
        arrays = {k.split("_")[0] for k in info if "_" in k}
        missing = sorted(j for j in pending if j not in info and j not in arrays)
        if missing:
            info.update(self._fallback(missing))
        self._info_dict.update(info)
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def _fallback(self, job_ids: list[str]) -> dict[str, dict[str, str]]:
        """squeue for queued/running jobs; scontrol for jobs that just left the queue."""
        self.fallback_calls += 1
        out: dict[str, dict[str, str]] = {}
        try:
            res = run_slurm(
                ["squeue", "-h", "-o", "%i|%T|%N|%r", "-j", ",".join(job_ids)],
                transport=self.transport,
                clusters=self.clusters,
            )
            for line in res.stdout.splitlines():
                jid, state, nodes, reason = ([*line.split("|"), "", "", "", ""])[:4]
                row = {"JobID": jid, "State": state, "NodeList": nodes, "Reason": reason}
                out[jid.strip()] = row
                if "_[" in jid:  # a pending array range, 123_[2-5%2]: one entry per element
                    for parts in read_job_id(jid.strip()):
                        lo, hi = int(parts[1]), int(parts[-1])
                        out.update({f"{parts[0]}_{i}": row for i in range(lo, hi + 1)})
        except TransportError:
            raise
        except RuntimeFailure:
            return out
        if res.returncode != 0 and UNREACHABLE.search(res.stderr) and self.fallback_reason:
            # Neither accounting nor the controller answers: say so; callers retry with backoff.
            raise RuntimeFailure(
                f"neither sacct nor squeue can reach SLURM ({' '.join(res.stderr.split())})"
            )
        arrays = {k.split("_")[0] for k in out if "_" in k}
        for jid in job_ids:
            if jid in out or jid in arrays:
                continue
            try:
                res = run_slurm(
                    ["scontrol", "show", "job", "-o", jid],
                    transport=self.transport,
                    clusters=self.clusters,
                )
            except TransportError:
                raise
            except RuntimeFailure:
                continue
            fields = dict(re.findall(r"(\w+)=(\S*)", res.stdout))
            if res.returncode == 0 and "JobState" in fields:
                out[jid] = {
                    "JobID": jid,
                    "State": fields["JobState"],
                    "NodeList": fields.get("NodeList", ""),
                    "ExitCode": fields.get("ExitCode", ""),
                    "Reason": fields.get("Reason", ""),
                }
        return out


class TrackedJob(submitit.SlurmJob):  # type: ignore[type-arg]
    """A submitit SlurmJob sharing gh-run's watcher (one batched sacct for all jobs); this
    class's watcher is this machine's, `job_class` makes one per remote cluster."""

    watcher = GhRunWatcher(delay_s=60)


_JOB_CLASSES: dict[tuple[str, str | None], type[TrackedJob]] = {(LOCAL.key, None): TrackedJob}


def job_class(transport: Transport, clusters: str | None = None) -> type[TrackedJob]:
    """The TrackedJob class whose watcher polls this transport's cluster (`clusters`: the one
    named with --clusters): one batched sacct per poll for all of the user's runs there."""
    key = (transport.key, clusters)
    cls = _JOB_CLASSES.get(key)
    if cls is None:
        watcher = GhRunWatcher(delay_s=60, transport=transport, clusters=clusters)
        cls = _JOB_CLASSES[key] = type("TrackedJob", (TrackedJob,), {"watcher": watcher})
    return cls
