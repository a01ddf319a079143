"""Which executor takes a job, and where its SLURM clients are: `--executor slurm|local|auto`.

submitit's AutoExecutor shape: each executor says whether it takes a cluster's jobs on this
machine (`Executor.not_here`), and `auto` asks them in `AUTO_ORDER`, the first that does wins;
when none does, their reasons make the one refusal. A cluster reached over SSH (its transport)
is always SLURM's: the local executor would run its jobs on this machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from orchestrator.core.errors import UserError
from orchestrator.executors.base import Executor, Warn
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.transport import registry
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL

if TYPE_CHECKING:
    from orchestrator.site.cluster import Cluster

ExecutorKind = Literal["auto", "local", "slurm"]

# What `auto` tries, best first: the scheduler where one answers, else this machine.
AUTO_ORDER: tuple[type[Executor], ...] = (SlurmExecutor, LocalExecutor)


def auto_executor(clusters: Sequence[Cluster], render_only: bool = False) -> str:
    """What `--executor auto` means for jobs of these clusters here: the name of the first
    executor of AUTO_ORDER that takes them. `render_only`: print what submit would send,
    never refuse."""
    refusals = []
    for cls in AUTO_ORDER:
        why = cls.not_here(clusters, render_only)
        if why is None:
            return cls.name
        refusals.append(why)
    last = refusals[-1]  # the fallback's file and fix; every executor's fact
    raise UserError(f"{last.where}: {', and '.join(r.why for r in refusals)}; {last.fix}")


def transport_for(cluster: Cluster, warn: Warn | None = None) -> Transport:
    """Where the cluster's SLURM clients run: this machine, or its login node (one per
    destination per process)."""
    transport = registry.for_cluster(cluster)
    if warn is not None:
        transport.warn = warn
    return transport


def transport_of(executor: Executor) -> Transport:
    """Where an executor's jobs run: a SLURM executor's transport, or this machine."""
    return executor.transport if isinstance(executor, SlurmExecutor) else LOCAL


def choose_executor(
    kind: ExecutorKind,
    warn: Warn | None = None,
    cluster: Cluster | None = None,
    render_only: bool = False,
) -> Executor:
    """slurm, local, or auto (`auto_executor`), for jobs of `cluster`."""
    transport = transport_for(cluster, warn) if cluster is not None else LOCAL
    if transport.remote:
        if kind == "local":
            from orchestrator.core.paths import display_path

            src = display_path(Path(cluster.source)) if cluster and cluster.source else "cluster"
            raise UserError(
                f"--executor local: {src} is reached over SSH (transport: ssh) and the local "
                "executor runs jobs on this machine; use --executor slurm (or auto)"
            )
        return SlurmExecutor(warn=warn, transport=transport, clusters=_clusters_of(cluster))
    if kind == "auto":
        name = auto_executor([cluster] if cluster else [], render_only)
        kind = "slurm" if name == SlurmExecutor.name else "local"
    if kind == "slurm":
        if cluster is not None and cluster.scheduler == "none":
            from orchestrator.core.paths import display_path

            src = (
                display_path(Path(cluster.source)) if cluster.source else f"cluster {cluster.name}"
            )
            raise UserError(
                f"--executor slurm: {src} has no scheduler (scheduler: none: its jobs run on this "
                "machine); use --executor local (or auto), or name a SLURM cluster with --cluster"
            )
        return SlurmExecutor(warn=warn, clusters=_clusters_of(cluster))
    return LocalExecutor()


def _clusters_of(cluster: Cluster | None) -> str | None:
    from orchestrator.executors.cluster_identity import clusters_option

    return clusters_option(cluster) if cluster is not None else None
