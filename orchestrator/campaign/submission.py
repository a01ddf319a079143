"""Planning and sending a campaign: variants → prepared specs → groups (one job array per
partition + resources) → the plan in the store → one sbatch per group.

Order of events, so a crash at any point is repairable (resume.py): every run folder and
group script is written to disk, then the whole plan (campaign, groups, variants, every run
as an INTENT row) is committed in one transaction, and only then is each group sent; each
group's job id is recorded the moment sbatch answers.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from orchestrator import runs as R
from orchestrator import yamlio
from orchestrator.campaign import records as db
from orchestrator.campaign.model import Campaign, apply_overrides, expand, job_path
from orchestrator.cluster import Cluster, find_cluster_file, load_cluster, validate_job
from orchestrator.errors import GhRunError, UserError
from orchestrator.executors.base import Warn
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import SlurmExecutor, run_slurm
from orchestrator.render import RenderedJob, array_key, render_array
from orchestrator.spec import JobSpec
from orchestrator.store import Run, Store

DEFAULT_MAX_ARRAY_SIZE = 1001  # SLURM's default MaxArraySize (indices 0..1000)


@dataclass
class PlannedRun:
    variant: str
    overrides: tuple[str, ...]
    prep: R.Prepared
    run: Run
    rendered: RenderedJob


def new_campaign_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def campaign_dir(home: Path, campaign_id: str) -> Path:
    return home / "campaigns" / campaign_id


def max_array_size() -> int:
    """The controller's MaxArraySize (one `scontrol show config`); the largest index + 1."""
    res = run_slurm(["scontrol", "show", "config"])
    for line in res.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return int(value.strip())
    return DEFAULT_MAX_ARRAY_SIZE


def _prepare_variants(
    campaign: Campaign, file: Path, extra: Sequence[str]
) -> list[tuple[str, tuple[str, ...], R.Prepared]]:
    """Every variant's JobSpec, validated against its partition; the base file is read once."""
    src = yamlio.display_path(file)
    base_path = job_path(file, campaign)
    base = yamlio.read_file(base_path)
    clusters: dict[str, Cluster] = {}
    out = []
    for v in expand(campaign, src):
        overrides = (*v.overrides, *extra)
        doc = copy.deepcopy(base)
        try:
            spec = yamlio.to_model(apply_overrides(doc, overrides), JobSpec)
        except UserError as exc:
            raise UserError(f"{src}: variant {v.name}: {exc}") from None
        workdir = getattr(spec.workload, "workdir", None)
        if workdir and not Path(workdir).is_absolute() and "$" not in workdir:
            spec.workload.workdir = str((base_path.parent / workdir).resolve())
        if spec.cluster not in clusters:
            try:
                find_cluster_file(spec.cluster)
            except UserError as exc:
                raise UserError(f"{src}: variant {v.name}: cluster: {exc}") from None
            clusters[spec.cluster] = load_cluster(spec.cluster)
        cl = clusters[spec.cluster]
        part_name, part = validate_job(spec, cl, f"{src}: variant {v.name}")
        out.append((v.name, overrides, R.Prepared(spec, base_path, cl, part_name, part)))
    return out


