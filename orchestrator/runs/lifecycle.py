"""The life of a run: prepare (load + validate), submit (intent first), refresh, collect.

The CLI calls these; campaigns and tests call them too. Nothing here prints.

Specs, clusters, templates and artifacts (Pydantic, Jinja, YAML) are imported by the functions
that use them: `gh-run status` and `logs` go through this module too, and must not pay for them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# The job before it is a run (loading, checking, rendering) lives in orchestrator/checks/prepare.py;
# its names are this module's too, as they were before it was split off.
from orchestrator.checks.prepare import (
    Prepared,
    cluster_runs_root,
    local_root,
    new_run_id,
    prepare,
    render,
    run_dir_for,
    runs_root,
)
from orchestrator.core.errors import GhRunError, RuntimeFailure, UserError
from orchestrator.executors.base import Executor, JobStatus, Warn
from orchestrator.executors.choose import transport_of
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.store.db import (
    INTENT,
    RETRYING,
    SUBMIT_FAILED,
    Run,
    Store,
    exit_code_worth_showing,
    is_terminal,
)
from orchestrator.transport import registry
from orchestrator.transport.base import Transport, TransportError
from orchestrator.transport.local import LOCAL

__all__ = [  # what orchestrator.checks.prepare lends this module
    "Prepared",
    "cluster_runs_root",
    "local_root",
    "new_run_id",
    "prepare",
    "render",
    "run_dir_for",
    "runs_root",
]

if TYPE_CHECKING:
    from orchestrator.artifacts.collect import Manifest, Refusal, SizeLimits
    from orchestrator.artifacts.left_reports import LeftReport, Mode
    from orchestrator.render.scripts import RenderedJob
    from orchestrator.runs.retry import Requeue
    from orchestrator.spec.job import JobSpec


def transport_of_run(run: Run) -> Transport:
    return LOCAL if run.executor == "local" else registry.for_run(run)


def require_bound(run: Run, doing: str) -> None:
    """Refuse to act on a row that is not a run of this user's in this home (row_seal.py):
    one sentence saying what was not done and how to bind it."""
    if run.unbound is not None:
        from orchestrator.store.row_seal import refusal

        raise UserError(refusal(run.run_id, run.unbound, doing))


def executor_for(run: Run, warn: Warn | None = None) -> Executor:
    """The executor of a run as it was submitted: its transport, and the SLURM cluster it
    went to (--clusters) when its cluster file asked for one."""
    if run.executor == "local":
        return LocalExecutor()
    return slurm_executor_for(run, warn)


def slurm_executor_for(run: Run, warn: Warn | None = None) -> SlurmExecutor:
    return SlurmExecutor(warn=warn, transport=registry.for_run(run), clusters=run.clusters_option)


def write_run_folder(run_dir: Path, rendered: RenderedJob, spec: JobSpec) -> Path:
    """job.sbatch + spec.lock.yaml in a user-only folder; returns the script path."""
    import yaml

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
    """Intent first, then the executor; a refusal leaves a SUBMIT_FAILED row, never a ghost.

    On a cluster reached over SSH the connection is made before anything is written (an
    unreachable login node leaves nothing behind), the run folder is written into this
    machine's mirror and copied to the cluster, then sbatch runs there. A connection that drops
    while sbatch runs leaves the INTENT row: `repair_intents` finds the job by its name.
    """
    from orchestrator.checks.preflight import check_submit_host
    from orchestrator.core.paths import display_path

    store.require_writable()
    transport = transport_of(executor)
    check_submit_host(
        prep.spec,
        display_path(prep.spec_path) if prep.spec_path else prep.spec.name,
        remote=transport.remote,
    )
    transport.connect()
    slurm_cluster = None
    if isinstance(executor, SlurmExecutor):
        from orchestrator.executors import cluster_identity

        # The controller must be the cluster the file names, before anything is written.
        slurm_cluster = cluster_identity.confirm(prep.cluster, transport).cluster_name
    root = cluster_runs_root(prep.cluster, home, transport)
    here = local_root(prep.cluster, home, transport)
    fixed_id = run_id is not None
    for _ in range(5):
        run_id = run_id if fixed_id and run_id else new_run_id(prep.spec.name)
        run_dir = run_dir_for(prep.cluster, home, run_id, transport)
        rendered = render(prep, run_id, run_dir, executor.launcher)
        try:
            script = write_run_folder(here / run_id, rendered, prep.spec)
            break
        except FileExistsError:
            # Two submissions in the same second drew the same id: draw again.
            if fixed_id:
                raise UserError(f"run {run_id} already exists; choose another run id") from None
        except OSError as exc:
            import shutil  # only on this failure path: status's start-up imports this module

            shutil.rmtree(run_dir, ignore_errors=True)
            raise RuntimeFailure(
                f"cannot write the run folder {run_dir}: {exc.strerror}; free space there (or "
                "make it writable) and submit again"
            ) from None
    else:
        raise RuntimeFailure(f"could not find a free run id under {runs_root(prep.cluster, home)}")
    assert run_id is not None
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
        transport=registry.descriptor(transport),
        slurm_cluster=slurm_cluster,
        clusters_option=executor.clusters if isinstance(executor, SlurmExecutor) else None,
        script_sha256=sha256_text(rendered.script),
    )
    from orchestrator.site.config import origin_note

    origin = origin_note(prep.cluster.origin, prep.cluster.name)
    try:
        store.add_run(run, "intent written before submission" + (f"; {origin}" if origin else ""))
    except BaseException:
        # no intent row (a store locked past its wait, a full disk): no run folder either
        import shutil  # only on this failure path: status's start-up imports this module

        shutil.rmtree(here / run_id, ignore_errors=True)
        raise
    if isinstance(executor, LocalExecutor):
        executor.time_limit = prep.spec.resources.time or prep.partition.default_time
    try:
        transport.push(here, [run_id], root)
    except GhRunError as exc:  # sbatch was not sent
        _not_submitted(store, run_id, exc)
        raise
    try:
        job_id = executor.submit(run_dir / script.name, run)
    except TransportError as exc:
        if not exc.maybe_ran:
            _not_submitted(store, run_id, exc)
            raise
        store.update_run(run_id, event=f"sbatch's answer was lost: {exc}")
        raise TransportError(
            f"{exc}: job {run.job_name} may or may not be queued, so run {run_id} stays an "
            "intent; `gh-run status` finds the job by its name once the login node answers "
            "(or records the run as never submitted two minutes after it was written)",
            maybe_ran=True,
        ) from None
    except GhRunError as exc:
        _not_submitted(store, run_id, exc)
        raise
    return store.update_run(
        run_id,
        job_id=job_id,
        state="PENDING",
        submitted_at=time.time(),
        event=f"submitted as job {job_id} ({executor.name})",
    )


def sha256_text(text: str) -> str:
    """The sha256 of a script as written (sealed with its run: row_seal.py)."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _not_submitted(store: Store, run_id: str, exc: GhRunError) -> None:
    store.update_run(
        run_id, state=SUBMIT_FAILED, reason=str(exc), ended_at=time.time(), event="not submitted"
    )


