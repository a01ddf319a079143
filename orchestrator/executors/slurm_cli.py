"""Running a SLURM client (sbatch, squeue, sacct, scontrol, scancel, sinfo) where the clients
are: this machine, or the login node through the cluster's transport, addressed to a cluster
(`--clusters`) when the cluster file asks for it. Below the executor (`slurm.py`), its watcher
(`slurm_watch.py`) and the controller's identity (`cluster_identity.py`), which all run them.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence

from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL

SLURM_TIMEOUT_S = 30.0
# sbatch's words for "the controller is not there", as opposed to "the controller said no".
UNREACHABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Zero Bytes were transmitted|Communication connection failure",
    re.IGNORECASE,
)


# The SLURM clients that take --clusters (-M): every one gh-run runs but sacctmgr.
TAKES_CLUSTERS = frozenset({"sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo"})


def with_clusters(argv: Sequence[str], clusters: str | None) -> list[str]:
    """argv with `--clusters=NAME` right after the program (where options go for all of them:
    `scontrol --clusters=x show config`, `sbatch --clusters=x ... script`)."""
    if not clusters or not argv or argv[0] not in TAKES_CLUSTERS:
        return list(argv)
    return [argv[0], f"--clusters={clusters}", *argv[1:]]


def run_slurm(
    argv: Sequence[str],
    timeout: float = SLURM_TIMEOUT_S,
    stdin: str | None = None,
    transport: Transport | None = None,
    env: Mapping[str, str] | None = None,
    clusters: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a SLURM client command where the clients are (this machine unless a transport is
    given), addressed to `clusters` (--clusters) when the cluster file asks for it; a missing
    client, or a cluster that cannot be reached, is a clear runtime failure."""
    return (transport or LOCAL).run(
        with_clusters(argv, clusters), timeout=timeout, stdin=stdin, env=env
    )
