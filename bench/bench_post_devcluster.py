"""Benchmark: the post-processing wall time of a profiled job of 2 nodes x 4 ranks on the REAL
dev cluster, this checkout's scripts against REV's (default main), in one allocation.

What runs is what gh-run renders: the job's post-processing commands (nsys_post.sh, and REV's
analysis_post.sh step where it has one), with the real nsys export and stats, the real in-job
analysis (gh-run analyze --write-records) and the real SLURM (srun steps inside the
allocation). The stand-ins: the 8 reports are copies of one real report recorded here by the
real nsys (a Python workload under `--trace=osrt`), named as the 8 ranks' reports would be; and
the dev cluster's two nodes are two slurmd on this one machine, so they share its cores (work
spread over the nodes runs on the same CPUs; on real nodes each has its own).

Each variant runs ROUNDS times, alternating (REV, this, REV, this, ...) so that both see the
same load; the outputs (exports, CSVs, records) are removed before each run. Printed: each
run's wall time and exit status, the medians, and this checkout's median as a ratio of REV's.

Usage: GH_RUN_DEVCLUSTER_DIR=/work/devcluster .venv/bin/python bench/bench_post_devcluster.py \
           [--baseline main] [--rounds 2]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import devcluster  # noqa: E402
from tests.unit.test_render import extract_files  # noqa: E402

NODES, TASKS = 2, 4
NSYS = "/opt/gh-run/bin/nsys"  # 2023.4, as the dev cluster file declares
JOB = {
    "name": "post",
    "resources": {"nodes": NODES, "ntasks_per_node": TASKS, "cpus_per_task": 1, "time": "00:30:00"},
    "profile": {
        "tool": "nsys",
        "trace": ["osrt"],
        "sample": "none",
        "cpuctxsw": "none",
        "reports": ["osrt_sum"],
        "nsys_version": "2023.4",
        "nsys_path": NSYS,
    },
    "workload": {"command": "true"},
}
# the stand-in's workload: a little of everything osrt records
STANDIN = (
    "import os, time\n"
    "for i in range(200):\n"
    "    with open(os.devnull, 'w') as f: f.write('x' * 4096)\n"
    "    time.sleep(0.005)\n"
    "sum(i * i for i in range(3_000_000))\n"
)
RENDER = """
import json, sys
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster
from orchestrator.spec.job import JobSpec
job, run_dir = json.loads(sys.argv[1]), sys.argv[2]
cluster = load_cluster("dev")
part = cluster.partitions["gh"]
spec = JobSpec.model_validate(job)
print(render_job(spec, cluster, "gh", part, "bench-post", run_dir, "srun").script, end="")
"""


def _render(src: Path, run_dir: Path) -> str:
    """The job script as the gh-run of `src` renders it (its own process, its own code; the
    checks of the partition are left out: the dev nodes have 2 cores, the job 4 ranks each)."""
    done = subprocess.run(
        [sys.executable, "-c", RENDER, json.dumps(JOB), str(run_dir)],
        capture_output=True,
        text=True,
        cwd=src,
        env={**os.environ, "PYTHONPATH": str(src)},
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"rendering with {src} failed:\n{done.stderr}")
    return done.stdout


def _checkout(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True
    ).stdout
    (into / "rev.tar").write_bytes(archive)
    src = into / "src"
    with tarfile.open(into / "rev.tar") as tar:
        tar.extractall(src, filter="data")
    # the package data as the build maps it (orchestrator.templates is templates/)
    (src / "orchestrator" / "templates").symlink_to(src / "templates")
    return src


def _prepare(script: str, run_dir: Path, standin: Path) -> list[str]:
    """The run folder as the job leaves it before post-processing: its embedded files and the 8
    ranks' reports; returns the post-processing commands of the script."""
    (run_dir / "artifacts").mkdir(parents=True)
    for name, content in extract_files(script).items():
        (run_dir / name).write_text(content)
    for rank in range(NODES * TASKS):
        shutil.copyfile(standin, run_dir / "artifacts" / f"post.{rank}.nsys-rep")
    post = script.split("ghr_post_status=0", 1)[1]
    return re.findall(r"^(bash \S+\.sh) \|\| ghr_post_status", post, re.M)