def spec_of(run: Run) -> JobSpec:
    from orchestrator.spec.job import JobSpec

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
        code = exit_code_worth_showing(state, status.exit_code)
        detail = f"exit code {code}" if code is not None else detail
        if reason:
            detail = f"{detail}; {reason}" if detail else reason
    return store.update_run(run.run_id, event=detail, **fields)


def refresh(store: Store, runs: Sequence[Run], warn: Warn | None = None) -> list[Run]:
    """One poll per executor kind for all given runs; returns the updated runs. A row that is
    not a run of this user's in this home (row_seal.py) is shown as recorded, never polled."""
    active = [r for r in runs if not r.terminal and r.job_id and r.unbound is None]
    unbound = [r for r in runs if not r.terminal and r.unbound is not None]
    if unbound and warn:
        _warn_unbound(unbound, warn)
    updated = {r.run_id: r for r in runs}
    # One poll per executor and cluster: all of a cluster's runs in one batched query.
    by_kind: dict[tuple[str, str | None, str | None], list[Run]] = {}
    for r in active:
        by_kind.setdefault((r.executor, r.transport, r.clusters_option), []).append(r)
    for group in by_kind.values():
        ex = executor_for(group[0], warn)
        if isinstance(ex, SlurmExecutor):
            group = _on_their_cluster(group, ex.transport, warn)
            if not group:
                continue
        statuses = ex.poll(group)
        for r in group:
            if r.run_id in statuses:
                updated[r.run_id] = _apply_with_retry(store, r, statuses[r.run_id], ex)
    return [updated[r.run_id] for r in runs]


