"""Planning and sending a campaign: variants → prepared specs → groups (one job array per
partition + resources) → the plan in the store → one sbatch per group.

Order of events, so a crash at any point is repairable (resume.py): every run folder and
group script is written to disk, then the whole plan (campaign, groups, variants, every run
as an INTENT row) is committed in one transaction, and only then is each group sent: under
its lock file, claimed in the store (PLANNED → SENDING), sbatch, and its job id recorded the
moment sbatch answers.

On a cluster reached over SSH, run folders and group scripts are written into this machine's
mirror of the cluster's runs root; `send` copies all of them with one rsync before the first
sbatch, so a campaign costs the same few round trips whatever its number of variants.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from orchestrator.campaign.model import (
    Campaign,
    apply_overrides,
    check_size,
    expand,
    job_path,
)
from orchestrator.campaign.results import check_pinned_baseline
from orchestrator.checks import preflight
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.core.paths import mirror_root
from orchestrator.executors import choose, cluster_identity
from orchestrator.executors.base import Warn
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import secrets_of
from orchestrator.render.scripts import RenderedJob, array_key, render_array
from orchestrator.runs import lifecycle as R
from orchestrator.site.cluster import Cluster, find_cluster_file, load_cluster
from orchestrator.spec import yamlio
from orchestrator.spec.job import JobSpec
from orchestrator.store import campaigns as db
from orchestrator.store.db import Run, Store
from orchestrator.transport import registry
from orchestrator.transport.base import Transport, TransportError
from orchestrator.transport.local import LOCAL

T = TypeVar("T")
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


@contextlib.contextmanager
def group_lock(store: Store, campaign_id: str, group_index: int) -> Iterator[bool]:
    """Hold `group<N>.lock` while sending or repairing a group; yields False if it is busy.

    The kernel drops the lock when its holder dies (even by SIGKILL), so a group found
    SENDING with its lock free was claimed by a gh-run that is gone: resume may repair it. A
    busy lock means another live gh-run is on that group right now: leave it alone.
    """
    path = campaign_dir(store.home, campaign_id) / f"group{group_index}.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by sbatch (O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def max_array_size(transport: Transport | None = None, clusters: str | None = None) -> int:
    """The controller's MaxArraySize, the largest index + 1: from the `scontrol show config`
    that confirmed the cluster's identity (one per process)."""
    from orchestrator.executors.cluster_identity import controller_facts

    size = controller_facts(transport or LOCAL, clusters).max_array_size
    return size if size is not None else DEFAULT_MAX_ARRAY_SIZE


PreparedVariants = list[tuple[str, tuple[str, ...], R.Prepared]]


def prepare_variants(
    campaign: Campaign,
    file: Path,
    extra: Sequence[str],
    home: Path,
    max_variants: int | None = None,
) -> PreparedVariants:
    """Everything checkable before the state store is opened, so bad input writes nothing:
    every variant's JobSpec validated against its partition (the base file read once), and a
    pinned baseline that must exist in the gh-run home's store."""
    src = yamlio.display_path(file)
    check_size(campaign, src, max_variants)  # from the axes, before anything is expanded
    # A wrong pinned baseline would otherwise surface only after every job ran.
    check_pinned_baseline(home, campaign, src)
    base_path = job_path(file, campaign)
    base = yamlio.read_file(base_path)
    clusters: dict[str, Cluster] = {}
    out = []
    for v in expand(campaign, src, max_variants):
        overrides = (*v.overrides, *extra)
        doc = copy.deepcopy(base)
        try:
            spec = yamlio.to_model(apply_overrides(doc, overrides), JobSpec)
        except UserError as exc:
            raise UserError(f"{src}: variant {v.name}: {exc}") from None
        if spec.artifacts.reports is None:
            # a campaign moves metrics, not reports: the jobs' analyses come back, the reports
            # they analysed stay on the cluster (the job spec says otherwise with fetch)
            spec.artifacts.reports = "leave"
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
        where = f"{src}: variant {v.name}"
        part_name, part = preflight.fit_partition(spec, cl, where)
        # What a single submit checks on the submit host, checked here before anything is
        # written or sent (a missing image would otherwise fail every array element).
        preflight.check_submit_host(
            spec,
            f"{where} (job {yamlio.display_path(base_path)})",
            remote=cl.transport != "local",
        )
        out.append((v.name, overrides, R.Prepared(spec, base_path, cl, part_name, part)))
    return out


