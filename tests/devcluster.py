"""Helpers for tests that use the real local SLURM dev cluster (``scripts/devcluster.sh``).

The cluster is shared by all integration tests: ``ensure_up()`` starts it or reuses it
(a healthy cluster answers in about a second), ``slurm_env()`` is the environment in which
``sbatch``/``sacct``/``srun``/submitit find it, and ``stop()``/``start()`` inject faults
("slurmctld stopped") and repair them. See docs/devcluster.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal, get_args

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
SCRIPT: Final = REPO_ROOT / "scripts" / "devcluster.sh"
# Where `up` links /etc/slurm/slurm.conf (scripts/devcluster.sh, docs/devcluster.md).
ETC_LINK: Final = Path("/etc/slurm/slurm.conf")


def _controller_runs(state: Path) -> bool:
    """Whether the slurmctld that `devcluster.sh` started for state folder `state` runs (its
    pid file names a live process whose command line names that folder's slurm.conf)."""
    try:
        pid = int((state / "pids" / "slurmctld.pid").read_text().strip())
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError):
        return False
    return "slurmctld" in cmd and str(state / "etc" / "slurm.conf") in cmd


def find_state_dir(environ: dict[str, str] | os._Environ[str] = os.environ) -> tuple[Path, str]:
    """The dev cluster's state folder, and why it is that one. The ports are fixed, so a machine
    runs one dev cluster; a checkout uses, in order: the folder GH_RUN_DEVCLUSTER_DIR names;
    its own `.devcluster` when that cluster runs; the running cluster that
    /etc/slurm/slurm.conf links to (another checkout's, which `up` linked there), shared as if
    GH_RUN_DEVCLUSTER_DIR named it; else its own `.devcluster`, which `up` then starts."""
    named = environ.get("GH_RUN_DEVCLUSTER_DIR")
    if named:
        return Path(named), "GH_RUN_DEVCLUSTER_DIR"
    own = REPO_ROOT / ".devcluster"
    if _controller_runs(own):
        return own, "this checkout's"
    if ETC_LINK.is_symlink():
        target = Path(os.readlink(ETC_LINK))
        if target.name == "slurm.conf" and target.parent.name == "etc":
            other = target.parent.parent
            if other != own and (other / "root").is_file() and _controller_runs(other):
                return other, f"found running through {ETC_LINK} -> {target}"
    return own, "this checkout's"


# One cluster shared by several checkouts (find_state_dir; docs/devcluster.md).
STATE_DIR, STATE_FROM = find_state_dir()
# A folder not this checkout's own is shared: the script is told so (it then never discards
# it as another checkout's, and `down`/`stop` act on that cluster).
SHARED: Final = STATE_DIR != REPO_ROOT / ".devcluster"
SLURM_CONF: Final = STATE_DIR / "etc" / "slurm.conf"
LOG_DIR: Final = STATE_DIR / "log"

# Facts of the dev cluster (keep in sync with scripts/devcluster.sh and clusters/dev.yaml).
CLUSTER_NAME: Final = "ghdev"
PARTITION: Final = "gh"
NODES: Final = ("gh1", "gh2")
GPUS_PER_NODE: Final = 1
GPU_TYPE: Final = "gh200"
CPUS_PER_NODE: Final = 2
MEMORY_MB_PER_NODE: Final = 4000

# The login node (clusters/dev-ssh.yaml): sshd on loopback, its keys and scratch in STATE_DIR.
SSH_PORT: Final = 16822
SSH_DIR: Final = STATE_DIR / "ssh"
SSH_KEY: Final = SSH_DIR / "id_ed25519"
SSH_KNOWN_HOSTS: Final = SSH_DIR / "known_hosts"
SCRATCH: Final = STATE_DIR / "scratch"
SSHD_LOG: Final = LOG_DIR / "sshd.log"

Daemon = Literal["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-gh1", "slurmd-gh2", "sshd"]
DAEMONS: Final[tuple[str, ...]] = get_args(Daemon)

_UP_TIMEOUT_S: Final = 900  # includes apt-get install on a fresh machine
_DAEMON_TIMEOUT_S: Final = 180


class DevClusterError(RuntimeError):
    """The dev cluster could not be started, stopped or reached; the message has the log tail."""