def _warn_unbound(runs: Sequence[Run], warn: Warn) -> None:
    shown = ", ".join(r.run_id for r in runs[:3]) + (" ..." if len(runs) > 3 else "")
    warn(
        f"{len(runs)} run(s) in this state store are not bound to this home and you ({shown}): "
        f"{runs[0].unbound}; their recorded states are shown, and gh-run neither polls, retries "
        "nor reaches them (`gh-run adopt RUN` binds one after showing what it would run)"
    )


def _on_their_cluster(runs: list[Run], transport: Transport, warn: Warn | None) -> list[Run]:
    """The runs whose SLURM cluster is the one the controller reached now is: another
    cluster's sacct would report another job under the same id, so the others keep the state
    last recorded (and that is said once)."""
    from orchestrator.executors import cluster_identity

    kept = []
    for run in runs:
        why = cluster_identity.same_cluster(run, transport)
        if why is None:
            kept.append(run)
        elif warn:
            warn(why)
    return kept


def _apply_with_retry(store: Store, run: Run, status: JobStatus, ex: Executor) -> Run:
    """apply_status, then the spec's retry policy (orchestrator/runs/retry.py) for this end
    state."""
    from orchestrator.runs import retry

    if run.state == RETRYING:
        return run
    policy = spec_of(run).retries
    # SLURM requeued the job (same id) between two polls: RUNNING → PENDING / REQUEUED.
    looks_requeued = status.state.startswith("REQUEUE") or (
        status.state == "PENDING" and run.state in ("RUNNING", "COMPLETING")
    )
    if looks_requeued:
        seen = _requeue_of(store, run, ex)
        if seen is None or not seen.new:
            # The controller has not requeued it again: accounting lags behind the
            # controller (slurmdbd still says PENDING for a job that already runs). Keep
            # what was recorded.
            return run
        if policy.max > 0:
            return _record_requeue(store, run, status.state, seen.state)
    if not is_terminal(status.state) or not retry.wants_retry(policy, status.state):
        return apply_status(store, run, status)
    seen = _requeue_of(store, run, ex)
    if seen is not None and not seen.new:
        return run  # the end of the attempt before a requeue already recorded
    decision = retry.decide(policy, status.state, run.attempt, back_in_queue=seen is not None)
    if decision.action == "requeued" and seen is not None:
        return _record_requeue(store, run, status.state, seen.state)
    ended = apply_status(store, run, status)
    if decision.action == "exhausted":
        store.update_run(run.run_id, event=decision.detail)
        return store.get_run(run.run_id)
    return resubmit(store, ended, decision.detail)


def _requeue_mark(job_id: str | None) -> str:
    """The words of every requeue event of this job id (counted by _requeue_of)."""
    return f"SLURM requeued job {job_id} "


def _requeue_of(store: Store, run: Run, ex: Executor) -> Requeue | None:
    """Whether SLURM requeued the run's job, by its controller (retry.requeue_of decides)."""
    from orchestrator.runs import retry

    if not isinstance(ex, SlurmExecutor) or not run.job_id:
        return None
    mark = _requeue_mark(run.job_id)
    recorded = sum(mark in (e.detail or "") for e in store.events(run.run_id))
    return retry.requeue_of(ex.requeue_count(run.job_id), recorded)


