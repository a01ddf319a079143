"""Benchmark: gh-run over SSH (clusters/dev-ssh.yaml, the dev cluster's login node on loopback).

gh-run runs with only ssh, rsync and its own python on PATH (no SLURM client), so everything
goes through the real sshd of scripts/devcluster.sh. A wrapper named `ssh` first on that PATH
(in this benchmark only) logs each invocation and execs the real client; rsync's own ssh goes
through it too. Counted per command:

- connections: SSH connections opened (ControlMaster starts; goal 1 per gh-run process),
- sessions: remote commands and rsync copies sent over that connection, the round trips
  that cost a network latency each (goal: independent of the number of variants),
- wall time of the whole command (Python start-up included).

Measured: a single submit, 20- and 200-variant campaigns (`campaign run --hold`, two resource
groups: two job arrays), one poll of each (`campaign status`, one `status RUN`), and the same
single submit and 200-variant campaign through the local transport (clusters/dev.yaml, SLURM
clients on PATH) as the baseline of this very run. Held arrays are cancelled at the end.

Usage: .venv/bin/python bench/bench_ssh.py   (after `make cluster-up`)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_campaign import campaign_file, cli

REPO = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("GH_RUN_DEVCLUSTER_DIR") or REPO / ".devcluster")


def ssh_wrapper(bin_dir: Path, log: Path) -> None:
    real = shutil.which("ssh")
    if real is None:
        sys.exit("ssh not found: run `make cluster-up` (scripts/devcluster.sh installs it)")
    wrapper = bin_dir / "ssh"
    # One line per call (printf %q escapes the line breaks of inline scripts).
    wrapper.write_text(
        f'#!/bin/bash\n{{ printf "%q " "$@"; echo; }} >> "{log}"\nexec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    rsync = shutil.which("rsync")
    assert rsync, "rsync not found"
    (bin_dir / "rsync").symlink_to(rsync)


def classify(lines: list[str]) -> dict[str, int]:
    out = {"connections": 0, "commands": 0, "copies": 0, "control": 0}
    for line in lines:
        if " -O " in f" {line} " or " -G " in f" {line} ":
            out["control"] += 1
        elif "ControlMaster=yes" in line:
            out["connections"] += 1
        elif "rsync --server" in line:
            out["copies"] += 1
        else:
            out["commands"] += 1
    return out


class Bench:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.log = tmp / "ssh.log"
        self.bin = tmp / "bin"
        self.bin.mkdir()
        ssh_wrapper(self.bin, self.log)

    def cli(self, args: list[str], home: Path, remote: bool) -> tuple[dict[str, float], str]:
        before = self.log.read_text().splitlines() if self.log.exists() else []
        path = (
            f"{self.bin}:{Path(sys.executable).parent}"
            if remote
            else f"{Path(sys.executable).parent}:{os.environ['PATH']}"
        )
        env = {
            **{k: v for k, v in os.environ.items() if k != "PATH"},
            "PATH": path,
            "GH_RUN_HOME": str(home),
            "GH_RUN_DEVCLUSTER_DIR": str(STATE),
        }
        env.setdefault("SLURM_CONF", str(STATE / "etc" / "slurm.conf"))
        wall, stdout = cli(args, env)
        after = self.log.read_text().splitlines() if self.log.exists() else []
        counts = classify(after[len(before) :])
        row: dict[str, float] = {
            "connections": counts["connections"],
            "sessions": counts["commands"] + counts["copies"],
            "copies": counts["copies"],
            "wall_s": round(wall, 2),
        }
        return row, stdout


def remove_remote_folders(home: Path) -> None:
    """The run folders (and campaign files) this benchmark left on the login node's scratch."""
    with contextlib.closing(sqlite3.connect(home / "state.db")) as con, con:
        rows = con.execute("SELECT run_dir, campaign_id FROM runs WHERE transport IS NOT NULL")
        for run_dir, campaign_id in rows.fetchall():
            folder = Path(run_dir)
            if folder.is_relative_to(STATE / "scratch"):
                shutil.rmtree(folder, ignore_errors=True)
                if campaign_id:
                    shutil.rmtree(folder.parent / "_campaigns" / campaign_id, ignore_errors=True)


def main() -> None:
    # The dev cluster is shared: hold it as a pytest session does (no fault test meanwhile).
    STATE.mkdir(parents=True, exist_ok=True)
    with (STATE / "pytest.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {lock.name} (a test session holds the cluster)", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        measure()


def measure() -> None:
    rows: list[tuple[str, dict[str, float]]] = []
    held: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gh-run-bench-ssh-") as tmp_name:
        b = Bench(Path(tmp_name))
        home = b.tmp / "home"
        for cluster, remote in (("dev-ssh", True), ("dev", False)):
            label = "ssh" if remote else "local"
            row, out = b.cli(
                ["submit", "jobs/smoke.yaml", "--cluster", cluster, "-x", "slurm"], home, remote
            )
            rows.append((f"single submit ({label})", row))
            run_id = out.split()[1]
            row, _ = b.cli(["status", run_id], home, remote)
            rows.append((f"poll: status of 1 run ({label})", row))
            for n in (20, 200) if remote else (200,):
                camp = campaign_file(b.tmp, n, cluster)
                row, out = b.cli(["campaign", "run", str(camp), "--hold"], home, remote)
                m = re.search(r"campaign (\S+): (\d+) variants in (\d+) submissions", out)
                assert m, out
                rows.append((f"{n}-variant campaign, {m.group(3)} arrays ({label})", row))
                row, out = b.cli(["campaign", "status", m.group(1)], home, remote)
                rows.append((f"poll: campaign status of {n} runs ({label})", row))
                held += re.findall(r"ghr-\S+=(\d+)", out)
        env = {**os.environ, "SLURM_CONF": str(STATE / "etc" / "slurm.conf")}
        subprocess.run(["scancel", *held], env=env, check=False)
        remove_remote_folders(home)
    # What one round trip costs here: a remote `true` over the shared connection (the login
    # shell's start-up included, as for every remote command).
    os.environ["GH_RUN_DEVCLUSTER_DIR"] = str(STATE)
    sys.path.insert(0, str(REPO))
    from orchestrator.site.cluster import load_cluster
    from orchestrator.transport import registry

    transport = registry.for_cluster(load_cluster(str(REPO / "clusters" / "dev-ssh.yaml")))
    t0 = time.perf_counter()
    transport.run(["true"])  # connects
    connect = time.perf_counter() - t0
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        transport.run(["true"])
        times.append(time.perf_counter() - t0)
    transport.close()
    session = sorted(times)[len(times) // 2]
    base = dict(rows)
    print("| what | connections | sessions (round trips) | rsync copies | wall s | vs local |")
    print("|---|---|---|---|---|---|")
    for name, row in rows:
        twin = name.replace("(ssh)", "(local)")
        ratio = ""
        if "(ssh)" in name and twin in base and base[twin]["wall_s"]:
            ratio = f"{row['wall_s'] / base[twin]['wall_s']:.2f}x"
        print(
            f"| {name} | {row['connections']:.0f} | {row['sessions']:.0f} | "
            f"{row['copies']:.0f} | {row['wall_s']:.2f} | {ratio} |"
        )
    print(
        f"\none SSH connection: {connect:.3f} s (with its first command); one session over it "
        f"(a remote `true`, median of 10): {session:.3f} s"
    )


if __name__ == "__main__":
    main()
