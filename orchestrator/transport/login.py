"""A cluster file's `login:` and `ssh:` made concrete: the destination and every local path
resolved, so that a run remembers how its cluster is reached (the `transport` of its row)
whatever the working directory or environment of a later gh-run."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import Field

from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.site.cluster import LOGIN_RE, Cluster
from orchestrator.spec.yamlio import display_path

# ${VAR:-default} (what os.path.expandvars lacks), then $VAR / ${VAR}.
_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}")
# ssh options whose values are local files.
_FILE_OPTIONS = ("userknownhostsfile", "globalknownhostsfile", "identityfile", "certificatefile")


class SshLogin(Strict):
    """Everything the SSH transport needs, with local paths absolute."""

    source: str = Field(description="The cluster file, as messages name it.")
    cluster: str
    user: str | None
    host: str
    port: int | None
    identity: str | None = None
    config: str | None = None
    options: dict[str, str] = Field(default_factory=dict)
    rsync_options: list[str] = Field(default_factory=list)
    gh_run: list[str] = Field(default_factory=lambda: ["gh-run"])
    persist_s: int = 60
    connect_timeout_s: int = 10

    @property
    def destination(self) -> str:
        """user@host:port as a person writes it."""
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port else "")

    @property
    def key(self) -> str:
        return self.model_dump_json(exclude={"source"})


def expand_local(text: str, base: Path, where: str) -> str:
    """`~`, `$VAR` and `${VAR:-default}` expanded here; relative to `base` when relative."""
    out = _DEFAULTED.sub(lambda m: os.environ.get(m.group(1)) or m.group(2), text)
    out = os.path.expandvars(out)
    if "$" in out:
        unset = ", ".join(sorted(set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", out))))
        raise UserError(
            f"{where}: {text!r} uses ${unset}, which is not set here; set it or write the path"
        )
    path = Path(out).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def resolve_login(cluster: Cluster) -> SshLogin:
    """The cluster's SSH login with local paths resolved; the key file must exist."""
    src = display_path(Path(cluster.source)) if cluster.source else cluster.name
    base = Path(cluster.source).parent if cluster.source else Path.cwd()
    m = LOGIN_RE.match(cluster.login or "")
    assert m is not None  # the Cluster model checked it
    ssh = cluster.ssh_settings
    identity = expand_local(ssh.identity, base, f"{src}: ssh.identity") if ssh.identity else None
    if identity is not None and not os.access(identity, os.R_OK):
        raise UserError(
            f"{src}: ssh.identity: the key file {identity} does not exist or cannot be read; "
            "point ssh.identity at your private key (e.g. ~/.ssh/id_ed25519)"
        )
    config = expand_local(ssh.config, base, f"{src}: ssh.config") if ssh.config else None
    if config is not None and not os.path.isfile(config):
        raise UserError(
            f"{src}: ssh.config: {config} does not exist; point it at an ssh_config file or "
            "remove it (then ~/.ssh/config applies)"
        )
    options = {
        key: (
            " ".join(expand_local(p, base, f"{src}: ssh.options.{key}") for p in value.split())
            if key.lower() in _FILE_OPTIONS
            else value
        )
        for key, value in ssh.options.items()
    }
    return SshLogin(
        source=src,
        cluster=cluster.name,
        user=m.group("user"),
        host=m.group("host"),
        port=int(m.group("port")) if m.group("port") else None,
        identity=identity,
        config=config,
        options=options,
        rsync_options=list(ssh.rsync_options),
        gh_run=list(ssh.gh_run),
        persist_s=ssh.persist_s,
        connect_timeout_s=ssh.connect_timeout_s,
    )