def _record_requeue(store: Store, run: Run, seen: str, now_state: str) -> Run:
    detail = (
        f"attempt {run.attempt + 2}: {_requeue_mark(run.job_id)}after {seen.split()[0]} "
        "(--requeue); same job id"
    )
    done = store.update_run_if(
        run.run_id,
        {"attempt": run.attempt, "job_id": run.job_id},
        state=now_state,
        attempt=run.attempt + 1,
        ended_at=None,
        event=detail,
    )
    return done or store.get_run(run.run_id)


def _time_limit_of(script: Path) -> str | None:
    m = re.search(r"^#SBATCH --time=(\S+)$", script.read_text(), re.MULTILINE)
    return m.group(1) if m else None


def resubmit(store: Store, run: Run, detail: str) -> Run:
    """Submit the run's job.sbatch again as its next attempt (same run id, new job id).

    The retry is claimed in the store first (compare-and-set on state, attempt and job id),
    so two gh-run processes watching the same run never both resubmit it.
    """
    claimed = store.update_run_if(
        run.run_id,
        {"state": run.state, "attempt": run.attempt, "job_id": run.job_id},
        state=RETRYING,
        attempt=run.attempt + 1,
        event=detail,
    )
    if claimed is None:
        return store.get_run(run.run_id)
    folder = Path(run.run_dir)
    script = folder / "job.sbatch"
    why = _not_resubmittable(run, script)
    if why is not None:
        return store.update_run(
            run.run_id, state=run.state, attempt=run.attempt, event=f"retry not submitted: {why}"
        )
    ex = executor_for(run)
    if isinstance(ex, LocalExecutor):
        ex.time_limit = _time_limit_of(script)
        for name in ("local_exit", "local_cancelled", "local_pid"):
            (folder / name).unlink(missing_ok=True)
    try:
        job_id = ex.submit(script, claimed)
    except TransportError as exc:
        if not exc.maybe_ran:
            return store.update_run(
                run.run_id,
                state=run.state,
                attempt=run.attempt,
                event=f"retry not submitted: {exc}",
            )
        # It may be queued: stay RETRYING; _repair_retry finds the new job by its name.
        return store.update_run(run.run_id, event=f"the retry's sbatch answer was lost: {exc}")
    except GhRunError as exc:
        return store.update_run(
            run.run_id,
            state=run.state,
            attempt=run.attempt,
            event=f"retry not submitted: {exc}",
        )
    return store.update_run(
        run.run_id,
        job_id=job_id,
        state="PENDING",
        submitted_at=time.time(),
        ended_at=None,
        exit_code=None,
        reason=None,
        event=f"attempt {claimed.attempt + 1}: resubmitted as job {job_id} "
        f"(previous job {run.job_id} ended {run.state})",
    )


def _not_resubmittable(run: Run, script: Path) -> str | None:
    """Why a retry must not submit the run's script: the row is not this user's here, or the
    script is no longer the one written for the run (its sha256 is sealed with the row; read
    where it is submitted from, through the run's transport)."""
    import hashlib

    if run.unbound is not None:
        return run.unbound
    if not run.script_sha256:
        return "the run records no sha256 of its job script (`gh-run adopt` records it)"
    try:
        data = transport_of_run(run).read_from(str(script), 0)
    except (GhRunError, OSError) as exc:
        return f"its job script {script} cannot be read to check it ({exc})"
    if data is None or hashlib.sha256(data).hexdigest() != run.script_sha256:
        return f"{script} is not the job script written for this run (its sha256 differs)"
    return None


def site_limits(run: Run, warn: Warn | None = None) -> SizeLimits:
    """The artifact size limits of the run's cluster file (the defaults when it cannot be
    read any more: it may have moved since the run was submitted)."""
    from orchestrator.artifacts.collect import SizeLimits
    from orchestrator.site.cluster import load_cluster

    try:
        return load_cluster(spec_of(run).cluster).artifacts
    except GhRunError as exc:
        if warn:
            warn(f"run {run.run_id}: default artifact limits apply ({exc})")
        return SizeLimits()


