"""The campaign tables of the state store: campaigns, their groups (one sbatch each: a job
array or a single job) and their variants (each one run). Written before anything is sent."""

from __future__ import annotations

import json
import time
from typing import Any

from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.store import row_seal
from orchestrator.store.db import Run, Store, record, sql_limit

# Campaign states.
PLANNED = "PLANNED"  # plan in the store, submissions under way
SUBMITTED = "SUBMITTED"  # every group sent; jobs running
PASSED = "PASSED"  # every variant completed, no threshold crossed
REGRESSED = "REGRESSED"  # a threshold was crossed
FAILED = "FAILED"  # a variant did not complete
# every variant completed, no threshold crossed, but a threshold could not be evaluated (its
# figure not measured, a baseline that cannot judge): a failure of the judgement, never a pass
UNJUDGED = "UNJUDGED"
ENDED = {PASSED, REGRESSED, FAILED, UNJUDGED}

# Group states. PLANNED → SENDING (claimed by one gh-run, under the group's lock file, just
# before sbatch) → SUBMITTED (job id recorded) or SUBMIT_FAILED (sbatch said no, or no answer).
G_PLANNED = "PLANNED"
G_SENDING = "SENDING"
G_SUBMITTED = "SUBMITTED"
G_FAILED = "SUBMIT_FAILED"


class CampaignRecord(Strict):
    campaign_id: str
    name: str
    file: str | None
    campaign_json: str
    executor: str
    state: str
    baseline_id: str | None = None
    regressions: int | None = None
    report_dir: str | None = None
    created_at: float
    ended_at: float | None = None


class GroupRecord(Strict):
    campaign_id: str
    group_index: int
    job_name: str
    script: str
    size: int
    is_array: bool
    state: str
    job_id: str | None = None
    submitted_at: float | None = None
    # row_seal.py: the group's script is sent only while this is the user's seal for the home
    seal: str | None = None


class VariantRecord(Strict):
    campaign_id: str
    variant: str
    overrides_json: str
    group_index: int
    array_index: int
    run_id: str
    regressed: int | None = None

    @property
    def overrides(self) -> list[str]:
        return list(json.loads(self.overrides_json))


def write_plan(
    store: Store,
    campaign: CampaignRecord,
    groups: list[GroupRecord],
    variants: list[VariantRecord],
    runs: list[Run],
    notes: dict[str, str] | None = None,
) -> None:
    """The whole plan, every run as an INTENT row, in one transaction; `notes`: what a run's
    intent event adds (run id -> text), e.g. that its cluster file is not the site's."""
    notes = notes or {}
    run_rows = [store.sealed(r) for r in runs]
    cols = ", ".join(run_rows[0])
    marks = ", ".join(f":{k}" for k in run_rows[0])
    with store.tx() as db:
        c = campaign.model_dump()
        db.execute(
            f"INSERT INTO campaigns ({', '.join(c)}) VALUES ({', '.join(':' + k for k in c)})", c
        )
        g = [x.model_dump() for x in groups]
        for row in g:  # the key exists: the runs above were sealed with it
            row["seal"] = row_seal.seal_group(store.home_key, row)
        db.executemany(
            f"INSERT INTO campaign_groups ({', '.join(g[0])}) "
            f"VALUES ({', '.join(':' + k for k in g[0])})",
            g,
        )
        db.executemany(f"INSERT INTO runs ({cols}) VALUES ({marks})", run_rows)
        db.executemany(
            "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
            [
                (
                    r.run_id,
                    r.created_at,
                    r.state,
                    f"intent: campaign {campaign.campaign_id}"
                    + (f"; {notes[r.run_id]}" if r.run_id in notes else ""),
                )
                for r in runs
            ],
        )
        v = [x.model_dump() for x in variants]
        db.executemany(
            f"INSERT INTO campaign_variants ({', '.join(v[0])}) "
            f"VALUES ({', '.join(':' + k for k in v[0])})",
            v,
        )


def get_group(store: Store, campaign_id: str, group_index: int) -> GroupRecord:
    rows = store.rows(
        "SELECT * FROM campaign_groups WHERE campaign_id = ? AND group_index = ?",
        (campaign_id, group_index),
    )
    return record(GroupRecord, rows[0])


def claim_group(store: Store, group: GroupRecord) -> bool:
    """PLANNED → SENDING in one BEGIN IMMEDIATE transaction; False if another gh-run has it.

    Two `campaign resume` (or a `run` and a `resume`) may look at the same PLANNED group; only
    the one whose UPDATE changed the row may call sbatch, so a group is never sent twice.
    """
    with store.tx() as db:
        cur = db.execute(
            "UPDATE campaign_groups SET state = ?, submitted_at = ? "
            "WHERE campaign_id = ? AND group_index = ? AND state = ?",
            (G_SENDING, time.time(), group.campaign_id, group.group_index, G_PLANNED),
        )
        return cur.rowcount == 1


def reopen_group(store: Store, group: GroupRecord, run_ids: list[str], detail: str) -> None:
    """A SENDING (its sender died) or SUBMIT_FAILED group that SLURM does not have → PLANNED,
    its runs back to INTENT, so the next send() sends it."""
    now = time.time()
    with store.tx() as db:
        db.execute(
            "UPDATE campaign_groups SET state = ?, job_id = NULL, submitted_at = NULL "
            "WHERE campaign_id = ? AND group_index = ?",
            (G_PLANNED, group.campaign_id, group.group_index),
        )
        db.executemany(
            "UPDATE runs SET state = 'INTENT', reason = NULL, ended_at = NULL "
            "WHERE run_id = ? AND state IN ('INTENT', 'SUBMIT_FAILED')",
            [(r,) for r in run_ids],
        )
        db.executemany(
            "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, 'INTENT', ?)",
            [(r, now, detail) for r in run_ids],
        )