def plan(
    store: Store,
    campaign: Campaign,
    file: Path,
    home: Path,
    executor: str,
    extra_overrides: Sequence[str] = (),
    array_limit: int | None = None,
    prepared: PreparedVariants | None = None,
    slurm_clusters: dict[str, str] | None = None,
) -> str:
    """Prepare, render and record the whole campaign; nothing is sent. Returns its id.

    `array_limit`: the most elements per job array; None asks the controller (MaxArraySize).
    `prepared`: what `prepare_variants` returned, when the caller checked before opening the
    store (with `extra_overrides` already in it). `slurm_clusters`: the SLURM cluster each
    cluster file's jobs go to, as `confirm_clusters` confirmed it (recorded in every run, so
    that sending, tracking and cancelling later refuse a controller of another cluster).
    """
    store.require_writable()
    if prepared is None:
        prepared = prepare_variants(campaign, file, extra_overrides, store.home)
    cid = new_campaign_id(campaign.name)
    cdir = campaign_dir(home, cid)
    launcher = "direct" if executor == "local" else "srun"
    transports: dict[str, Transport] = {}
    roots: dict[str, str] = {}
    slurm_names = slurm_clusters or {}
    for _, _, prep in prepared:
        if prep.cluster.name not in transports:
            if executor == "local":
                transports[prep.cluster.name] = LOCAL
                choose.choose_executor("local", cluster=prep.cluster)  # refuses a remote cluster
            else:
                transport = transports[prep.cluster.name] = choose.transport_for(prep.cluster)
                roots[prep.cluster.name] = R.cluster_runs_root(prep.cluster, home, transport)
    cdir.mkdir(parents=True, mode=0o700)
    planned: list[PlannedRun] = []
    for name, overrides, prep in prepared:
        run_id = f"{cid}.{name}"
        transport = transports[prep.cluster.name]
        run_dir = R.run_dir_for(prep.cluster, home, run_id, transport)
        rendered = R.render(prep, run_id, run_dir, launcher)
        R.write_run_folder(
            R.local_root(prep.cluster, home, transport) / run_id, rendered, prep.spec
        )
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
                    transport=registry.descriptor(transport),
                    slurm_cluster=slurm_names.get(prep.cluster.name),
                    clusters_option=(
                        cluster_identity.clusters_option(prep.cluster)
                        if executor == "slurm"
                        else None
                    ),
                    script_sha256=R.sha256_text(rendered.script),
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
    single = executor != "slurm" or len(planned) == 1
    first = planned[0].prep.cluster
    limit = (
        1
        if single
        else (
            array_limit
            or max_array_size(transports[first.name], cluster_identity.clusters_option(first))
        )
    )
    chunks = chunk_groups(list(buckets.values()), limit)
    groups: list[db.GroupRecord] = []
    variants: list[db.VariantRecord] = []
    for gi, members in enumerate(chunks):
        if len(members) > 1:
            job_name = f"ghr-{cid}-g{gi}"
            cluster = members[0].prep.cluster
            transport = transports[cluster.name]
            # A job array's own files: here, or (over SSH) beside the runs on the cluster.
            here, there = cdir, str(cdir)
            if transport.remote:
                here = R.local_root(cluster, home, transport) / campaign_files(cid)
                there = f"{roots[cluster.name]}/{campaign_files(cid)}"
                here.mkdir(parents=True, exist_ok=True, mode=0o700)
            arr = render_array(
                [m.rendered for m in members], job_name, there, campaign.max_parallel
            )
            local_script = here / f"group{gi}.sbatch"
            local_script.write_text(arr.script)
            local_script.chmod(0o700)
            script = Path(there) / local_script.name
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
    from orchestrator.site.config import origin_note

    notes = {
        p.run.run_id: text
        for p in planned
        if (text := origin_note(p.prep.cluster.origin, p.prep.cluster.name))
    }
    db.write_plan(store, record, groups, variants, [p.run for p in planned], notes)
    return cid


