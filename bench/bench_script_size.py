"""Benchmark: the rendered job script's size and render time as the job grows.

jobs/sft.yaml on a fictional site of 4-GH200 nodes (bench/clusters/gh200-quad.yaml: 4 ranks per
node, one per GPU, system-wide event sampling as in the seed) at 1, 8, 32, 128 and 512 nodes:
bytes and lines of the script `gh-run render` prints, and the time of `render.render_job` (the
median of 5, in this process: what `render` adds to Python's start-up). Goals: <= 40 KB and
<= 0.5 s at every size. Before issue 40 the script grew with the job (one post-processing block
per report: 20 KB at 1 node, 357 KB at 32, 1.4 MB at 128).

Usage: .venv/bin/python bench/bench_script_size.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.render.scripts import render_job  # noqa: E402
from orchestrator.site.cluster import load_cluster  # noqa: E402
from orchestrator.spec.job import JobSpec  # noqa: E402
from orchestrator.spec.yamlio import load_model  # noqa: E402

NODES = (1, 8, 32, 128, 512)
SCALE = [
    "cluster=gh200-quad",
    "partition=quad",
    "resources.ntasks_per_node=4",
    "resources.gpus_per_node=4",
    "resources.cpus_per_task=72",
]


def main() -> None:
    cluster = load_cluster(str(REPO / "bench" / "clusters" / "gh200-quad.yaml"))
    part = cluster.partitions["quad"]
    print(f"{'nodes':>6} {'ranks':>6} {'bytes':>8} {'lines':>6} {'render s':>9}")
    for n in NODES:
        spec = load_model(REPO / "jobs" / "sft.yaml", JobSpec, [*SCALE, f"resources.nodes={n}"])
        times, script = [], ""
        for _ in range(5):
            t0 = time.perf_counter()
            script = render_job(spec, cluster, "quad", part, "bench", "/scratch/runs/bench").script
            times.append(time.perf_counter() - t0)
        print(
            f"{n:>6} {4 * n:>6} {len(script.encode()):>8} {script.count(chr(10)):>6} "
            f"{statistics.median(times):>9.4f}"
        )


if __name__ == "__main__":
    main()
