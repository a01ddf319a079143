"""A job before it is a run: the spec and its cluster loaded and checked against the partition
(`prepare`), where its run folder goes, and its script rendered (which executor takes it:
orchestrator/executors/choose.py).

`render` and `check` need only this (Pydantic, Jinja, YAML); the life of a run once submitted
(the state store, tracking, collecting) is orchestrator/runs/lifecycle.py, which `status` and `logs`
import without this module's libraries, and `render` without theirs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.errors import GhRunError, UserError
from orchestrator.core.paths import mirror_root
from orchestrator.executors.choose import transport_for
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL

if TYPE_CHECKING:
    from orchestrator.render.scripts import RenderedJob
    from orchestrator.site.cluster import Cluster, Partition
    from orchestrator.spec.job import JobSpec
    from orchestrator.spec.yamlio import Located


@dataclass
class Prepared:
    """A spec that passed every check that needs no cluster: ready to render and submit."""

    spec: JobSpec
    spec_path: Path | None
    cluster: Cluster
    partition_name: str
    partition: Partition
    # Where each field of the spec was written (None: built in code, or a campaign variant).
    doc: Located | None = None

    def located(self, *path: str) -> str:
        """`file:line` of a spec field (`file (--set key)` for an override), for messages."""
        from orchestrator.site.cluster import located

        if self.doc is not None:
            return located(self.doc, *path)
        from orchestrator.core.paths import display_path

        return display_path(self.spec_path) if self.spec_path else self.spec.name


def prepare(
    spec_path: Path,
    overrides: Sequence[str] = (),
    cluster: str | None = None,
    problems: list[GhRunError] | None = None,
    ask_controller: bool = False,
) -> Prepared:
    """Load the spec and its cluster and check the job against its partition. `problems`: the
    partition's refusals are collected there (check shows every problem at once) instead of
    raised; a spec or cluster file that cannot be read is always raised. `ask_controller`:
    the command will ask the cluster's controller who it is; the question goes out as soon as
    the cluster file is read (cluster_identity.ask_soon)."""
    from orchestrator.checks.fit import fit_partition
    from orchestrator.executors import cluster_identity

    if ask_controller:  # most clusters are this machine's: ask before anything is even imported
        cluster_identity.ask_soon(LOCAL)
    from orchestrator.core.paths import display_path
    from orchestrator.site.cluster import find_cluster_file, load_cluster
    from orchestrator.spec.job import load_spec_located

    spec, doc = load_spec_located(spec_path, list(overrides))
    if cluster:
        spec.cluster = cluster
    try:
        find_cluster_file(spec.cluster)
    except UserError as exc:
        where = "--cluster" if cluster else f"{display_path(spec_path)}: cluster"
        raise UserError(f"{where}: {exc}") from None
    cl = load_cluster(spec.cluster)
    if ask_controller:
        cluster_identity.ask_soon(transport_for(cl), cluster_identity.clusters_option(cl))
    part_name, part = fit_partition(spec, cl, doc, problems)
    return Prepared(spec, spec_path, cl, part_name, part, doc)


def new_run_id(name: str) -> str:
    # os.urandom is what secrets.token_hex reads; importing secrets (hmac, OpenSSL) would add
    # ~7 ms to the start-up of every command that imports this module (status, logs).
    return f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"


def runs_root(cluster: Cluster, home: Path) -> Path:
    raw = cluster.paths.runs.replace("{home}", str(home))
    # An empty variable is as good as unset: `SCRATCH=` would put the runs under /gh-run.
    names = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", raw)
    empty = [n for n in dict.fromkeys(names) if os.environ.get(n) == ""]
    text = os.path.expandvars(raw)
    if "$" in text or empty:
        unset = [*re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text), *empty]
        from orchestrator.core.paths import display_path

        src = display_path(Path(cluster.source)) if cluster.source else cluster.name
        raise UserError(
            f"{src}: paths.runs: {cluster.paths.runs!r} uses "
            f"${', $'.join(unset)}, which is not set here; set it (e.g. export SCRATCH=/scratch/"
            "$USER) or point paths.runs at a folder"
        )
    return Path(text).expanduser().absolute()


# A remote paths.runs goes through the login shell (resolve.sh): plain path characters and
# $VAR / ${VAR} / ${VAR:-default} / a leading ~ only, never a quote or a command.
_REMOTE_PATH_RE = re.compile(r"^[A-Za-z0-9_.,@%+=:/~${}-]+\Z")


def cluster_runs_root(cluster: Cluster, home: Path, transport: Transport) -> str:
    """Where run folders live on the cluster side: paths.runs, resolved here for a local
    cluster, on the login node (its $SCRATCH, its ~) for one reached over SSH."""
    from orchestrator.core.paths import display_path

    if not transport.remote:
        return str(runs_root(cluster, home))
    src = display_path(Path(cluster.source)) if cluster.source else cluster.name
    text = cluster.paths.runs
    if "{home}" in text:
        raise UserError(
            f"{src}: paths.runs: {{home}} is the gh-run home on this machine, not a folder on "
            "the cluster; with transport: ssh name a folder on the cluster, e.g. "
            "$SCRATCH/gh-run/runs"
        )
    if not _REMOTE_PATH_RE.match(text) or "$(" in text:
        raise UserError(
            f"{src}: paths.runs: {text!r} may hold only path characters, $VAR and a leading ~ "
            "when the cluster is reached over SSH; write a plain path such as $SCRATCH/gh-run/runs"
        )
    root = transport.resolve_path(text, f"{src}: paths.runs").rstrip("/")
    if not root.startswith("/"):
        raise UserError(
            f"{src}: paths.runs: {text!r} is {root!r} on {transport.where}, not an absolute "
            "path; write an absolute path or one under $HOME or $SCRATCH"
        )
    return root


def local_root(cluster: Cluster, home: Path, transport: Transport) -> Path:
    """Where this machine writes the run folders: the runs root itself for a local cluster,
    the mirror of the remote one (copied there before sbatch) for a cluster over SSH."""
    if transport.remote:
        return mirror_root(home, cluster.name)
    return runs_root(cluster, home)


def run_dir_for(
    cluster: Cluster, home: Path, run_id: str, transport: Transport | None = None
) -> Path:
    """The run folder, as the job sees it (on the cluster side)."""
    from orchestrator.spec.job import SBATCH_VALUE_RE

    path = Path(cluster_runs_root(cluster, home, transport or LOCAL)) / run_id
    if not SBATCH_VALUE_RE.fullmatch(str(path)):
        raise UserError(
            f"run folder {path} has characters sbatch cannot take (spaces?); set GH_RUN_HOME or "
            f"the cluster's paths.runs to a plain path"
        )
    return path


def render(prep: Prepared, run_id: str, run_dir: Path, launcher: str = "srun") -> RenderedJob:
    from orchestrator.render.scripts import render_job

    return render_job(
        prep.spec,
        prep.cluster,
        prep.partition_name,
        prep.partition,
        run_id,
        str(run_dir),
        "direct" if launcher == "direct" else "srun",
    )