def _record_standin(work: Path) -> Path:
    out = work / "standin"
    subprocess.run(
        [NSYS, "profile", "--trace=osrt", "--sample=none", "--cpuctxsw=none",
         f"--output={out}", "--force-overwrite=true", sys.executable, "-c", STANDIN],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return out.with_suffix(".nsys-rep")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="main", metavar="REV")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    devcluster.STATE_DIR.mkdir(parents=True, exist_ok=True)
    lock = (devcluster.STATE_DIR / "pytest.lock").open("a")  # take turns with pytest sessions
    fcntl.flock(lock, fcntl.LOCK_EX)
    devcluster.ensure_up()
    devcluster.SCRATCH.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-post-", dir=devcluster.SCRATCH))
    try:
        standin = _record_standin(work)
        variants = {args.baseline: _checkout(args.baseline, work), "this": REPO}
        posts = {}
        for name, src in variants.items():
            run_dir = work / f"run-{name}"
            posts[name] = (run_dir, _prepare(_render(src, run_dir), run_dir, standin))
        lines = [
            "#!/bin/bash",
            # the job's 8 ranks on nodes of 2 cores: overcommitted (SLURM places 8 tasks on 2
            # nodes only as --ntasks with --overcommit; the steps say their own layout)
            f"#SBATCH --partition=gh --nodes={NODES} --ntasks={NODES * TASKS} --overcommit",
            "#SBATCH --time=01:00:00",
            f"#SBATCH --output={work}/bench.out",
            f'export PATH="{Path(NSYS).parent}:{Path(sys.executable).parent}:$PATH"',
        ]
        for i in range(args.rounds):
            for name, (run_dir, cmds) in posts.items():
                lines += [
                    f"find {run_dir}/artifacts -type f ! -name '*.nsys-rep' -delete",
                    "t0=$(date +%s.%N); rc=0",
                    *(f"{c} >>{run_dir}/post.log 2>&1 || rc=$?" for c in cmds),
                    f'echo "RUN {name} {i} $(awk "BEGIN {{ print $(date +%s.%N) - $t0 }}") $rc"',
                ]
        (work / "bench.sbatch").write_text("\n".join(lines) + "\n")
        done = subprocess.run(
            ["sbatch", "--wait", str(work / "bench.sbatch")],
            env=devcluster.slurm_env(),
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"sbatch --wait failed ({done.returncode}): {done.stderr}")
        out = (work / "bench.out").read_text()
        runs: dict[str, list[float]] = {n: [] for n in posts}
        print(f"{'variant':>8} {'round':>5} {'wall s':>8} {'exit':>4}")
        for name, i, wall, rc in re.findall(r"^RUN (\S+) (\d+) (\S+) (\d+)$", out, re.M):
            print(f"{name:>8} {i:>5} {float(wall):>8.1f} {rc:>4}")
            runs[name].append(float(wall))
        for name, (run_dir, cmds) in posts.items():
            made = sorted(p.name for p in (run_dir / "artifacts").iterdir())
            records = sum(n.endswith(".gh-run.json") for n in made)
            csvs = sum(n.endswith(".csv") for n in made)
            sqlite = sum(n.endswith(".sqlite") for n in made)
            print(
                f"{name}: median {statistics.median(runs[name]):.1f} s; post commands "
                f"{len(cmds)}; last run left {sqlite} exports, {csvs} CSVs, {records} records"
            )
        base = statistics.median(runs[args.baseline])
        print(f"this / {args.baseline}: {statistics.median(runs['this']) / base:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        lock.close()


if __name__ == "__main__":
    main()
