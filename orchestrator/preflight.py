"""What `gh-run check` (and `gh-run doctor SPEC`) finds before anything is sent: every problem
of a job at once, each one sentence with its fix, instead of the first one per try.

In order: the partition's limits (all of them, at their lines in the job file), the run
folder (`paths.runs`, e.g. an unset $SCRATCH), the image and the nsys on this machine, the
SLURM cluster the controller says it is (cluster_identity.py), and only when all of that
allows, the controller's own verdict (`sbatch --test-only`): a controller of another cluster
is never asked, and a job gh-run already knows the partition refuses is not sent to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import cluster_identity
from orchestrator.errors import GhRunError, UserError

if TYPE_CHECKING:
    from orchestrator.prepare import Prepared
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


def source_of(prep: Prepared) -> str:
    from orchestrator.yamlio import display_path

    return display_path(Path(prep.cluster.source)) if prep.cluster.source else prep.cluster.name


def spec_where(prep: Prepared) -> str:
    from orchestrator.yamlio import display_path

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
    from orchestrator import prepare as P

    try:
        root = P.cluster_runs_root(prep.cluster, home, transport)
    except GhRunError as exc:
        return _problem("run folder", exc)
    where = f" on {transport.where}" if transport.remote else ""
    return Finding(what="run folder", detail=f"run folders go to {root}{where}")


def image(prep: Prepared) -> Finding | None:
    from orchestrator.container import check_image

    c = prep.spec.container
    if c.runtime == "none" or not c.image:
        return None
    try:
        check_image(c, prep.located("container", "image"))
    except GhRunError as exc:
        return _problem("image", exc)
    return Finding(what="image", detail=c.image)


def nsys(prep: Prepared) -> Finding | None:
    """Ask the nsys the job will run (on this machine: on the host or inside the image) for its
    version. Undeclared (rendered for gh-run's default) and of another family: refused, since
    the flags and report names would be wrong; declared and different: a warning (the nodes
    may have another nsys than this machine)."""
    from orchestrator import doctor

    if prep.spec.profile.tool != "nsys":
        return None
    setup, found, how = doctor.nsys_probe(prep.spec, prep.partition, prep.partition_name)
    rendered = f"rendered for nsys {setup.version} ({setup.version_from})"
    if found is None:
        return Finding(
            what="nsys", detail=f"nsys: {rendered}; could not ask it here: {how}", warning=True
        )
    if found.family == setup.version.family:
        return Finding(what="nsys", detail=f"nsys: {rendered}; {how} is {found}", shown=True)
    fix = doctor.mismatch_fix(found)
    if setup.version_from.startswith("gh-run's default"):
        where = prep.located("profile")
        return _problem(
            "nsys",
            UserError(f"{where}: profile: the job is {rendered}, but {how} is {found}; {fix}"),
        )
    return Finding(
        what="nsys", detail=f"nsys: {rendered}, but {how} is {found}; {fix}", warning=True
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
        detail=f"cluster: the SLURM controller {how} is cluster {facts.cluster_name}, the one "
        f"{src} names",
        shown=True,
    )


def controller(prep: Prepared, home: Path, transport: Transport) -> Finding:
    """The controller's verdict on the very script `submit` would send (`sbatch --test-only`,
    the script on stdin: nothing is copied to a remote cluster for it)."""
    from orchestrator import prepare as P
    from orchestrator.cluster import explain_controller
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
    from orchestrator import gpu_counters as G

    setup_lines = [*prep.cluster.defaults.setup, *prep.partition.setup]
    return [
        Finding(what="gpu metrics", detail=line, warning=True)
        for line in G.warnings(prep.spec, setup_lines)
    ]


def check_job(
    prep: Prepared, home: Path, transport: Transport, limits: list[GhRunError]
) -> list[Finding]:
    """Everything `check` verifies, in order; the controller is asked last, and only when it
    is the file's cluster and gh-run found nothing the partition would refuse."""
    found = [*partition(prep, limits), run_folder(prep, home, transport)]
    if not transport.remote:  # a remote cluster's image and nsys are paths there
        found += [f for f in (image(prep), nsys(prep)) if f is not None]
        found += gpu_counters(prep)
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
    from orchestrator.errors import combine

    errors = problems(found)
    if errors:
        raise combine(errors, spec_where(prep))
