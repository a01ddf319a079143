"""Resume a campaign after a crash or a kill: no duplicate, no lost variant.

The plan is in the store before anything is sent, and each group's job id is recorded as soon
as sbatch answers. A group still PLANNED is either unsent, or sent by a gh-run that died before
recording the answer: its unique job name tells which (queue or accounting, like
runs.repair_intents). Found groups are recorded; only the others are sent.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.campaign import records as db
from orchestrator.campaign.submission import send
from orchestrator.executors.base import Warn
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.store import Store


def repair(store: Store, campaign_id: str, warn: Warn | None = None) -> list[str]:
    """Record the job ids of groups that reached SLURM but not the store; their names."""
    rec = db.get_campaign(store, campaign_id)
    members: dict[int, list[str]] = {}
    for v in db.variants_of(store, campaign_id):
        members.setdefault(v.group_index, []).append(v.run_id)
    found: list[str] = []
    for g in db.groups_of(store, campaign_id):
        if g.state != db.G_PLANNED:
            continue
        job_id: str | None = None
        if rec.executor == "slurm":
            job_id = SlurmExecutor(warn=warn).find_array_by_name(g.job_name)
        else:
            pid_file = Path(store.get_run(members[g.group_index][0]).run_dir) / "local_pid"
            if pid_file.is_file():
                job_id = pid_file.read_text().strip()
        if job_id:
            db.record_submission(
                store,
                g,
                job_id,
                members[g.group_index],
                f"repaired: found {g.job_name} by its name",
            )
            found.append(g.job_name)
    return found


def resume(store: Store, campaign_id: str, warn: Warn | None = None) -> tuple[list[str], list[str]]:
    """Repair, then send what was never sent: (groups found by name, send failures)."""
    found = repair(store, campaign_id, warn)
    failures = send(store, campaign_id, warn=warn)
    return found, failures
