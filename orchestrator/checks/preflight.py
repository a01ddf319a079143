"""The checks of a job before anything is sent, in one place: each a function that returns its
problem (one sentence naming file, field and fix) or what it found. `render`, `check`,
`submit`, campaigns and `gh-run doctor SPEC` all decide through these:

- `fit_partition`: the job against its partition (cluster.validate_job: every limit, at its
  line in the job file; the cluster's defaults filled in) and the partition's template;
  what `render` needs (prepare.py) and every campaign variant.
- `submit_host`: what only the submitting machine can tell: a local image exists, the
  secrets named in `workload.secret_env` are set here (`submit`, campaigns, `check`).
- `check_job`: everything `check` (and `doctor SPEC`) finds, every problem at once instead of
  the first one per try. In order: the partition's limits, the run folder (`paths.runs`, e.g.
  an unset $SCRATCH), the image, the secrets and the nsys on this machine, the SLURM cluster
  the controller says it is (cluster_identity.py), and only when all of that allows, the
  controller's own verdict (`sbatch --test-only`): a controller of another cluster is never
  asked, and a job gh-run already knows the partition refuses is not sent to it.

What a single file says about itself (types, ranges, unknown keys) is its model's validation
(spec.py, cluster.py, profile.py: Pydantic, at load); this module holds the decisions that need
two of them, or this machine, or the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.checks.fit import fit_partition as fit_partition
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.core.escape import plain
from orchestrator.executors import cluster_identity

if TYPE_CHECKING:
    from orchestrator.checks.prepare import Prepared
    from orchestrator.spec.job import JobSpec
    from orchestrator.transport.base import Transport


@dataclass(frozen=True)
class Finding:
    """One thing checked: what (a short name), the line to show, and the error when it is a
    problem. `shown`: an ok worth a line of its own; `warning`: ok, with a caution."""

    what: str
    detail: str
    error: GhRunError | None = None
    shown: bool = False
    warning: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def _problem(what: str, exc: GhRunError) -> Finding:
    return Finding(what=what, detail=exc.message, error=exc)


def image_problem(spec: JobSpec, where: str) -> GhRunError | None:
    """A local image must be an absolute path to a file on this machine (render works without
    it; a job would fail at its first line). A docker:// or other remote URI is not looked for."""
    from orchestrator.spec.container import check_image

    try:
        check_image(spec.container, where)
    except GhRunError as exc:
        return exc
    return None


def secrets_problem(spec: JobSpec, where: str) -> GhRunError | None:
    """Every secret `workload.secret_env` names is set in this environment (gh-run passes
    secrets by name, never by value: sbatch takes them from here)."""
    missing = [n for n in spec.workload.secret_env if n not in os.environ]
    if not missing:
        return None
    return UserError(
        f"{where}: workload.secret_env: {', '.join(missing)} is not set in this environment; "
        "export it before submitting (gh-run passes secrets by name, never by value)"
    )


def submit_host(spec: JobSpec, where: str, remote: bool = False) -> list[GhRunError]:
    """What only the submitting machine can tell, before anything is written: the image (not
    on a cluster reached over SSH: there it is a path on the cluster) and the secrets."""
    found = [None if remote else image_problem(spec, where), secrets_problem(spec, where)]
    return [e for e in found if e is not None]


def check_submit_host(spec: JobSpec, where: str, remote: bool = False) -> None:
    """`submit_host`, its problems raised together."""
    from orchestrator.core.errors import combine

    errors = submit_host(spec, where, remote)
    if errors:
        raise combine(errors, where)


def source_of(prep: Prepared) -> str:
    from orchestrator.core.paths import display_path

    return display_path(Path(prep.cluster.source)) if prep.cluster.source else prep.cluster.name


def spec_where(prep: Prepared) -> str:
    from orchestrator.core.paths import display_path

    return display_path(prep.spec_path) if prep.spec_path else prep.spec.name


def partition(prep: Prepared, limits: list[GhRunError]) -> list[Finding]:
    if limits:
        return [_problem("partition", exc) for exc in limits]
    return [
        Finding(
            what="partition",
            detail=f"{spec_where(prep)} fits the limits of partition {prep.partition_name} "
            f"({source_of(prep)})",
        )
    ]