def collect(
    store: Store,
    run: Run,
    home: Path,
    limits: SizeLimits | None = None,
    warn: Warn | None = None,
    reports: Mode | None = None,
) -> Manifest:
    require_bound(run, "nothing was collected")
    if not run.terminal:
        raise UserError(
            f"run {run.run_id} is {run.state}: artifacts are collected once it has ended; "
            "wait for it (`gh-run submit --wait`, `gh-run wait`) or cancel it"
        )
    if run.state == SUBMIT_FAILED:
        raise UserError(f"run {run.run_id} was never submitted: it has no artifacts")
    result = collect_many(store, [run], home, warn, limits, reports)[run.run_id]
    if isinstance(result, GhRunError):
        raise result
    return result


def collect_many(
    store: Store,
    runs: Sequence[Run],
    home: Path,
    warn: Warn | None = None,
    limits: SizeLimits | None = None,
    reports: Mode | None = None,
) -> dict[str, Manifest | GhRunError]:
    """Collect ended runs, verified: runs on a cluster reached over SSH come back first, all of
    one cluster at once (remote_collect.fetch: three sessions whatever their number). `limits`:
    the artifact size limits (default: each run's cluster file, `site_limits`); `reports`:
    fetch or leave the reports the jobs analysed (default: each run's spec, else its cluster)."""
    from orchestrator.artifacts import collect as artifacts
    from orchestrator.artifacts import remote_collect
    from orchestrator.transport.ssh import SshTransport

    out: dict[str, Manifest | GhRunError] = {}
    sources: dict[str, Run] = {}
    before: dict[str, list[Refusal]] = {}  # refused on the cluster side, never copied
    left: dict[str, list[LeftReport]] = {}  # left on the cluster side (reports: leave)
    remote: dict[str, list[Run]] = {}
    for run in runs:
        if run.unbound is not None:
            from orchestrator.store.row_seal import refusal

            out[run.run_id] = UserError(refusal(run.run_id, run.unbound, "nothing was collected"))
        elif run.transport and run.executor != "local":
            remote.setdefault(run.transport, []).append(run)
        else:
            sources[run.run_id] = run
    for where, group in remote.items():
        transport = registry.for_descriptor(where)
        assert isinstance(transport, SshTransport)
        try:
            fetched = remote_collect.fetch(
                transport,
                group,
                home,
                warn,
                store,
                limits=(lambda _run: limits) if limits else lambda r: site_limits(r, warn),
                reports=reports,
            )
        except GhRunError as exc:
            fetched = dict.fromkeys((r.run_id for r in group), exc)
        for run in group:
            got = fetched[run.run_id]
            if isinstance(got, GhRunError):
                if isinstance(got, TransportError):
                    got = TransportError(
                        f"{got}; nothing of run {run.run_id} was recorded as collected: "
                        f"`gh-run fetch {run.run_id}` resumes the copy",
                        maybe_ran=False,
                    )
                out[run.run_id] = got
            else:
                sources[run.run_id] = dataclasses.replace(run, run_dir=str(got.mirror))
                before[run.run_id] = got.refused
                left[run.run_id] = got.left
    for run_id, run in sources.items():
        try:
            out[run_id] = artifacts.collect(
                store,
                run,
                spec_of(run),
                home,
                limits or site_limits(run, warn),
                refused_before=before.get(run_id, []),
                reports=reports,
                left_before=left.get(run_id, []),
            )
        except GhRunError as exc:
            out[run_id] = exc
    return out


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
    """Poll until every run has ended. Failures to reach SLURM are retried with backoff. A run
    that is not this user's in this home is refused at once (it would never be polled)."""
    for r in runs:
        if not r.terminal:
            require_bound(r, "it is not waited for")
    current = list(runs)
    interval = min_interval
    failures = 0
    start = time.monotonic()
    while True:
        try:
            if any(r.state in (INTENT, RETRYING) for r in current):
                repair_intents(store, warn=warn)
                current = [store.get_run(r.run_id) for r in current]
            current = refresh(store, current, warn=warn)
            failures = 0
        except UserError:
            raise  # a refused host key or login does not mend itself: say so now
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
    for run in store.list_runs(states={RETRYING}):
        if run.unbound is not None:
            continue  # not this user's run here: shown as recorded (refresh says so)
        fixed = _repair_retry(store, run, warn)
        if fixed is not None:
            repaired.append(fixed)
    for run in store.list_runs(states={INTENT}):
        if run.unbound is not None or time.time() - run.created_at < 5:
            continue
        if run.campaign_id:
            continue  # a campaign's job array carries the group's name: `campaign resume` repairs
        if run.executor == "local":
            fixed = _repair_local_intent(store, run)
            if fixed is not None:
                repaired.append(fixed)
            continue
        if run.executor != "slurm":
            continue

        ex = slurm_executor_for(run, warn)
        # a job array's task (analyze --on-cluster's map): the array's name, then "#N"
        array_name, mark, index = run.job_name.rpartition("#")
        try:
            if mark and index.isdigit():
                array = ex.find_array_by_name(array_name)
                job_id = f"{array}_{index}" if array else None
            else:
                job_id = ex.find_by_name(run.job_name)
        except RuntimeFailure as exc:
            # Not knowing is not "never submitted": leave the intent for a later command.
            if warn:
                warn(f"run {run.run_id} is still an intent: {exc}")
            continue
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