def _run(args: list[str], timeout: float, what: str) -> str:
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT), *args],
            cwd=REPO_ROOT,
            env=slurm_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise DevClusterError(
            f"{what}: scripts/devcluster.sh {' '.join(args)} did not finish in {timeout:.0f} s"
            f"{_tail_logs()}"
        ) from exc
    output = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-40:])
        raise DevClusterError(
            f"{what}: scripts/devcluster.sh {' '.join(args)} failed with exit code "
            f"{proc.returncode}:\n{tail}"
        )
    return output


def _tail_logs(lines: int = 15) -> str:
    parts: list[str] = []
    for name in ("slurmctld.log", "slurmdbd.log", "slurmd-gh1.log", "slurmd-gh2.log"):
        path = LOG_DIR / name
        if path.is_file():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"\n--- {path} ---\n" + "\n".join(text))
    return "".join(parts)


def slurm_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` (or ``base``) plus ``SLURM_CONF`` pointing at the dev cluster (and, for a
    shared one, ``GH_RUN_DEVCLUSTER_DIR`` naming it, for scripts/devcluster.sh)."""
    env = dict(os.environ if base is None else base)
    env["SLURM_CONF"] = str(SLURM_CONF)
    if SHARED:
        env["GH_RUN_DEVCLUSTER_DIR"] = str(STATE_DIR)
    return env


def ensure_up() -> None:
    """Start the dev cluster, or reuse it when healthy; raise DevClusterError with log tails."""
    _run(["up"], _UP_TIMEOUT_S, "starting the dev cluster")


# The node states in which a node takes jobs (sinfo's short names; a `*` suffix, "not
# responding", and down/drain/fail are not among them).
_SERVING: Final = frozenset({"idle", "mix", "alloc", "comp"})


def healthy() -> bool:
    """Whether every daemon of the dev cluster runs and every node takes jobs: what `up` would
    find and leave as it is (it then only reuses the cluster). Read-only: `devcluster.sh status`
    starts, stops and writes nothing, so a test may ask while other tests use the cluster."""
    try:
        proc = _status_run()
    except subprocess.TimeoutExpired:
        return False
    if proc.returncode != 0:
        return False
    states = {
        line.split()[0]: line.split()[2]
        for line in proc.stdout.splitlines()
        if len(line.split()) >= 3 and line.split()[0] in NODES
    }
    return set(states) == set(NODES) and all(s in _SERVING for s in states.values())


def down() -> None:
    """Stop every daemon the script started (state in .devcluster/ is kept)."""
    _run(["down"], _DAEMON_TIMEOUT_S, "stopping the dev cluster")


def _check_daemon(daemon: str) -> None:
    if daemon not in DAEMONS:
        raise ValueError(f"unknown dev-cluster daemon {daemon!r}; one of {', '.join(DAEMONS)}")


def stop(daemon: Daemon | str) -> None:
    """Stop one daemon (TERM, then KILL), e.g. ``stop("slurmctld")`` to inject a fault."""
    _check_daemon(daemon)
    _run(["stop", daemon], _DAEMON_TIMEOUT_S, f"stopping {daemon}")


def start(daemon: Daemon | str) -> None:
    """Start one daemon if it is not running and wait until it answers."""
    _check_daemon(daemon)
    _run(["start", daemon], _DAEMON_TIMEOUT_S, f"starting {daemon}")


def status() -> str:
    """The output of ``devcluster.sh status`` (which daemons run, and sinfo)."""
    proc = _status_run()
    return proc.stdout + proc.stderr


def _status_run() -> subprocess.CompletedProcess[str]:
    """``devcluster.sh status`` run read-only (60 s at most: TimeoutExpired past that)."""
    return subprocess.run(
        ["bash", str(SCRIPT), "status"],
        cwd=REPO_ROOT,
        env=slurm_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@contextlib.contextmanager
def paused(daemon: Daemon | str) -> Iterator[None]:
    """SIGSTOP one daemon of this cluster (a controller that accepts connections and does not
    answer yet), and SIGCONT it when the block ends, whatever happens in it."""
    _check_daemon(daemon)
    pid = int((STATE_DIR / "pids" / f"{daemon}.pid").read_text().strip())
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    if daemon.split("-")[0] not in cmdline or str(STATE_DIR) not in cmdline:
        raise DevClusterError(f"pid {pid} is not this cluster's {daemon} ({cmdline!r})")
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
