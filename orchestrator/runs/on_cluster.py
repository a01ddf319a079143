"""`gh-run analyze --on-cluster RUN|CAMPAIGN`: the runs' reports analysed again where they lie,
with SLURM as the engine (no worker pool, no service):

- the map: one job array, one task per report (templates/sbatch/analysis_map.sbatch.j2:
  `analyze --write-records REPORT`, the record written beside the report);
- the reduce: one job after the whole array (`--dependency=afterany`: a report whose task
  failed is read by the reduce itself), each run's `analyze --json` over its folder, which reads
  the records in the reports' place: ranks put together, the cross-rank view
  (templates/sbatch/analysis_reduce.sbatch.j2);
- runs: every map task and the reduce are runs of the state store (intent rows written before
  sbatch, then their job ids), so `status`, `cancel` and `logs` see them as they see any run;
  their logs are named as every job's (`JOBID_0_log.out` in the analysis folder);
- tracking: every task and the reduce through the executor's watcher, one batched sacct per
  poll, as runs are tracked;
- results: each run's JSON read back through the run's transport (this machine, or the login
  node over SSH), and each report's record copied into the artifact store beside the run's
  other files, where later `analyze`, `compare`, `report` and campaign judgement read it.

The reports a run has are those its manifest lists (left on the cluster, or brought back: they
are in the run folder there too). The analysis folder is `.gh-run-analysis/<id>` beside the run
folders; its scripts and logs stay there.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator import __version__
from orchestrator.artifacts import collect as artifacts
from orchestrator.artifacts.left_reports import RECORD_SUFFIX
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.executors.base import Warn
from orchestrator.store.db import INTENT, SUBMIT_FAILED, Run, Store, is_terminal

REPORT_SUFFIXES = (".sqlite", ".pt.trace.json", ".pt.trace.json.gz")
FOLDER = ".gh-run-analysis"


@dataclass(frozen=True)
class Report:
    run: Run
    relpath: str  # artifacts/... in the run folder and in the artifact store

    @property
    def there(self) -> str:
        return f"{self.run.run_dir}/{self.relpath}"


def runs_named(store: Store, refs: Sequence[str]) -> list[Run]:
    """Runs by reference (id, prefix, job id, `last`), or every run of a campaign."""
    return [run for _, runs in named(store, refs) for run in runs]


def named(store: Store, refs: Sequence[str]) -> list[tuple[str | None, list[Run]]]:
    """Each reference as (the campaign id it names, or None for a run; its runs)."""
    from orchestrator.store import campaigns as records
    from orchestrator.store.db import NoSuchRun

    out: list[tuple[str | None, list[Run]]] = []
    for ref in refs:
        try:
            out.append((None, [store.find_run(ref)]))
            continue
        except NoSuchRun as exc:
            why = exc.message
        try:
            rec = records.get_campaign(store, ref)
        except UserError:
            raise UserError(
                f"{ref}: neither a run nor a campaign ({why}); name a run id or a campaign id"
            ) from None
        out.append((rec.campaign_id, list(records.runs_of(store, rec.campaign_id).values())))
    return out


def reports_of(home: Path, run: Run) -> list[Report]:
    """The reports of a run its manifest lists: left on the cluster or brought back (either
    way they are in its run folder there)."""
    if run.executor == "local":
        raise UserError(
            f"run {run.run_id} ran on this machine (executor local): analyse it here with"
            f" `gh-run analyze {run.run_id}`"
        )
    manifest = artifacts.store_dir(home, run.run_id) / "manifest.json"
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

    try:
        data = load_json(manifest, artifacts.MAX_MANIFEST_BYTES)
        if not isinstance(data, dict):
            raise SideInputError("not a mapping")
    except SideInputError:
        raise UserError(
            f"run {run.run_id} has no manifest yet ({run.state}); `gh-run fetch {run.run_id}`"
            " lists its files first"
        ) from None
    try:
        rels = [str(f["relpath"]) for f in data.get("files", [])] + [
            str(x["relpath"]) for x in data.get("left", [])
        ]
    except (AttributeError, KeyError, TypeError):
        raise UserError(
            f"{manifest}: not a manifest gh-run wrote; `gh-run fetch {run.run_id}` writes it again"
        ) from None
    from orchestrator.core.relpaths import problem

    for rel in rels:
        why = problem(rel)
        if why is not None:
            raise UserError(
                f"{manifest}: a file's relpath {why}, so the run's reports cannot be named from it;"
                f" `gh-run fetch {run.run_id}` writes the manifest again"
            )
    return [
        Report(run, rel)
        for rel in sorted(set(rels))
        if rel.startswith("artifacts/") and rel.endswith(REPORT_SUFFIXES)
    ]


def directives(name: str, partition: str, time_limit: str, extra: list[str]) -> list[str]:
    return [
        f"--job-name={name}",
        f"--partition={partition}",
        "--ntasks=1",
        "--cpus-per-task=1",
        f"--time={time_limit}",
        *extra,
    ]


@dataclass
class Submitted:
    folder: str
    array: str
    reduce: str
    reports: list[Report]
    runs: list[Run]
    # the map tasks' and the reduce's own runs in the state store
    map_runs: list[Run]
    reduce_run: Run


# The name of the analysis jobs' runs; an array task's job name is the array's + "#N" (what
# `runs.repair_intents` looks an interrupted submission up by).
RUN_NAME = "gh-run-analysis"


def _job_spec(first: Run, name: str, argv: list[str], time_limit: str) -> str:
    """What an analysis job is, as a job spec (the store keeps every run's): one task that runs
    gh-run on the nodes, no container, no profiler, never retried."""
    from orchestrator.runs import lifecycle as R
    from orchestrator.spec.job import JobSpec

    cluster = R.spec_of(first).cluster
    return JobSpec.model_validate(
        {
            "name": name,
            "cluster": cluster,
            "partition": first.partition,
            "resources": {"nodes": 1, "cpus_per_task": 1, "time": time_limit},
            "container": {"runtime": "none"},
            "profile": {"tool": "none"},
            "workload": {"kind": "command", "command": argv[0], "args": argv[1:]},
            "artifacts": {"include": []},
        }
    ).model_dump_json()


def _intents(
    store: Store,
    first: Run,
    stamp: str,
    folder: str,
    gh_run: list[str],
    reports: list[Report],
    time_limit: str,
) -> tuple[list[Run], Run]:
    """The map tasks' and the reduce's runs, written as intents before anything is sent."""
    import dataclasses

    base = dataclasses.replace(
        first,
        name=RUN_NAME,
        spec_path=None,
        executor="slurm",
        run_dir=folder,
        job_id=None,
        state=INTENT,
        exit_code=None,
        reason=None,
        attempt=0,
        campaign_id=None,
        variant=None,
        created_at=time.time(),
        submitted_at=None,
        ended_at=None,
        collected_at=None,
        # its scripts are map.sbatch and reduce.sbatch, not the run's job.sbatch: no retry may
        # submit the first run's script under an analysis run's seal
        script_sha256=None,
    )
    maps = [
        dataclasses.replace(
            base,
            run_id=f"analysis-{stamp}.map{i}",
            job_name=f"ghr-analysis-{stamp}-map#{i}",
            variant=f"map {i}",
            spec_json=_job_spec(
                first,
                f"analysis-map{i}",
                [*gh_run, "analyze", "--write-records", rep.there],
                time_limit,
            ),
        )
        for i, rep in enumerate(reports)
    ]
    reduce = dataclasses.replace(
        base,
        run_id=f"analysis-{stamp}.reduce",
        job_name=f"ghr-analysis-{stamp}-reduce",
        variant="reduce",
        spec_json=_job_spec(first, "analysis-reduce", [*gh_run, "analyze", "--json"], time_limit),
    )
    store.add_runs([*maps, reduce], detail=f"analyze --on-cluster: intent, in {folder}")
    return maps, reduce


def _sent(store: Store, runs: list[Run], job_ids: list[str]) -> list[Run]:
    now = time.time()
    return [
        store.update_run(
            r.run_id, job_id=job, state="PENDING", submitted_at=now, event=f"submitted as {job}"
        )
        for r, job in zip(runs, job_ids, strict=True)
    ]


def _refused(store: Store, runs: list[Run], exc: Exception) -> None:
    for r in runs:
        store.update_run(
            r.run_id,
            state=SUBMIT_FAILED,
            ended_at=time.time(),
            reason=str(exc)[:500],
            event="sbatch refused the analysis job",
        )


def submit(
    store: Store, home: Path, runs: list[Run], warn: Warn | None = None
) -> tuple[Submitted, object]:
    """Write the map and reduce scripts into a new analysis folder on the cluster, record the
    map tasks and the reduce as runs (intents first), submit the array and the reduce after
    it; returns what was submitted and the executor tracking it."""
    from orchestrator.render.scripts import make_environment, search_path
    from orchestrator.runs import lifecycle as R
    from orchestrator.site.cluster import load_cluster

    if not runs:
        raise UserError("--on-cluster: no runs named")
    clusters = {r.cluster for r in runs}
    if len(clusters) > 1:
        raise UserError(
            f"--on-cluster: the runs are on {len(clusters)} clusters"
            f" ({', '.join(sorted(clusters))}); analyse each cluster's runs apart"
        )
    reports = [rep for r in runs for rep in reports_of(home, r)]
    if not reports:
        raise UserError("--on-cluster: the runs list no reports (nsys exports, Kineto traces)")
    for run in runs:
        R.require_bound(run, "nothing was submitted")
    first = runs[0]
    cluster = load_cluster(R.spec_of(first).cluster)
    part = cluster.partitions.get(first.partition)
    time_limit = (part.default_time if part is not None else None) or "00:30:00"
    gh_run = cluster.gh_run_on_nodes()
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 100000:05d}"
    root = str(PurePosixPath(first.run_dir).parent / FOLDER)
    folder = f"{root}/{stamp}"
    name = f"ghr-analysis-{stamp}"
    env = make_environment(search_path(cluster))
    map_text = env.get_template("sbatch/analysis_map.sbatch.j2").render(
        version=__version__,
        directives=directives(
            f"{name}-map",
            first.partition,
            time_limit,
            [
                f"--array=0-{len(reports) - 1}",
                f"--output={folder}/%A_%a_0_log.out",
                f"--error={folder}/%A_%a_0_log.err",
            ],
        ),
        gh_run=gh_run,
        reports=[r.there for r in reports],
    )
    reduce_runs = [
        {"run_id": r.run_id, "folder": f"{r.run_dir}/artifacts", "out": f"{folder}/{r.run_id}.json"}
        for r in runs
    ]
    transport = R.transport_of_run(first)
    executor = R.slurm_executor_for(first, warn)
    # the right cluster for every job gh-run submits: the controller reached must be the one
    # the cluster file names, and the one each run went to (its job ids and folders are there)
    from orchestrator.executors import cluster_identity

    cluster_identity.confirm(cluster, transport)
    for run in runs:
        cluster_identity.check_run(run, transport, "nothing was submitted")
    maps, reduce_run = _intents(store, first, stamp, folder, gh_run, reports, time_limit)
    with tempfile.TemporaryDirectory(prefix="gh-run-analysis.") as tmp:
        local = Path(tmp) / stamp
        local.mkdir()
        (local / "map.sbatch").write_text(map_text)
        try:
            if transport.remote:
                transport.push(Path(tmp), [stamp], root)
            else:
                Path(root).mkdir(parents=True, exist_ok=True, mode=0o700)
                os.replace(local, folder)
            array = executor.sbatch(f"{folder}/map.sbatch", job_name=f"{name}-map")
        except Exception as exc:
            _refused(store, [*maps, reduce_run], exc)
            raise
        maps = _sent(store, maps, [f"{array}_{i}" for i in range(len(reports))])
        reduce_text = env.get_template("sbatch/analysis_reduce.sbatch.j2").render(
            version=__version__,
            directives=directives(
                f"{name}-reduce",
                first.partition,
                time_limit,
                [
                    f"--dependency=afterany:{array}",
                    f"--output={folder}/%j_0_log.out",
                    f"--error={folder}/%j_0_log.err",
                ],
            ),
            gh_run=gh_run,
            runs=reduce_runs,
        )
        try:
            if transport.remote:
                (local / "reduce.sbatch").write_text(reduce_text)
                transport.push(Path(tmp), [stamp], root)
            else:
                Path(folder, "reduce.sbatch").write_text(reduce_text)
            reduce = executor.sbatch(f"{folder}/reduce.sbatch", job_name=f"{name}-reduce")
        except Exception as exc:
            _refused(store, [reduce_run], exc)
            raise
    [reduce_run] = _sent(store, [reduce_run], [reduce])
    return Submitted(folder, array, reduce, reports, runs, maps, reduce_run), executor


def wait(
    store: Store,
    sub: Submitted,
    progress: Callable[[str], None] | None = None,
    interval: float = 2.0,
    warn: Warn | None = None,
) -> dict[str, str]:
    """Poll the tasks and the reduce as runs are polled (one batched query per poll, each
    state recorded in the store) until the reduce has ended; run id → final state."""
    from orchestrator.runs import lifecycle as R

    jobs = [*sub.map_runs, sub.reduce_run]
    shown = ""
    while True:
        jobs = R.refresh(store, jobs, warn)
        states = {j.run_id: j.state for j in jobs}
        reduce = states[sub.reduce_run.run_id]
        done = sum(1 for j in jobs[:-1] if is_terminal(j.state))
        line = f"map {done}/{len(jobs) - 1} tasks ended; reduce {reduce}"
        if progress is not None and line != shown:
            progress(line)
            shown = line
        if is_terminal(reduce):
            return states
        time.sleep(interval)


def results(home: Path, sub: Submitted, states: dict[str, str]) -> tuple[list[object], list[str]]:
    """Each run's analysis (Metrics, or a RunSet where its folder held separate runs) read back,
    labelled by its run id, and every report's record copied into the artifact store; and
    notes (map tasks that did not complete)."""
    from orchestrator.runs import lifecycle as R

    transport = R.transport_of_run(sub.runs[0])
    failed = [r.run_id for r in sub.map_runs if states.get(r.run_id) != "COMPLETED"]
    reduce_state = states.get(sub.reduce_run.run_id, "?")
    reduce_log = f"{sub.folder}/{sub.reduce}_0_log.out"
    out: list[object] = []
    for run in sub.runs:
        data = transport.read_from(f"{sub.folder}/{run.run_id}.json", 0)
        if data is None:
            tail = (transport.read_tail(reduce_log, 2000) or b"").decode("utf-8", "replace")
            end = " ".join(tail.split())[-600:]
            raise RuntimeFailure(
                f"the reduce job {sub.reduce} ({reduce_state}) wrote no analysis of run"
                f" {run.run_id}; its log {reduce_log} ends: {end} (`gh-run logs "
                f"{sub.reduce_run.run_id}`)"
            )
        out.append(_reduced(data, f"{sub.folder}/{run.run_id}.json", run.run_id))
    for rep in sub.reports:
        rec = transport.read_from(rep.there + RECORD_SUFFIX, 0)
        if rec is None:
            continue  # its task failed: the reduce read the report itself
        dest = artifacts.store_dir(home, rep.run.run_id) / (rep.relpath + RECORD_SUFFIX)
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(rec)
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    notes = []
    if failed:
        notes.append(
            f"{len(failed)} map task(s) did not complete ({', '.join(failed[:5])}): the reduce read"
            f" those reports itself; their logs: `gh-run logs RUN` of each"
        )
    return out, notes


def _reduced(data: bytes, where: str, run_id: str) -> object:
    """The reduce job's answer for one run, read as evidence: a file cut short (the job killed
    while writing it) or not gh-run's is one sentence naming it, never a traceback."""
    from pydantic import ValidationError

    from orchestrator.analysis import Metrics, RunSet

    try:
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        if doc.get("format") == "gh-run.runs/1":
            return RunSet.model_validate(doc)
        m = Metrics.model_validate(doc)
    except (ValueError, RecursionError, ValidationError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise RuntimeFailure(
            f"{where}: not an analysis gh-run's reduce job writes ({why}); run `gh-run analyze"
            f" --on-cluster {run_id}` again"
        ) from None
    m.label = run_id
    return m
