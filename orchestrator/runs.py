"""The life of a run: prepare (load + validate), submit (intent first), refresh, collect.

The CLI calls these; campaigns and tests call them too. Nothing here prints.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import yaml

from orchestrator import artifacts
from orchestrator.cluster import Cluster, Partition, load_cluster, validate_job
from orchestrator.errors import GhRunError, UserError
from orchestrator.executors.base import Executor, JobStatus, Warn
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import SlurmExecutor, slurm_reachable
from orchestrator.render import RenderedJob, render_job
from orchestrator.spec import SBATCH_VALUE_RE, JobSpec, load_spec
from orchestrator.store import INTENT, SUBMIT_FAILED, Run, Store, is_terminal
from orchestrator.yamlio import display_path

ExecutorKind = Literal["auto", "local", "slurm"]


@dataclass
class Prepared:
    """A spec that passed every check that needs no cluster: ready to render and submit."""

    spec: JobSpec
    spec_path: Path | None
    cluster: Cluster
    partition_name: str
    partition: Partition


def prepare(spec_path: Path, overrides: Sequence[str] = (), cluster: str | None = None) -> Prepared:
    spec = load_spec(spec_path, list(overrides))
    if cluster:
        spec.cluster = cluster
    cl = load_cluster(spec.cluster)
    part_name, part = validate_job(spec, cl, display_path(spec_path))
    return Prepared(spec, spec_path, cl, part_name, part)


def new_run_id(name: str) -> str:
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def runs_root(cluster: Cluster, home: Path) -> Path:
    root = Path(os.path.expandvars(cluster.paths.runs.replace("{home}", str(home)))).expanduser()
    return root.absolute()


def run_dir_for(cluster: Cluster, home: Path, run_id: str) -> Path:
    path = runs_root(cluster, home) / run_id
    if not SBATCH_VALUE_RE.match(str(path)):
        raise UserError(
            f"run folder {path} has characters sbatch cannot take (spaces?); set GH_RUN_HOME or "
            f"the cluster's paths.runs to a plain path"
        )
    return path


def choose_executor(kind: ExecutorKind, warn: Warn | None = None) -> Executor:
    if kind == "auto":
        kind = "slurm" if slurm_reachable() else "local"
    return SlurmExecutor(warn=warn) if kind == "slurm" else LocalExecutor()


def executor_for(run: Run, warn: Warn | None = None) -> Executor:
    if run.executor == "local":
        return LocalExecutor()
    return SlurmExecutor(warn=warn)


def render(prep: Prepared, run_id: str, run_dir: Path, launcher: str = "srun") -> RenderedJob:
    return render_job(
        prep.spec,
        prep.cluster,
        prep.partition_name,
        prep.partition,
        run_id,
        str(run_dir),
        "direct" if launcher == "direct" else "srun",
    )


def write_run_folder(run_dir: Path, rendered: RenderedJob, spec: JobSpec) -> Path:
    """job.sbatch + spec.lock.yaml in a user-only folder; returns the script path."""
    run_dir.mkdir(parents=True, exist_ok=False, mode=0o700)
    os.chmod(run_dir, 0o700)
    (run_dir / "artifacts").mkdir(mode=0o700)
    script = run_dir / "job.sbatch"
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as f:
        f.write(rendered.script)
    lock = yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
    fd = os.open(run_dir / "spec.lock.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(lock)
    return script


def submit(
    store: Store,
    prep: Prepared,
    executor: Executor,
    home: Path,
    *,
    campaign_id: str | None = None,
    variant: str | None = None,
    run_id: str | None = None,
) -> Run:
    """Intent first, then the executor; a refusal leaves a SUBMIT_FAILED row, never a ghost."""
    run_id = run_id or new_run_id(prep.spec.name)
    run_dir = run_dir_for(prep.cluster, home, run_id)
    rendered = render(prep, run_id, run_dir, executor.launcher)
    script = write_run_folder(run_dir, rendered, prep.spec)
    run = Run(
        run_id=run_id,
        name=prep.spec.name,
        job_name=rendered.context.job_name,
        spec_path=str(prep.spec_path) if prep.spec_path else None,
        spec_json=prep.spec.model_dump_json(),
        cluster=prep.cluster.name,
        partition=prep.partition_name,
        executor=executor.name,
        run_dir=str(run_dir),
        campaign_id=campaign_id,
        variant=variant,
    )
    store.add_run(run)
    if isinstance(executor, LocalExecutor):
        executor.time_limit = prep.spec.resources.time or prep.partition.default_time
    try:
        job_id = executor.submit(script, run)
    except GhRunError as exc:
        store.update_run(
            run_id,
            state=SUBMIT_FAILED,
            reason=str(exc),
            ended_at=time.time(),
            event="not submitted",
        )
        raise
    return store.update_run(
        run_id,
        job_id=job_id,
        state="PENDING",
        submitted_at=time.time(),
        event=f"submitted as job {job_id} ({executor.name})",
    )


def spec_of(run: Run) -> JobSpec:
    return JobSpec.model_validate_json(run.spec_json)


def apply_status(store: Store, run: Run, status: JobStatus) -> Run:
    """Record a state change (with an event); terminal states get their end time and code."""
    state = status.state
    if state == "UNKNOWN" or (state == run.state and not is_terminal(state)):
        return run
    if state == run.state and run.ended_at is not None:
        return run
    fields: dict[str, object] = {"state": state}
    detail = status.reason
    if is_terminal(state):
        fields["ended_at"] = time.time()
        if status.exit_code is not None:
            fields["exit_code"] = status.exit_code
        reason = status.reason
        if status.signal:
            reason = f"killed by signal {status.signal}" + (f"; {reason}" if reason else "")
        fields["reason"] = reason
        detail = f"exit code {status.exit_code}" if status.exit_code is not None else detail
        if reason:
            detail = f"{detail}; {reason}" if detail else reason
    return store.update_run(run.run_id, event=detail, **fields)


def refresh(store: Store, runs: Sequence[Run], warn: Warn | None = None) -> list[Run]:
    """One poll per executor kind for all given runs; returns the updated runs."""
    active = [r for r in runs if not r.terminal and r.job_id]
    updated = {r.run_id: r for r in runs}
    by_kind: dict[str, list[Run]] = {}
    for r in active:
        by_kind.setdefault(r.executor, []).append(r)
    for kind, group in by_kind.items():
        ex = LocalExecutor() if kind == "local" else SlurmExecutor(warn=warn)
        statuses = ex.poll(group)
        for r in group:
            if r.run_id in statuses:
                updated[r.run_id] = apply_status(store, r, statuses[r.run_id])
    return [updated[r.run_id] for r in runs]


def collect(store: Store, run: Run, home: Path) -> artifacts.Manifest:
    if not run.terminal:
        raise UserError(
            f"run {run.run_id} is {run.state}: artifacts are collected once it has ended; "
            "wait for it (`gh-run submit --wait`, `gh-run wait`) or cancel it"
        )
    if run.state == SUBMIT_FAILED:
        raise UserError(f"run {run.run_id} was never submitted: it has no artifacts")
    return artifacts.collect(store, run, spec_of(run), home)


def wait(
    store: Store,
    runs: Sequence[Run],
    *,
    on_poll: Callable[[list[Run]], None] | None = None,
    warn: Warn | None = None,
    timeout: float | None = None,
    min_interval: float = 1.0,
    max_interval: float = 10.0,
) -> list[Run]:
    """Poll until every run has ended. Failures to reach SLURM are retried with backoff."""
    current = list(runs)
    interval = min_interval
    failures = 0
    start = time.monotonic()
    while True:
        try:
            current = refresh(store, current, warn=warn)
            failures = 0
        except GhRunError as exc:
            failures += 1
            if warn:
                warn(f"{exc} (retry {failures}, next in {min(60.0, 2.0**failures):.0f} s)")
            time.sleep(min(60.0, 2.0**failures))
            continue
        if on_poll:
            on_poll(current)
        if all(r.terminal for r in current):
            return current
        if timeout is not None and time.monotonic() - start > timeout:
            return current
        time.sleep(interval)
        interval = min(max_interval, interval * 1.5)


def repair_intents(store: Store, warn: Warn | None = None) -> list[Run]:
    """Find the jobs of INTENT rows (gh-run died between intent and job id) by their name."""
    repaired = []
    for run in store.list_runs(states={INTENT}):
        if run.executor != "slurm" or time.time() - run.created_at < 5:
            continue
        ex = SlurmExecutor(warn=warn)
        job_id = ex.find_by_name(run.job_name)
        if job_id:
            repaired.append(
                store.update_run(
                    run.run_id,
                    job_id=job_id,
                    state="PENDING",
                    submitted_at=run.created_at,
                    event=f"repaired: found job {job_id} by its name {run.job_name}",
                )
            )
        elif time.time() - run.created_at > 120:
            repaired.append(
                store.update_run(
                    run.run_id,
                    state=SUBMIT_FAILED,
                    ended_at=time.time(),
                    reason="no job with this run's name exists: the submission never reached SLURM",
                    event="repaired: never submitted",
                )
            )
    return repaired