def confirm_clusters(prepared: PreparedVariants, executor: str) -> dict[str, str]:
    """Before anything is written: every cluster the variants go to is the SLURM cluster its
    file names (cluster_identity.confirm); cluster file name -> SLURM cluster name."""
    if executor != "slurm":
        return {}
    out: dict[str, str] = {}
    for _, _, prep in prepared:
        if prep.cluster.name not in out:
            transport = choose.transport_for(prep.cluster)
            transport.connect()
            out[prep.cluster.name] = cluster_identity.confirm(prep.cluster, transport).cluster_name
    return out


def campaign_files(campaign_id: str) -> str:
    """The folder, beside the run folders in a remote runs root, holding a campaign's array
    scripts and their own logs (`_` cannot begin a run id, so it never names a run)."""
    return f"_campaigns/{campaign_id}"


def push_plan(store: Store, campaign_id: str) -> None:
    """Copy the run folders (and array scripts) of the groups still PLANNED to each remote
    cluster: one rsync per cluster, however many variants."""
    planned = {g.group_index for g in db.groups_of(store, campaign_id) if g.state == db.G_PLANNED}
    by_where: dict[str, tuple[Transport, Path, str, list[str]]] = {}
    for v in db.variants_of(store, campaign_id):
        if v.group_index not in planned:
            continue
        run = store.get_run(v.run_id)
        if not run.transport or run.executor == "local":
            continue
        if run.transport not in by_where:
            root = str(Path(run.run_dir).parent)
            here = mirror_root(store.home, run.cluster)
            names = (
                [campaign_files(campaign_id)]
                if (here / campaign_files(campaign_id)).is_dir()
                else []
            )
            by_where[run.transport] = (registry.for_run(run), here, root, names)
        by_where[run.transport][3].append(Path(run.run_dir).name)
    for transport, here, root, names in by_where.values():
        transport.push(here, names, root)


def chunk_groups(buckets: Sequence[list[T]], limit: int) -> list[list[T]]:
    """Each bucket (variants that may share one array) cut into arrays of at most `limit`
    elements, in order; the controller refuses an array index >= MaxArraySize."""
    if limit < 1:
        raise ValueError(f"array limit must be >= 1, not {limit}")
    return [members[i : i + limit] for members in buckets for i in range(0, len(members), limit)]


def send(
    store: Store,
    campaign_id: str,
    *,
    hold: bool = False,
    warn: Warn | None = None,
    on_group: Callable[[db.GroupRecord, str], None] | None = None,
) -> list[str]:
    """Send every group still PLANNED (one sbatch each); returns the failures, as sentences.

    A group is sent only by the gh-run that holds its lock and wins its claim (PLANNED →
    SENDING): two `campaign resume` at once never send the same group twice.
    """
    rec = db.get_campaign(store, campaign_id)
    members: dict[int, list[str]] = {}
    for v in db.variants_of(store, campaign_id):
        members.setdefault(v.group_index, []).append(v.run_id)
    try:
        push_plan(store, campaign_id)
    except GhRunError as exc:
        # Nothing was sent: every group stays PLANNED for `campaign resume`.
        return [f"nothing was sent, because {exc} (`gh-run campaign resume {campaign_id}`)"]
    failures: list[str] = []
    for g in db.groups_of(store, campaign_id):
        if g.state != db.G_PLANNED:
            continue
        with group_lock(store, campaign_id, g.group_index) as held:
            if not held or not db.claim_group(store, g):
                continue  # another gh-run is sending (or repairing) this group
            job_id, failure = _send_group(
                store, rec.executor, g, members[g.group_index], hold, warn
            )
        if failure:
            failures.append(failure)
        if job_id and on_group:
            on_group(g, job_id)
    if rec.state == db.PLANNED:
        db.set_campaign(store, campaign_id, state=db.SUBMITTED)
    return failures


