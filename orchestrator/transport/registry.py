"""One transport per destination per process (so one shared SSH connection per login node),
chosen by the cluster file and remembered by each run (its row's `transport`)."""

from __future__ import annotations

from orchestrator.cluster import Cluster
from orchestrator.store import Run
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL
from orchestrator.transport.login import SshLogin, resolve_login
from orchestrator.transport.ssh import SshTransport

_SSH: dict[str, SshTransport] = {}


def for_login(login: SshLogin) -> SshTransport:
    transport = _SSH.get(login.key)
    if transport is None:
        transport = _SSH[login.key] = SshTransport(login)
    return transport


def for_cluster(cluster: Cluster) -> Transport:
    return LOCAL if cluster.transport == "local" else for_login(resolve_login(cluster))


def for_descriptor(descriptor: str | None) -> Transport:
    """The transport a run (or a schedule) recorded: None is this machine."""
    return LOCAL if not descriptor else for_login(SshLogin.model_validate_json(descriptor))


def for_run(run: Run) -> Transport:
    return for_descriptor(run.transport)


def descriptor(transport: Transport) -> str | None:
    """What a run records of its transport: the resolved SSH login, or None (this machine)."""
    return transport.login.model_dump_json() if isinstance(transport, SshTransport) else None