def plan(
    store: Store,
    campaign: Campaign,
    file: Path,
    home: Path,
    executor: str,
    extra_overrides: Sequence[str] = (),
) -> str:
    """Prepare, render and record the whole campaign; nothing is sent. Returns its id."""
    prepared = _prepare_variants(campaign, file, extra_overrides)
    cid = new_campaign_id(campaign.name)
    cdir = campaign_dir(home, cid)
    cdir.mkdir(parents=True, mode=0o700)
    launcher = "direct" if executor == "local" else "srun"
    planned: list[PlannedRun] = []
    for name, overrides, prep in prepared:
        run_id = f"{cid}.{name}"
        run_dir = R.run_dir_for(prep.cluster, home, run_id)
        rendered = R.render(prep, run_id, run_dir, launcher)
        R.write_run_folder(run_dir, rendered, prep.spec)
        planned.append(
            PlannedRun(
                name,
                overrides,
                prep,
                Run(
                    run_id=run_id,
                    name=prep.spec.name,
                    job_name=rendered.context.job_name,
                    spec_path=str(prep.spec_path),
                    spec_json=prep.spec.model_dump_json(),
                    cluster=prep.cluster.name,
                    partition=prep.partition_name,
                    executor=executor,
                    run_dir=str(run_dir),
                    campaign_id=cid,
                    variant=name,
                ),
                rendered,
            )
        )
    # Group: variants that share partition and resources go out as one array (slurm only).
    buckets: dict[tuple[object, ...], list[PlannedRun]] = {}
    for p in planned:
        key: tuple[object, ...] = (
            (p.prep.cluster.name, array_key(p.rendered.context, p.rendered.template))
            if executor == "slurm"
            else (p.run.run_id,)
        )
        buckets.setdefault(key, []).append(p)
    limit = max_array_size() if executor == "slurm" and len(planned) > 1 else 1
    chunks: list[list[PlannedRun]] = []
    for members in buckets.values():
        chunks += [members[i : i + limit] for i in range(0, len(members), limit)]
    groups: list[db.GroupRecord] = []
    variants: list[db.VariantRecord] = []
    for gi, members in enumerate(chunks):
        if len(members) > 1:
            job_name = f"ghr-{cid}-g{gi}"
            arr = render_array(
                [m.rendered for m in members], job_name, str(cdir), campaign.max_parallel
            )
            script = cdir / f"group{gi}.sbatch"
            script.write_text(arr.script)
            script.chmod(0o700)
            is_array = True
        else:
            job_name = members[0].run.job_name
            script = Path(members[0].run.run_dir) / "job.sbatch"
            is_array = False
        groups.append(
            db.GroupRecord(
                campaign_id=cid,
                group_index=gi,
                job_name=job_name,
                script=str(script),
                size=len(members),
                is_array=is_array,
                state=db.G_PLANNED,
            )
        )
        for ai, m in enumerate(members):
            variants.append(
                db.VariantRecord(
                    campaign_id=cid,
                    variant=m.variant,
                    overrides_json=json.dumps(list(m.overrides)),
                    group_index=gi,
                    array_index=ai,
                    run_id=m.run.run_id,
                )
            )
    record = db.CampaignRecord(
        campaign_id=cid,
        name=campaign.name,
        file=str(file.resolve()),
        campaign_json=campaign.model_dump_json(),
        executor=executor,
        state=db.PLANNED,
        created_at=time.time(),
    )
    db.write_plan(store, record, groups, variants, [p.run for p in planned])
    return cid


def send(
    store: Store,
    campaign_id: str,
    *,
    hold: bool = False,
    warn: Warn | None = None,
    on_group: Callable[[db.GroupRecord, str], None] | None = None,
) -> list[str]:
    """Send every group still PLANNED (one sbatch each); returns the failures, as sentences."""
    rec = db.get_campaign(store, campaign_id)
    members: dict[int, list[str]] = {}
    for v in db.variants_of(store, campaign_id):
        members.setdefault(v.group_index, []).append(v.run_id)
    failures: list[str] = []
    for g in db.groups_of(store, campaign_id):
        if g.state != db.G_PLANNED:
            continue
        run_ids = members[g.group_index]
        try:
            if rec.executor == "slurm":
                job_id = SlurmExecutor(warn=warn).sbatch(Path(g.script), ["--hold"] if hold else [])
            else:
                run = store.get_run(run_ids[0])
                ex = LocalExecutor(time_limit=_time_limit(Path(g.script)))
                job_id = ex.submit(Path(g.script), run)
        except GhRunError as exc:
            db.record_group_failure(store, g, run_ids, str(exc))
            failures.append(f"group {g.group_index} ({g.size} variants): {exc}")
            continue
        what = f"array of {g.size}" if g.is_array else "single job"
        db.record_submission(store, g, job_id, run_ids, f"submitted ({what}, {g.job_name})")
        if on_group:
            on_group(g, job_id)
    if rec.state == db.PLANNED:
        db.set_campaign(store, campaign_id, state=db.SUBMITTED)
    return failures


def _time_limit(script: Path) -> str | None:
    for line in script.read_text().splitlines():
        if line.startswith("#SBATCH --time="):
            return line.split("=", 1)[1]
    return None


def resolve_executor(kind: str) -> str:
    if kind == "auto":
        from orchestrator.executors.slurm import slurm_reachable

        return "slurm" if slurm_reachable() else "local"
    return kind


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")