# A local job's supervisor records its own pid as its first act, so a local intent with no
# `local_pid` after this long never started.
LOCAL_START_S = 30.0


def _repair_local_intent(store: Store, run: Run) -> Run | None:
    """A local INTENT row: gh-run died between starting the supervisor and recording its id.
    The run folder says whether the job started (`local_pid`); `poll` then follows it."""
    job_id = LocalExecutor.started_job(run)
    if job_id:
        return store.update_run(
            run.run_id,
            job_id=job_id,
            state="PENDING",
            submitted_at=run.created_at,
            event=f"repaired: found local job {job_id} in the run folder {run.run_dir}",
        )
    if time.time() - run.created_at < LOCAL_START_S:
        return None
    return store.update_run(
        run.run_id,
        state=SUBMIT_FAILED,
        ended_at=time.time(),
        reason="the local job never started (no supervisor recorded in its run folder)",
        event="repaired: never started",
    )


def _repair_retry(store: Store, run: Run, warn: Warn | None) -> Run | None:
    """A RETRYING row: gh-run died between claiming a retry and sbatch's answer."""
    last = store.events(run.run_id)[-1].ts if store.events(run.run_id) else run.created_at
    if time.time() - last < 5:
        return None  # another gh-run may be submitting it right now
    found: tuple[str, str] | None = None  # (the retry's job id, where it was found)
    if run.executor == "slurm":
        try:
            ids = slurm_executor_for(run, warn).find_all_by_name(run.job_name)
        except RuntimeFailure as exc:
            if warn:
                warn(f"run {run.run_id}'s retry is not confirmed yet: {exc}")
            return None
        newer = [i for i in ids if i != run.job_id and _job_num(i) > _job_num(run.job_id)]
        if newer:
            found = (newer[-1], f"by its name {run.job_name}")
    elif run.executor == "local":
        started = LocalExecutor.started_job(run)
        if started and started != run.job_id:
            found = (started, "in its run folder")
    if found is not None:
        return store.update_run(
            run.run_id,
            job_id=found[0],
            state="PENDING",
            submitted_at=last,
            ended_at=None,
            exit_code=None,
            reason=None,
            event=f"repaired: found the retry's job {found[0]} {found[1]}",
        )
    if time.time() - last < 120:
        return None
    return store.update_run(
        run.run_id,
        state=SUBMIT_FAILED,
        ended_at=time.time(),
        reason="the retry was claimed but its job never reached the scheduler",
        event="repaired: retry never submitted",
    )


def _job_num(job_id: str | None) -> int:
    with contextlib.suppress(ValueError, AttributeError):
        return int(str(job_id).split("_")[0])
    return -1