def record_submission(
    store: Store, group: GroupRecord, job_id: str, run_ids: list[str], detail: str
) -> None:
    """A group's job id, and each of its runs' (123_4 for array element 4), in one transaction.

    Runs marked SUBMIT_FAILED are updated too: sbatch may have lost its answer (a timeout)
    after the controller had queued the job, which `campaign resume` then finds by name.
    """
    now = time.time()
    with store.tx() as db:
        db.execute(
            "UPDATE campaign_groups SET state = ?, job_id = ?, submitted_at = ? "
            "WHERE campaign_id = ? AND group_index = ?",
            (G_SUBMITTED, job_id, now, group.campaign_id, group.group_index),
        )
        rows = []
        for i, run_id in enumerate(run_ids):
            jid = f"{job_id}_{i}" if group.is_array else job_id
            rows.append((jid, now, run_id))
        db.executemany(
            "UPDATE runs SET job_id = ?, state = 'PENDING', submitted_at = ?, reason = NULL, "
            "ended_at = NULL WHERE run_id = ? AND state IN ('INTENT', 'SUBMIT_FAILED')",
            rows,
        )
        db.executemany(
            "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, 'PENDING', ?)",
            [(run_id, now, f"{detail} as job {jid}") for jid, _, run_id in rows],
        )


def record_group_failure(store: Store, group: GroupRecord, run_ids: list[str], reason: str) -> None:
    now = time.time()
    with store.tx() as db:
        db.execute(
            "UPDATE campaign_groups SET state = ? WHERE campaign_id = ? AND group_index = ?",
            (G_FAILED, group.campaign_id, group.group_index),
        )
        db.executemany(
            "UPDATE runs SET state = 'SUBMIT_FAILED', reason = ?, ended_at = ? WHERE run_id = ?",
            [(reason, now, r) for r in run_ids],
        )
        db.executemany(
            "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, 'SUBMIT_FAILED', ?)",
            [(r, now, "not submitted: " + reason) for r in run_ids],
        )


def set_campaign(store: Store, campaign_id: str, **fields: Any) -> None:
    allowed = set(CampaignRecord.model_fields) - {"campaign_id"}
    bad = set(fields) - allowed
    if bad:
        raise ValueError(f"unknown campaign fields: {sorted(bad)}")
    sets = ", ".join(f"{k} = :{k}" for k in fields)
    with store.tx() as db:
        db.execute(
            f"UPDATE campaigns SET {sets} WHERE campaign_id = :cid", {**fields, "cid": campaign_id}
        )


def set_verdicts(store: Store, campaign_id: str, regressed: dict[str, bool]) -> None:
    """Each run's verdict (run name → regressed), for the bands of later nights."""
    with store.tx() as db:
        db.executemany(
            "UPDATE campaign_variants SET regressed = ? WHERE campaign_id = ? AND variant = ?",
            [(int(bad), campaign_id, name) for name, bad in regressed.items()],
        )


def get_campaign(store: Store, ref: str) -> CampaignRecord:
    """A campaign by id, unique id prefix, or `last`."""
    if ref == "last":
        rows = store.rows("SELECT * FROM campaigns ORDER BY created_at DESC LIMIT 1")
    else:
        rows = store.rows(
            "SELECT * FROM campaigns WHERE campaign_id = ? OR campaign_id LIKE ? "
            "ORDER BY created_at DESC",
            (ref, ref.replace("%", "").replace("_", "\\_") + "%"),
        )
        exact = [r for r in rows if r["campaign_id"] == ref]
        rows = exact or rows
    if not rows:
        raise UserError(f"no campaign {ref!r} in {store.path}; `gh-run campaign list` lists them")
    if len(rows) > 1:
        raise UserError(f"{ref!r} matches {len(rows)} campaigns; give more of the campaign id")
    return record(CampaignRecord, rows[0])


def list_campaigns(store: Store, name: str | None = None, limit: int = 50) -> list[CampaignRecord]:
    limit = sql_limit(limit)
    if name:
        rows = store.rows(
            "SELECT * FROM campaigns WHERE name = ? ORDER BY created_at DESC LIMIT ?", (name, limit)
        )
    else:
        rows = store.rows("SELECT * FROM campaigns ORDER BY created_at DESC LIMIT ?", (limit,))
    return [record(CampaignRecord, r) for r in rows]


def groups_of(store: Store, campaign_id: str) -> list[GroupRecord]:
    rows = store.rows(
        "SELECT * FROM campaign_groups WHERE campaign_id = ? ORDER BY group_index", (campaign_id,)
    )
    return [record(GroupRecord, r) for r in rows]


def variants_of(store: Store, campaign_id: str) -> list[VariantRecord]:
    rows = store.rows(
        "SELECT * FROM campaign_variants WHERE campaign_id = ? ORDER BY group_index, array_index",
        (campaign_id,),
    )
    return [record(VariantRecord, r) for r in rows]


def runs_of(store: Store, campaign_id: str) -> dict[str, Run]:
    """variant name → its run."""
    rows = store.rows(
        "SELECT r.*, v.variant AS v_name FROM runs r JOIN campaign_variants v "
        "ON v.run_id = r.run_id WHERE v.campaign_id = ? ORDER BY v.group_index, v.array_index",
        (campaign_id,),
    )
    out: dict[str, Run] = {}
    for row in rows:
        name = row.pop("v_name")
        out[name] = store.run_of(row)
    return out