def _send_group(
    store: Store,
    executor: str,
    g: db.GroupRecord,
    run_ids: list[str],
    hold: bool,
    warn: Warn | None,
) -> tuple[str | None, str | None]:
    """One claimed group's sbatch (or local start), recorded: (job id, failure sentence)."""
    try:
        _check_bound(store, g, run_ids)
        if executor == "slurm":
            runs = [store.get_run(r) for r in run_ids]
            ex = R.slurm_executor_for(runs[0], warn)
            # Planned for one SLURM cluster, sent to no other (a resume may run elsewhere).
            cluster_identity.check_run(runs[0], ex.transport, "nothing was sent")
            secrets = {k: v for run in runs for k, v in secrets_of(run).items()}
            job_id = ex.sbatch(
                g.script, ["--hold"] if hold else [], env=secrets, job_name=g.job_name
            )
        else:
            run = store.get_run(run_ids[0])
            local = LocalExecutor(time_limit=_time_limit(Path(g.script)))
            job_id = local.submit(Path(g.script), run)
    except TransportError as exc:
        if not exc.maybe_ran:
            db.record_group_failure(store, g, run_ids, str(exc))
            return None, f"group {g.group_index} ({g.size} variants): {exc}"
        # It may be queued: the group stays SENDING (claimed, its lock free once we are
        # gone), which `campaign resume` looks up by its name before sending anything.
        return None, (
            f"group {g.group_index} ({g.size} variants): {exc}; `gh-run campaign resume "
            f"{g.campaign_id}` finds {g.job_name} by its name or sends it"
        )
    except GhRunError as exc:
        db.record_group_failure(store, g, run_ids, str(exc))
        return None, f"group {g.group_index} ({g.size} variants): {exc}"
    what = f"array of {g.size}" if g.is_array else "single job"
    db.record_submission(store, g, job_id, run_ids, f"submitted ({what}, {g.job_name})")
    return job_id, None


def _check_bound(store: Store, g: db.GroupRecord, run_ids: list[str]) -> None:
    """A group is sent only when it and its runs were planned by this user in this home
    (row_seal.py): a campaign's rows committed with a project name scripts of someone else's."""
    from orchestrator.store import row_seal

    why = row_seal.group_problem(store.home_key, g.model_dump())
    if why is not None:
        raise UserError(
            f"campaign {g.campaign_id} group {g.group_index} is not bound to this home and you:"
            f" {why}; nothing was sent (submit the campaign again: `gh-run campaign run FILE`)"
        )
    for run_id in run_ids:
        R.require_bound(store.get_run(run_id), "nothing was sent")


def _time_limit(script: Path) -> str | None:
    for line in script.read_text().splitlines():
        if line.startswith("#SBATCH --time="):
            return line.split("=", 1)[1]
    return None


def resolve_executor(kind: str, prepared: PreparedVariants | None = None) -> str:
    """`auto`: slurm when a variant's cluster is reached over SSH (its jobs can only run there);
    else slurm when a controller answers, else local where the variants' cluster files allow it
    (`executors.choose.auto_executor`)."""
    if kind == "auto":
        clusters = {id(p.cluster): p.cluster for _, _, p in prepared or []}
        if any(c.transport != "local" for c in clusters.values()):
            return "slurm"
        return choose.auto_executor(list(clusters.values()))
    return kind


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")
