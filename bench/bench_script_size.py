"""Benchmark: the rendered job script's size and render time as the job grows.

jobs/sft.yaml on the fictional GH200 site (examples/gh200-site/cluster.yaml, partition quad:
four GH200 per node, 4 ranks per node, one per GPU, system-wide event sampling as in the seed)
at 1, 8, 32, 128 and 512 nodes: bytes and lines of the script `gh-run render` prints, and the
time of `render_job` (the median of 5, in this process: what `render` adds to Python's
start-up). Goals: <= 40 KB and <= 0.5 s at every size.

With --baseline REV (e.g. main), the same jobs are rendered in the same run by the code of REV
(`git archive` into a temporary folder, its own process; the cluster file without the keys REV
does not know), and each size is printed with its ratio to REV's.

Usage: .venv/bin/python bench/bench_script_size.py [--baseline main]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "examples" / "gh200-site" / "cluster.yaml"
NODES = (1, 8, 32, 128, 512)
SCALE = [
    "partition=quad",
    "resources.ntasks_per_node=4",
    "resources.gpus_per_node=4",
    "resources.cpus_per_task=72",
]
# keys of the site file that code before issue 40 does not know (partition -> key)
NEW_KEYS = ("binding",)


def measure(repo: Path, cluster_file: Path) -> list[dict[str, float]]:
    """Size and render time at each size, rendered by the gh-run of `repo` (imported here)."""
    sys.path.insert(0, str(repo))
    from orchestrator.render.scripts import render_job
    from orchestrator.site.cluster import load_cluster
    from orchestrator.spec.job import JobSpec
    from orchestrator.spec.yamlio import load_model

    cluster = load_cluster(str(cluster_file))
    part = cluster.partitions["quad"]
    rows = []
    for n in NODES:
        over = [*SCALE, f"cluster={cluster_file}", f"resources.nodes={n}"]
        spec = load_model(repo / "jobs" / "sft.yaml", JobSpec, over)
        times, script = [], ""
        for _ in range(5):
            t0 = time.perf_counter()
            script = render_job(spec, cluster, "quad", part, "bench", "/scratch/runs/bench").script
            times.append(time.perf_counter() - t0)
        rows.append(
            {
                "nodes": n,
                "bytes": len(script.encode()),
                "lines": script.count("\n"),
                "seconds": statistics.median(times),
            }
        )
    return rows


def baseline(rev: str) -> list[dict[str, float]]:
    """`measure` run by the code of `rev`, in its own process and folder."""
    import yaml

    with tempfile.TemporaryDirectory(prefix="gh-run-bench-") as tmp:
        root = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True
        ).stdout
        tar_path = root / "rev.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(root / "src", filter="data")
        src = root / "src"
        # the package data as the build maps it (orchestrator.templates is templates/)
        (src / "orchestrator" / "templates").symlink_to(src / "templates")
        doc = yaml.safe_load(SITE.read_text())
        for part in doc["partitions"].values():
            for key in NEW_KEYS:
                part.pop(key, None)
        site = root / "site.yaml"
        site.write_text(yaml.safe_dump(doc))
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--measure", str(src), str(site)],
            capture_output=True,
            text=True,
            check=True,
            cwd=src,
        ).stdout
    rows: list[dict[str, float]] = json.loads(out)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="REV", help="also render with the code of REV")
    ap.add_argument("--measure", nargs=2, metavar=("REPO", "CLUSTER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), Path(args.measure[1]))))
        return
    now = measure(REPO, SITE)
    base = baseline(args.baseline) if args.baseline else None
    head = f"{'nodes':>6} {'ranks':>6} {'bytes':>8} {'lines':>6} {'render s':>9}"
    if base:
        head += f" | {args.baseline + ' bytes':>12} {'lines':>6} {'render s':>9} {'size x':>7}"
    print(head)
    for i, r in enumerate(now):
        line = (
            f"{r['nodes']:>6} {4 * r['nodes']:>6} {r['bytes']:>8} {r['lines']:>6} "
            f"{r['seconds']:>9.4f}"
        )
        if base:
            b = base[i]
            line += (
                f" | {b['bytes']:>12} {b['lines']:>6} {b['seconds']:>9.4f} "
                f"{r['bytes'] / b['bytes']:>7.3f}"
            )
        print(line)


if __name__ == "__main__":
    main()
