"""Benchmark: campaign submission at scale on the dev cluster (scripts/devcluster.sh up).

For 200 and 1,000 variants of a tiny job (`true`), split over two resource groups (two memory
sizes), `gh-run campaign run --hold` plans and submits them; then three `campaign status`
calls each poll once. Counting wrappers for sbatch/sacct/squeue/scontrol sit first on PATH
(in this benchmark only; each one logs a line and execs the real client). Measured:

- sbatch calls (goal: = number of array groups),
- sacct calls per poll (goal: 1) and squeue/scontrol fallback calls,
- time from `campaign run` to all submitted, as gh-run reports it (plan + render + store +
  sbatch) and as wall time of the whole command (Python start-up included). Goal: < 10 s.

The held arrays are cancelled at the end. Usage: .venv/bin/python bench/bench_campaign.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CLIENTS = ("sbatch", "sacct", "squeue", "scontrol")


def wrappers(bin_dir: Path, log: Path) -> None:
    for name in CLIENTS:
        real = shutil.which(name)
        if real is None:
            sys.exit(f"{name} not found: start the dev cluster (scripts/devcluster.sh up)")
        w = bin_dir / name
        w.write_text(f'#!/bin/bash\necho {name} >> "{log}"\nexec "{real}" "$@"\n')
        w.chmod(0o755)


def counts(log: Path) -> dict[str, int]:
    lines = log.read_text().split() if log.exists() else []
    return {n: lines.count(n) for n in CLIENTS}


def cli(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"gh-run {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return took, res.stdout


def campaign_file(tmp: Path, n: int, cluster: str = "dev") -> Path:
    """n variants of a tiny job (`true`) on `cluster`, in two resource groups (two arrays)."""
    job = tmp / f"tiny-{cluster}.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "cluster": cluster,
                "resources": {"cpus_per_task": 1, "mem": "50M", "time": "00:01:00"},
                "workload": {"command": "true"},
                "artifacts": [],
            }
        )
    )
    camp = tmp / f"bench{n}-{cluster}.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": f"bench{n}",
                "job": str(job),
                "executor": "slurm",
                "matrix": {
                    "mem": {"m50": [], "m60": ["resources.mem=60M"]},
                    "i": {str(i): [f"workload.env.I={i}"] for i in range(n // 2)},
                },
                "variant_name": "{mem}-{i}",
                "max_parallel": 4,
            }
        )
    )
    return camp


def bench(n: int, tmp: Path) -> dict[str, object]:
    home = tmp / f"home{n}"
    camp = campaign_file(tmp, n)
    bin_dir = tmp / f"bin{n}"
    bin_dir.mkdir()
    log = tmp / f"calls{n}.log"
    wrappers(bin_dir, log)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GH_RUN_HOME": str(home)}
    env.setdefault("SLURM_CONF", str(REPO / ".devcluster" / "etc" / "slurm.conf"))
    wall, out = cli(["campaign", "run", str(camp), "--hold"], env)
    m = re.search(r"campaign (\S+): (\d+) variants in (\d+) submissions .* sent in ([\d.]+) s", out)
    assert m, out
    cid, variants, groups, sent = m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))
    after_submit = counts(log)
    polls = 3
    poll_times = []
    for _ in range(polls):
        t, _ = cli(["campaign", "status", cid], env)
        poll_times.append(t)
    after_polls = counts(log)
    ids = [
        line.split("=")[1].split()[0]
        for line in re.findall(r"ghr-\S+=\d+", cli(["campaign", "status", cid], env)[1])
    ]
    subprocess.run(["scancel", *ids], check=False)
    return {
        "variants": variants,
        "array groups": groups,
        "sbatch calls": after_submit["sbatch"],
        "scontrol calls at submit": after_submit["scontrol"],
        "sacct calls / poll": round((after_polls["sacct"] - after_submit["sacct"]) / polls, 2),
        # sacct learns of a new job a moment after sbatch (slurmdbd is asynchronous): a poll
        # right after submission falls back to one squeue; later polls do not.
        "squeue+scontrol fallback calls in 3 polls": (
            after_polls["squeue"]
            + after_polls["scontrol"]
            - after_submit["squeue"]
            - after_submit["scontrol"]
        ),
        "submit (gh-run, s)": sent,
        "campaign run wall (s)": round(wall, 2),
        "status wall per poll (s)": round(sum(poll_times) / polls, 2),
    }


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="gh-run-bench-") as tmp:
        for n in (200, 1000):
            rows.append(bench(n, Path(tmp)))
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
