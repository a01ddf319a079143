"""Which SLURM cluster the controller gh-run reaches is, and the refusal when it is not the one a
cluster file (or a run) names.

A cluster file names its SLURM cluster (`slurm.cluster_name`, the controller's `ClusterName`).
Before anything is sent (check, submit, campaign run, cancel, schedules) gh-run asks the
controller it reaches, directly or through the login node, for its name and refuses a
controller of another name: on a site with several clusters, a laptop whose SLURM
configuration points elsewhere, or a cluster file copied from another site, the job would
otherwise land on machines it was not written for.

The question is `scontrol show config`: the controller's own configuration (not this
machine's slurm.conf), the cheapest SLURM answer that holds the name. Measured on the dev
cluster (SLURM 22.05, 20 runs each): `scontrol show config` 3 ms, `scontrol ping` 2 ms (no
name), `sinfo -h -o %P` 5 ms (no name), `sacctmgr show cluster` 180 ms (asks slurmdbd, which
lists clusters but not which one answers here); with `--clusters` every client first asks
slurmdbd where that cluster's controller is (about 90 ms). It is asked once per process and
destination, and its answer also says whether a controller answers at all (`--executor
auto`) and the largest job array (MaxArraySize, for campaigns).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.core.escape import plain
from orchestrator.executors.slurm_cli import SLURM_TIMEOUT_S, UNREACHABLE, run_slurm

if TYPE_CHECKING:
    from orchestrator.site.cluster import Cluster
    from orchestrator.store.db import Run
    from orchestrator.transport.base import Transport

_CONFIG_LINE = re.compile(r"^(ClusterName|MaxArraySize)\s*=\s*(\S+)", re.MULTILINE)
# What the SLURM clients say when --clusters names a cluster slurmdbd does not know.
_UNKNOWN_CLUSTER = re.compile(r"No cluster '[^']*' known|invalid entry for --cluster", re.I)


@dataclass(frozen=True)
class ControllerFacts:
    """What one `scontrol show config` said."""

    cluster_name: str
    max_array_size: int | None


def parse_config(text: str) -> ControllerFacts | None:
    """The facts in `scontrol show config` output; None when it names no cluster."""
    found = dict(_CONFIG_LINE.findall(text))
    name = found.get("ClusterName")
    if not name or name == "(null)":
        return None
    size = found.get("MaxArraySize", "")
    return ControllerFacts(cluster_name=name, max_array_size=int(size) if size.isdigit() else None)


# One answer per destination and --clusters per process (a failure too: asking again in the
# same command would only make it wait twice).
_ANSWERS: dict[tuple[str, str | None], ControllerFacts | RuntimeFailure] = {}


def controller_facts(
    transport: Transport, clusters: str | None = None, timeout: float = SLURM_TIMEOUT_S
) -> ControllerFacts:
    """The controller's name (and MaxArraySize), asked once per process; RuntimeFailure when
    no controller answers or it does not say its name."""
    key = (transport.key, clusters)
    early = _EARLY.pop(key, None)
    if early is not None:
        early.join()  # asked already, while the spec was being checked (ask_soon)
    if key not in _ANSWERS:
        _ANSWERS[key] = _ask(transport, clusters, timeout)
    answer = _ANSWERS[key]
    if isinstance(answer, RuntimeFailure):
        raise answer
    return answer


# Questions sent ahead (ask_soon): the thread that records the answer in _ANSWERS.
_EARLY: dict[tuple[str, str | None], threading.Thread] = {}


def ask_soon(transport: Transport, clusters: str | None = None) -> None:
    """Send the question now, in the background, when the answer will be wanted later in this
    command (`check`, `submit`): the controller's round trip (5-20 ms on the dev cluster)
    overlaps with reading and checking the spec instead of adding to it. Only for SLURM
    clients on this machine (an SSH connection is made, and its failures said, in the
    foreground); an answer nobody asks for is dropped, and nothing is sent before the identity
    is confirmed but this question."""
    key = (transport.key, clusters)
    if transport.remote or key in _ANSWERS or key in _EARLY or shutil.which("scontrol") is None:
        return

    def ask() -> None:
        # A failure here is asked again, and said, in the foreground.
        with contextlib.suppress(RuntimeFailure):
            _ANSWERS.setdefault(key, _ask(transport, key[1], SLURM_TIMEOUT_S))

    thread = _EARLY[key] = threading.Thread(target=ask, name="gh-run-cluster-identity", daemon=True)
    thread.start()


def _ask(
    transport: Transport, clusters: str | None, timeout: float
) -> ControllerFacts | RuntimeFailure:
    try:
        res = run_slurm(
            ["scontrol", "show", "config"], timeout=timeout, transport=transport, clusters=clusters
        )
    except RuntimeFailure as exc:
        if type(exc) is not RuntimeFailure:
            raise  # a TransportError: the login node, not the controller, did not answer
        return exc
    facts = parse_config(res.stdout) if res.returncode == 0 else None
    if facts is not None:
        return facts
    said = plain(" ".join((res.stderr + res.stdout).split())[:300]) or f"exit {res.returncode}"
    if res.returncode == 0:
        said = f"no ClusterName in its answer: {said}"
    return RuntimeFailure(f"`scontrol show config` failed on {transport.where} ({said})")


def forget() -> None:
    """Drop the remembered answers (tests; a long-lived process that must ask again)."""
    _ANSWERS.clear()


def same_name(a: str, b: str) -> bool:
    """Whether two SLURM cluster names are one cluster: SLURM lower-cases ClusterName
    (slurm.conf(5)), so a cluster file's `GHDev` is the controller's `ghdev`."""
    return a.lower() == b.lower()


def clusters_option(cluster: Cluster) -> str | None:
    """What gh-run passes as --clusters for this cluster file's jobs (None: nothing)."""
    return cluster.slurm.cluster_name if cluster.slurm.multi_cluster else None