def run_folder(prep: Prepared, home: Path, transport: Transport) -> Finding:
    from orchestrator.checks import prepare as P

    try:
        root = P.cluster_runs_root(prep.cluster, home, transport)
    except GhRunError as exc:
        return _problem("run folder", exc)
    where = f" on {transport.where}" if transport.remote else ""
    return Finding(what="run folder", detail=f"run folders go to {root}{where}")


def image(prep: Prepared) -> Finding | None:
    c = prep.spec.container
    if c.runtime == "none" or not c.image:
        return None
    exc = image_problem(prep.spec, prep.located("container", "image"))
    return _problem("image", exc) if exc else Finding(what="image", detail=c.image)


def secrets(prep: Prepared) -> Finding | None:
    names = prep.spec.workload.secret_env
    if not names:
        return None
    exc = secrets_problem(prep.spec, prep.located("workload", "secret_env"))
    if exc:
        return _problem("secrets", exc)
    return Finding(what="secrets", detail=f"set here: {', '.join(names)}")


def nsys(prep: Prepared, say: Callable[[str], None] | None = None) -> Finding | None:
    """Judge the nsys the nodes will run, where this machine can ask it (nsys_where.py): the
    image's (asked through the runtime here), a path's (asked here), or, where the nodes load
    it as an environment module, the version the cluster file declares against the version the
    module's name says; the finding says which it judged. Undeclared (rendered for gh-run's
    default) and of another family: refused, since the flags and report names would be wrong;
    declared and different: a warning. `say`: told before a program is run here to ask it."""
    from orchestrator.checks import doctor
    from orchestrator.checks.nsys_where import nodes_nsys
    from orchestrator.nsys.profile import nsys_setup

    spec = prep.spec
    if spec.profile.tool != "nsys":
        return None
    setup = nsys_setup(spec.profile, prep.partition.nsys, prep.partition_name)
    where = nodes_nsys(spec, setup, [*prep.cluster.defaults.setup, *prep.partition.setup])
    rendered = f"rendered for nsys {setup.version} ({setup.version_from})"
    default = setup.version_from.startswith("gh-run's default")
    judged = where.judged
    if where.kind == "module":
        found = where.module_version
        if found is None:
            detail = f"nsys: {rendered}; {where.stated()} ({judged})"
            if default:
                return Finding(
                    what="nsys",
                    detail=f"{detail}; declare its version (partitions.{prep.partition_name}"
                    ".nsys.version, or profile.nsys_version)",
                    warning=True,
                )
            return Finding(what="nsys", detail=detail, shown=True)
        said = where.stated(found)
    else:
        setup, found, how = doctor.nsys_probe(
            spec,
            prep.partition,
            prep.partition_name,
            doctor.configured_nsys(prep.cluster, prep.partition),
            say,
        )
        if found is None:
            return Finding(
                what="nsys",
                detail=f"nsys: {rendered}; could not ask it here: {how} ({judged})",
                warning=True,
            )
        said = f"{how} is {found}"
    if found.family == setup.version.family:
        return Finding(what="nsys", detail=f"nsys: {rendered}; {said} ({judged})", shown=True)
    fix = doctor.mismatch_fix(found)
    if default:
        where_ = prep.located("profile")
        return _problem(
            "nsys",
            UserError(f"{where_}: profile: the job is {rendered}, but {said} ({judged}); {fix}"),
        )
    return Finding(
        what="nsys", detail=f"nsys: {rendered}, but {said} ({judged}); {fix}", warning=True
    )


def cluster(prep: Prepared, transport: Transport) -> Finding:
    src = source_of(prep)
    try:
        transport.connect()
        facts = cluster_identity.confirm(prep.cluster, transport)
    except GhRunError as exc:
        return _problem("cluster", exc)
    how = cluster_identity.reached(transport, cluster_identity.clusters_option(prep.cluster))
    return Finding(
        what="cluster",
        detail=f"cluster: the SLURM controller {how} is cluster {plain(facts.cluster_name)}, the"
        f" one {src} names",
        shown=True,
    )


