"""Resume a campaign after a crash or a kill: no duplicate, no lost variant.

The plan is in the store before anything is sent. A group is claimed (PLANNED → SENDING, under
its lock file) before its sbatch and its job id recorded as soon as sbatch answers. So a group
not SUBMITTED is one of:

- PLANNED: never sent;
- SENDING with its lock free: claimed by a gh-run that died around its sbatch; sent or not;
- SENDING with its lock held: another gh-run is sending it right now (left alone);
- SUBMIT_FAILED: sbatch said no or did not answer; a lost answer may hide a queued job.

Before anything is sent, each of them is looked up by its unique job name (queue and
accounting, like runs.repair_intents): found ones are recorded, the others go back to PLANNED
and are sent. If SLURM cannot be asked, nothing is sent at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.campaign.submission import group_lock, send
from orchestrator.core.errors import RuntimeFailure
from orchestrator.executors.base import Warn
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store

UNSENT = {db.G_PLANNED, db.G_SENDING, db.G_FAILED}


@dataclass
class Repair:
    found: list[str] = field(default_factory=list)  # in SLURM already: recorded, not sent
    retried: list[str] = field(default_factory=list)  # submission had failed: sent again
    reclaimed: list[str] = field(default_factory=list)  # its sender died before sbatch
    busy: list[str] = field(default_factory=list)  # another gh-run is sending it now
    failures: list[str] = field(default_factory=list)  # send failures, as sentences


def _find(
    store: Store, executor: str, g: db.GroupRecord, first_run: str, warn: Warn | None
) -> str | None:
    if executor == "slurm":
        from orchestrator.runs.lifecycle import slurm_executor_for

        return slurm_executor_for(store.get_run(first_run), warn).find_array_by_name(g.job_name)
    pid_file = Path(store.get_run(first_run).run_dir) / "local_pid"
    if pid_file.is_file():
        return f"local-{pid_file.read_text().strip()}"  # the id LocalExecutor.submit returns
    return None


def repair(store: Store, campaign_id: str, warn: Warn | None = None) -> Repair:
    """Record the job ids of groups that reached SLURM but not the store; put the groups that
    did not reach it back to PLANNED. Raises RuntimeFailure, having sent nothing, when SLURM
    cannot be asked."""
    rec = db.get_campaign(store, campaign_id)
    members: dict[int, list[str]] = {}
    for v in db.variants_of(store, campaign_id):
        members.setdefault(v.group_index, []).append(v.run_id)
    out = Repair()
    for listed in db.groups_of(store, campaign_id):
        if listed.state not in UNSENT:
            continue
        with group_lock(store, campaign_id, listed.group_index) as held:
            if not held:
                out.busy.append(listed.job_name)
                continue
            g = db.get_group(store, campaign_id, listed.group_index)  # as of now, under the lock
            if g.state not in UNSENT:
                continue
            run_ids = members[g.group_index]
            job_id = _find(store, rec.executor, g, run_ids[0], warn)
            if job_id:
                db.record_submission(
                    store, g, job_id, run_ids, f"repaired: found {g.job_name} by its name"
                )
                out.found.append(g.job_name)
            elif g.state == db.G_FAILED:
                db.reopen_group(
                    store, g, run_ids, f"resume: {g.job_name} is not in SLURM; sending it again"
                )
                out.retried.append(g.job_name)
            elif g.state == db.G_SENDING:
                db.reopen_group(
                    store, g, run_ids, f"resume: {g.job_name} never reached SLURM; sending it"
                )
                out.reclaimed.append(g.job_name)
    return out


def resume(store: Store, campaign_id: str, warn: Warn | None = None) -> Repair:
    """Repair, then send what SLURM does not have."""
    try:
        out = repair(store, campaign_id, warn)
    except RuntimeFailure as exc:
        # Sending on "not found" when SLURM could not be asked would double queued jobs.
        raise RuntimeFailure(
            f"campaign {campaign_id}: nothing was sent, because {exc} "
            f"(`gh-run campaign resume {campaign_id}`)"
        ) from None
    out.failures = send(store, campaign_id, warn=warn)
    return out