def reached(transport: Transport, clusters: str | None) -> str:
    """The controller in words: which configuration or login node led to it."""
    if transport.remote:
        how = f"--clusters={clusters} reaches" if clusters else "the SLURM clients reach"
        return f"that {how} on {transport.where}"
    how = f"--clusters={clusters} reaches" if clusters else "this machine's SLURM clients reach"
    how = f"that {how}"
    conf = os.environ.get("SLURM_CONF")
    return f"{how} (SLURM_CONF={conf})" if conf else f"{how} (their slurm.conf)"


def _source(cluster: Cluster) -> str:
    from orchestrator.spec.yamlio import display_path

    return display_path(Path(cluster.source)) if cluster.source else f"cluster {cluster.name}"


def confirm(cluster: Cluster, transport: Transport) -> ControllerFacts:
    """The controller's facts, once it is confirmed to be the cluster the file names; else one
    sentence naming both clusters (UserError, exit 2). Nothing has been sent when it raises."""
    clusters = clusters_option(cluster)
    src = _source(cluster)
    if not transport.remote and shutil.which("scontrol") is None:
        login = f" ({cluster.login})" if cluster.login else ""
        raise RuntimeFailure(
            f"the SLURM clients (scontrol, sbatch) are not installed on this machine, so the "
            f"controller of cluster {cluster.name} cannot be asked and nothing was sent; run "
            f"gh-run on a {cluster.name} login node{login}, or reach it from here over SSH "
            f"(transport: ssh and login: in {src})"
        )
    try:
        facts = controller_facts(transport, clusters)
    except RuntimeFailure as exc:
        if type(exc) is not RuntimeFailure:
            raise
        if clusters and _UNKNOWN_CLUSTER.search(str(exc)):
            raise UserError(
                f"{src}: slurm.cluster_name: SLURM does not know a cluster {clusters!r} "
                f"({exc}); use a name from `sacctmgr list clusters`, or set "
                "slurm.multi_cluster: false when the login node's own cluster is the one"
            ) from None
        if UNREACHABLE.search(str(exc)):
            raise RuntimeFailure(
                f"the SLURM controller {reached(transport, clusters)} could not be reached "
                f"({exc}), so gh-run cannot confirm that it is cluster "
                f"{cluster.slurm.cluster_name or cluster.name} and sent nothing; check that "
                "slurmctld is up (`sinfo`) and try again"
            ) from None
        raise RuntimeFailure(
            f"gh-run cannot confirm which cluster the SLURM controller "
            f"{reached(transport, clusters)} is ({exc}) and sent nothing; check that the SLURM "
            "clients work there (`scontrol show config`)"
        ) from None
    expected = cluster.slurm.cluster_name
    # the controller's answer is text from elsewhere: shown with its control characters escaped
    actual = plain(facts.cluster_name)
    if expected is None:
        raise UserError(
            f"{src}: slurm.cluster_name: not set, so gh-run cannot confirm that the SLURM "
            f"controller {reached(transport, clusters)}, which is cluster '{actual}', is the "
            f"cluster this file describes, and sent nothing; if it is, add `slurm: "
            f"{{cluster_name: {actual}}}` to {src} (`gh-run partitions import` writes it), "
            f"else use cluster {actual}'s own file"
        )
    if not same_name(facts.cluster_name, expected):
        raise UserError(
            f"{src}: slurm.cluster_name: this file describes SLURM cluster {expected!r}, but the "
            f"controller {reached(transport, clusters)} is cluster '{actual}'; nothing was "
            f"sent: use cluster {actual}'s own file, or run gh-run where {expected}'s SLURM "
            "clients are (its login node, or SLURM_CONF pointing at its configuration)"
        )
    return facts


def check_run(run: Run, transport: Transport, doing: str) -> None:
    """Refuse to act on a run through a controller that is not the cluster it was submitted to
    (its job id there would be another job). Runs recorded before gh-run kept the name are
    taken as they are."""
    if not run.slurm_cluster:
        return
    try:
        facts = controller_facts(transport, run.clusters_option)
    except RuntimeFailure as exc:
        if type(exc) is not RuntimeFailure:
            raise
        raise RuntimeFailure(
            f"gh-run cannot confirm that the SLURM controller "
            f"{reached(transport, run.clusters_option)} is cluster {run.slurm_cluster}, where "
            f"run {run.run_id} was submitted ({exc}); {doing}: try again once `sinfo` answers"
        ) from None
    if not same_name(facts.cluster_name, run.slurm_cluster):
        theirs = plain(run.slurm_cluster)
        raise UserError(
            f"run {run.run_id} was submitted to SLURM cluster '{theirs}', but the "
            f"controller {reached(transport, run.clusters_option)} is cluster "
            f"'{plain(facts.cluster_name)}', where job {run.job_id or '?'} is another job; "
            f"{doing}: run gh-run where {theirs}'s SLURM clients are (its login node, or "
            "SLURM_CONF pointing at its configuration)"
        )


def same_cluster(run: Run, transport: Transport) -> str | None:
    """Why the run's state must not be asked of the controller reached now (it is another
    cluster), in words; None when it may be: the recorded cluster answers, nothing was
    recorded, or the controller does not answer (accounting may still: tracking falls back
    as it always did)."""
    try:
        check_run(run, transport, "its state was not refreshed")
    except UserError as exc:
        return exc.message
    except RuntimeFailure as exc:
        if type(exc) is not RuntimeFailure:
            raise
    return None