def controller(prep: Prepared, home: Path, transport: Transport) -> Finding:
    """The controller's verdict on the very script `submit` would send (`sbatch --test-only`,
    the script on stdin: nothing is copied to a remote cluster for it)."""
    from orchestrator.checks import prepare as P
    from orchestrator.checks.controller_answer import explain_controller, lacks_partition
    from orchestrator.executors.slurm import SlurmExecutor

    rid = P.new_run_id(prep.spec.name)
    try:
        run_dir = P.run_dir_for(prep.cluster, home, rid, transport)
    except GhRunError:
        # The run folder is reported on its own; the controller judges the rest the same.
        run_dir = Path("/nonexistent/gh-run-check") / rid
    rendered = P.render(prep, rid, run_dir, "srun")
    ex = SlurmExecutor(transport=transport, clusters=cluster_identity.clusters_option(prep.cluster))
    try:
        ok, text = ex.test_only(rendered.script)
    except GhRunError as exc:
        return _problem("controller", exc)
    words = explain_controller(ok, text)
    if ok:
        return Finding(
            what="controller",
            detail=f"the SLURM controller accepts {prep.spec.name} on partition "
            f"{prep.partition_name}: {words} (controller: {text})",
            shown=True,
        )
    src = source_of(prep)
    if lacks_partition(text):
        return _problem(
            "controller",
            UserError(
                f"{spec_where(prep)}: partition {prep.partition_name} is in {src}, but the SLURM "
                f"controller of cluster {prep.cluster.name} has no partition of that name "
                f'(controller: "{text}"); pick one it has (`sinfo -s`), or draft the cluster '
                f"file from what SLURM has with `gh-run partitions import --name "
                f"{prep.cluster.name}` (an admin installs it with --install)"
            ),
        )
    return _problem(
        "controller",
        UserError(
            f"{spec_where(prep)}: the SLURM controller of cluster {prep.cluster.name} refuses "
            f'this job on partition {prep.partition_name}: {words} (controller: "{text}"); '
            f"gh-run's own check against {src} passed, so ask for less in resources, or "
            f"correct {src} if it promises more than the partition has"
        ),
    )


def gpu_counters(prep: Prepared) -> list[Finding]:
    """Why a job that asks for GPU metrics may get none on this machine's GPUs (counters for
    admins only, DCGM profiling): warnings, since the nodes may differ."""
    from orchestrator.checks import gpu_counters as G

    setup_lines = [*prep.cluster.defaults.setup, *prep.partition.setup]
    return [
        Finding(what="gpu metrics", detail=line, warning=True)
        for line in G.warnings(prep.spec, setup_lines)
    ]


def own_workloads(prep: Prepared) -> list[Finding]:
    """A job running gh-run's own workloads with a Python gh-run cannot put in its place: which
    Python the nodes' PATH must give (a warning: the site's PATH may already give it)."""
    from orchestrator.render.own_workloads import path_advice

    text = path_advice(prep.spec, prep.cluster, spec_where(prep))
    return [Finding(what="workload", detail=text, warning=True)] if text else []


def check_job(
    prep: Prepared,
    home: Path,
    transport: Transport,
    limits: list[GhRunError],
    say: Callable[[str], None] | None = None,
) -> list[Finding]:
    """Everything `check` verifies, in order; the controller is asked last, and only when it
    is the file's cluster and gh-run found nothing the partition would refuse. `say`: told,
    before it runs, each program run here to ask it (the job's nsys)."""
    found = [*partition(prep, limits), run_folder(prep, home, transport)]
    if not transport.remote:  # a remote cluster's image and nsys are paths there
        found += [f for f in (image(prep), secrets(prep), nsys(prep, say)) if f is not None]
        found += gpu_counters(prep)
    else:  # sbatch takes the secrets from this environment either way
        found += [f for f in (secrets(prep),) if f is not None]
    found += own_workloads(prep)
    identity = cluster(prep, transport)
    found.append(identity)
    if identity.ok and not limits:
        found.append(controller(prep, home, transport))
    return found


def problems(found: list[Finding]) -> list[GhRunError]:
    """The errors, each once (a login node that does not answer is met by two checks)."""
    errors: dict[str, GhRunError] = {}
    for f in found:
        if f.error is not None:
            errors.setdefault(f.error.message, f.error)
    return list(errors.values())


def raise_problems(prep: Prepared, found: list[Finding]) -> None:
    from orchestrator.core.errors import combine

    errors = problems(found)
    if errors:
        raise combine(errors, spec_where(prep))
