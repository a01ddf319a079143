"""One transport per destination per process (so one shared SSH connection per login node),
chosen by the cluster file and remembered by each run (its row's `transport`).

The SSH side (the cluster model, Pydantic, the OpenSSH transport) is imported only when a
cluster or a run is remote: `gh-run status` and `logs` of local runs come through here and
must not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL

if TYPE_CHECKING:
    from orchestrator.site.cluster import Cluster
    from orchestrator.store.db import Run
    from orchestrator.transport.login import SshLogin
    from orchestrator.transport.ssh import SshTransport

_SSH: dict[str, SshTransport] = {}


def for_login(login: SshLogin) -> SshTransport:
    from orchestrator.transport.ssh import SshTransport

    transport = _SSH.get(login.key)
    if transport is None:
        transport = _SSH[login.key] = SshTransport(login)
    return transport


def for_cluster(cluster: Cluster) -> Transport:
    if cluster.transport == "local":
        return LOCAL
    from orchestrator.transport.login import resolve_login

    return for_login(resolve_login(cluster))


def for_descriptor(descriptor: str | None) -> Transport:
    """The transport a run (or a schedule) recorded: None is this machine."""
    if not descriptor:
        return LOCAL
    from orchestrator.transport.login import SshLogin

    return for_login(SshLogin.model_validate_json(descriptor))


def for_run(run: Run) -> Transport:
    """The transport the run recorded, only for a run of this user's in this home: the SSH
    settings of a row (its options may name programs OpenSSH runs, e.g. ProxyCommand) are
    used only when the row's seal is the user's own (row_seal.py)."""
    if run.transport and run.unbound is not None:
        from orchestrator.core.errors import UserError
        from orchestrator.store.row_seal import refusal

        raise UserError(refusal(run.run_id, run.unbound, "no connection was made for it"))
    return for_descriptor(run.transport)


def descriptor(transport: Transport) -> str | None:
    """What a run records of its transport: the resolved SSH login, or None (this machine)."""
    if not transport.remote:
        return None
    from orchestrator.transport.ssh import SshTransport

    assert isinstance(transport, SshTransport)
    return transport.login.model_dump_json()
