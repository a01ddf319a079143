"""Benchmark: a campaign's reports fetched (before) against left on the cluster and analysed
there (after: `artifacts.reports: leave`), over the dev cluster's SSH login node.

A synthetic campaign of V variants x R ranks, each rank's report an nsys-schema export of S MB
(bench/gen_nsys.py: a STAND-IN for a real nsys export, modelled on its schema), runs as jobs on
the dev cluster reached through its login node (clusters/dev-ssh.yaml; gh-run runs as on a
laptop: no SLURM client on its PATH, the scratch hidden, tests/laptop.py). Each job places its
ranks' exports in its artifacts (hard links to files generated once: the bench measures what
crosses the wire and what is analysed, not the copy a job would make). With leave, each job then
runs the command the in-job analysis step runs (`gh-run analyze --write-records`, a STAND-IN for
the step that profiled nsys jobs render: these jobs are not profiled). Measured in the same run,
for each size: bytes brought back (the manifests' sizes: rsync copies each once) and the wall
time of `campaign run --wait` to its verdict (jobs, collection and judgement), and the part of it
after the last job was seen ended (collection and judgement: what the report size moves here).

On the dev cluster the "nodes" and the "laptop" are the same machine: the analysis moves from
gh-run's process into the jobs, and both share its cores. Usage (after `make cluster-up`):

    .venv/bin/python bench/bench_reports_left.py [--variants 16] [--ranks 2] [--sizes 20,200]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import devcluster  # noqa: E402
from tests.laptop import cluster_file, make_laptop, remove_remote_runs  # noqa: E402

KERNEL_BYTES = 132  # bytes of export per generated kernel (with its share of the other rows)


def generate(folder: Path, ranks: int, mb: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    kernels = mb * 1_000_000 // KERNEL_BYTES
    for r in range(ranks):
        f = folder / f"rank{r}.sqlite"
        subprocess.run(
            [sys.executable, str(REPO / "bench" / "gen_nsys.py"), str(f), "--kernels",
             str(kernels), "--copies", str(kernels // 5), "--memsets", str(kernels // 50),
             "--osrt", str(kernels // 16), "--seed", str(r + 1)],
            check=True, capture_output=True,
        )  # fmt: skip
        out.append(f)
    return out


def campaign(tmp: Path, cluster: Path, exports: list[Path], variants: int, leave: bool) -> Path:
    links = "; ".join(
        f'ln -f {e} "$GH_RUN_ARTIFACTS/bench.{r}.sqlite"' for r, e in enumerate(exports)
    )
    script = links + '; printf \'{"median_step_time_s": 0.1, "tokens_per_s": 1000}\\n\''
    script += ' > "$GH_RUN_ARTIFACTS/metrics.json"'
    if leave:
        gh = " ".join([sys.executable, "-m", "orchestrator"])
        script += f'; {gh} analyze --write-records "$GH_RUN_ARTIFACTS"'
    mode = "leave" if leave else "fetch"
    job = tmp / f"job-{mode}.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": f"left-{mode}",
                "cluster": str(cluster),
                "resources": {"cpus_per_task": 1, "mem": "1500M", "time": "00:20:00"},
                "workload": {"command": "bash", "args": ["-c", script]},
                "artifacts": {"include": ["*.sqlite", "metrics.json"], "reports": mode},
            }
        )
    )
    camp = tmp / f"camp-{mode}.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": f"left-{mode}",
                "job": str(job),
                "executor": "slurm",
                "matrix": {"v": {f"v{i}": [f"workload.env.V={i}"] for i in range(variants)}},
            }
        )
    )
    return camp


def manifests(home: Path) -> tuple[int, int, int]:
    """(bytes brought back, files, bytes left on the cluster) over every run of the home."""
    got = files = left = 0
    for m in (home / "artifacts").glob("*/manifest.json"):
        data = json.loads(m.read_text())
        got += sum(f["size"] for f in data["files"])
        files += len(data["files"])
        left += sum(x["size"] for x in data.get("left", []))
    return got, files, left


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="20,200", help="export sizes in MB, comma-separated")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    need = max(sizes) * 1_000_000 * args.ranks * (2 * args.variants + 1)  # before: mirror+store
    free = shutil.disk_usage(devcluster.SCRATCH).free
    if need > free * 0.8:
        sys.exit(f"needs about {need >> 30} GiB, {free >> 30} GiB free: pass smaller --sizes")
    rows = []
    # the exports on the cluster side; the laptops (which cannot see the scratch) elsewhere
    work = Path(tempfile.mkdtemp(prefix="bench-left-", dir=devcluster.SCRATCH))
    here = Path(tempfile.mkdtemp(prefix="bench-left-laptop-"))
    try:
        for mb in sizes:
            exports = generate(work / f"exports-{mb}", args.ranks, mb)
            actual = sum(e.stat().st_size for e in exports) // args.ranks
            for leave in (False, True):
                tmp = here / f"{mb}-{'leave' if leave else 'fetch'}"
                tmp.mkdir()
                cluster = cluster_file(
                    tmp,
                    "dev-ssh-bench",
                    analysis={"gh_run": [sys.executable, "-m", "orchestrator"]},
                )
                laptop = make_laptop(tmp)
                camp = campaign(tmp, cluster, exports, args.variants, leave)
                t0 = time.perf_counter()
                res = laptop.cli("campaign", "run", str(camp), "--wait", timeout=3600)
                wall = time.perf_counter() - t0
                done = time.time()  # the clock the store's ended_at is in
                if res.rc not in (0, 1):  # 1: the verdict found regressions (no baseline yet)
                    sys.exit(f"campaign failed ({res.rc}):\n{res.text}")
                got, files, left = manifests(laptop.home)
                collected = len(list((laptop.home / "artifacts").glob("*/manifest.json")))
                if collected != args.variants:
                    sys.exit(
                        f"{collected} of {args.variants} runs were collected:\n{res.text[-3000:]}"
                    )
                with contextlib.closing(sqlite3.connect(laptop.home / "state.db")) as con, con:
                    ended = con.execute("SELECT MAX(ended_at) FROM runs").fetchone()[0]
                tail = done - float(ended)  # collection and judgement, after the jobs
                rows.append(
                    (mb, actual, "leave" if leave else "fetch", got, files, left, wall, tail)
                )
                remove_remote_runs(laptop)
                shutil.rmtree(tmp, ignore_errors=True)  # the fetched copies
                print(
                    f"{mb} MB exports ({actual / 1e6:.0f} MB each), "
                    f"{'leave' if leave else 'fetch'}: {got / 1e6:.1f} MB in {files} files back, "
                    f"{left / 1e6:.0f} MB left there, {wall:.1f} s to the verdict"
                    f" ({tail:.1f} s of it after the last job ended)",
                    flush=True,
                )
            shutil.rmtree(work / f"exports-{mb}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(here, ignore_errors=True)
    print()
    print(f"{args.variants} variants x {args.ranks} ranks, over the SSH login node")
    print(
        "| export | mode | bytes back | files back | left there | to the verdict |"
        " after the last job |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for _mb, actual, mode, got, files, left, wall, tail in rows:
        print(
            f"| {actual / 1e6:.0f} MB | {mode} | {got / 1e6:.1f} MB | {files} |"
            f" {left / 1e6:.0f} MB | {wall:.1f} s | {tail:.1f} s |"
        )
    by = {(r[0], r[2]): r for r in rows}
    for mb in sizes:
        f, lv = by[(mb, "fetch")], by[(mb, "leave")]
        print(
            f"{mb} MB: {f[3] / max(lv[3], 1):.0f}x fewer bytes with leave;"
            f" verdict {lv[6] / f[6]:.2f}x the time of fetch,"
            f" {lv[7] / max(f[7], 1e-9):.2f}x after the last job ended"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
