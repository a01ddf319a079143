"""gh-run as it runs on a laptop: the dev cluster reached only through its login node.

`Laptop.cli(...)` runs the real CLI in a subprocess whose PATH holds ssh, rsync and this venv's
python and none of the SLURM clients (checked: `sbatch` and friends are not reachable, so
nothing silently falls back to a local SLURM), in a mount namespace of its own where the
cluster's scratch file system (the run folders) is hidden behind an empty read-only tmpfs: a
file that reached gh-run came through sshd. The sshd of the dev cluster is real
(scripts/devcluster.sh); `connections()` counts the SSH connections it accepted, from its log.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests import devcluster
from tests.conftest import REPO, CliResult

SLURM_CLIENTS = ("sbatch", "sacct", "squeue", "scontrol", "scancel", "sinfo", "srun", "crontab")
DEV_SSH = REPO / "clusters" / "dev-ssh.yaml"
# The one shell gh-run's subprocess starts in: it hides the scratch and execs gh-run.
_HIDE = '"$1" -t tmpfs -o ro,size=4k gh-run-laptop "$2" && shift 2 && exec "$@"'


@dataclass
class Laptop:
    home: Path
    bin_dir: Path

    @property
    def path(self) -> str:
        return f"{self.bin_dir}:{Path(sys.executable).parent}"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PATH"))}
        return {
            **keep,
            "PATH": self.path,
            "GH_RUN_HOME": str(self.home),
            "GH_RUN_DEVCLUSTER_DIR": str(devcluster.STATE_DIR),
            "COLUMNS": "200",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
            **(extra or {}),
        }

    def argv(self, args: list[str]) -> list[str]:
        unshare = shutil.which("unshare")
        assert unshare, "unshare (util-linux) is needed to hide the cluster's files"
        return [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _HIDE,
            "sh",
            shutil.which("mount") or "/bin/mount",
            str(devcluster.SCRATCH),
            sys.executable,
            "-m",
            "orchestrator",
            *args,
        ]

    def cli(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path = REPO
    ) -> CliResult:
        res = subprocess.run(
            self.argv(list(args)),
            cwd=cwd,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return CliResult(res.returncode, res.stdout, res.stderr)

    def popen(self, *args: str, cwd: Path = REPO) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(list(args)),
            cwd=cwd,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def make_laptop(tmp: Path) -> Laptop:
    bin_dir = tmp / "laptop-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("ssh", "rsync"):
        found = shutil.which(tool)
        assert found, f"{tool} is not installed (scripts/devcluster.sh installs it)"
        link = bin_dir / tool
        if not link.exists():
            link.symlink_to(found)
    laptop = Laptop(tmp / "laptop-home", bin_dir)
    reachable = [p for p in SLURM_CLIENTS if shutil.which(p, path=laptop.path)]
    assert reachable == [], f"{reachable} reachable from the laptop's PATH {laptop.path}"
    return laptop


def cluster_file(tmp: Path, name: str, **changes: object) -> Path:
    """A copy of clusters/dev-ssh.yaml named `name`, with `ssh.X` / top-level keys changed
    (state-folder paths made absolute, since the copy lives elsewhere)."""
    text = DEV_SSH.read_text().replace(
        "${GH_RUN_DEVCLUSTER_DIR:-../.devcluster}", str(devcluster.STATE_DIR)
    )
    doc = yaml.safe_load(text)
    doc["name"] = name
    for key, value in changes.items():
        if key.startswith("ssh_"):
            doc["ssh"][key.removeprefix("ssh_")] = value
        elif key == "known_hosts":
            doc["ssh"]["options"]["UserKnownHostsFile"] = str(value)
        elif key == "runs":
            doc["paths"]["runs"] = value
        else:
            doc[key] = value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def connections() -> int:
    """Connections the dev cluster's sshd accepted so far (its log, LogLevel VERBOSE)."""
    if not devcluster.SSHD_LOG.is_file():
        return 0
    return len(re.findall(r"Accepted publickey for ", devcluster.SSHD_LOG.read_text()))


def jobs_named(name: str, settle_s: float = 30.0) -> list[str]:
    """Job ids SLURM (the test's own view, not gh-run's) holds under this name, asked of the
    controller and of accounting.

    slurmdbd records a job some seconds after the controller ends it, and the controller forgets
    it after MinJobAge: a job that has just ended may be in neither for a moment, so ask again
    for up to `settle_s` until one shows (an empty answer after that is the answer)."""
    deadline = time.monotonic() + settle_s
    while True:
        ids: set[str] = set()
        for argv in (
            # the controller keeps an ended job for MinJobAge; accounting has it a little later
            ["squeue", "-h", "--states=all", "-o", "%i", "--name", name],
            ["sacct", "-n", "-X", "-P", "-o", "JobID", "--name", name, "-S", "now-1hours"],
        ):
            res = subprocess.run(
                argv, env=devcluster.slurm_env(), capture_output=True, text=True, check=True
            )
            ids |= {j for j in res.stdout.split() if j}
        if ids or time.monotonic() >= deadline:
            return sorted(ids)
        time.sleep(1)


def runs_of(laptop: Laptop) -> list[dict[str, object]]:
    """The rows of the laptop's `runs` table, read without gh-run; none before the store's file,
    or its tables, exist (a store caught between the two holds no runs yet)."""
    db = laptop.home / "state.db"
    if not db.is_file():
        return []
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone():
            return []
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute("SELECT * FROM runs")]


def remove_remote_runs(laptop: Laptop) -> None:
    """Remove the run folders a test's gh-run made on the cluster side (the shared scratch)."""
    dirs = [Path(str(r["run_dir"])) for r in runs_of(laptop) if r["transport"] is not None]
    for folder in dirs:
        if folder.is_relative_to(devcluster.SCRATCH):
            shutil.rmtree(folder, ignore_errors=True)


def run_id_of(res: CliResult) -> str:
    """The run id `gh-run submit` printed."""
    for line in res.out.splitlines():
        if line.startswith("submitted "):
            return line.split()[1]
    raise AssertionError(f"no run id in {res.text}")
