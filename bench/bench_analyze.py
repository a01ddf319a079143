"""Benchmarks of `gh-run analyze`: wall time, CPU time and peak memory; gh-run against HTA.

Every case runs `python -m orchestrator.analysis analyze ... --json` as a subprocess and prints,
per run, its wall time, CPU time (user + system of the process and its workers: what a busy
2-core machine has to find) and peak RSS: of the largest process (`getrusage(RUSAGE_CHILDREN)`)
and, where worker processes read several files at once, of the whole process tree (sampled every
20 ms with psutil). Nothing here asserts a timing; ratios compare runs of the same invocation.

1. `--sqlite FILE` (default bench/out/long.sqlite, made by bench/gen_nsys.py: 5 M kernels, 1 M
   copies): this tree, and with `--baseline DIR` (a checkout of an earlier gh-run, e.g.
   `git archive main | tar -x -C DIR`) the same command run from there, interleaved, so both
   meet the same machine load; medians and the ratio. The first `--sqlite-fallback-runs` runs
   are each followed by one with every table read through SQLite (GH_RUN_NO_NATIVE_SCAN: what a
   machine without a C compiler runs), for the page reader's ratio.
2. `--ddp DIR` (bench/gen_kineto.py: N ranks of a data-parallel job): the multi-rank case.
   Goal for 8 ranks x 500 k kernels on this 2-core machine: <= 15 s, <= 1.5 GiB. The first
   `--ddp-fallback-runs` runs are each followed by one without the C scan (GH_RUN_NO_NATIVE_SCAN:
   orjson parses every batch,
   what a machine without a C compiler runs), for the ratio.
3. `--hta-ddp DIR`: the whole process of `gh-run analyze DIR --json` against a Python process
   that runs HTA on the same traces (TraceAnalysis + temporal, kernel-type, comm/comp overlap
   and idle-time breakdowns of every rank: what gh-run computes for them). Goal: >= 5x.
4. `--big FILE ...`: peak RSS of one large trace (plain and gzipped; the bounded reader's goal:
   a 1.5 GiB-uncompressed trace never over 1 GiB RSS).
5. `--traces GLOB` (default the real H100 traces): gh-run's `analyze_paths` and HTA's
   `TraceAnalysis` + `get_temporal_breakdown`, in this process, per trace.

    .venv/bin/python bench/bench_analyze.py [--sqlite FILE] [--baseline DIR] [--cli-runs N]
        [--ddp DIR] [--hta-ddp DIR] [--big FILE ...] [--traces GLOB] [--repeat N] [--skip ...]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HTA_SCRIPT = """
import glob, logging, os, re, sys, warnings
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
d = sys.argv[1]
files = {}
for f in glob.glob(os.path.join(d, "*.json*")):
    m = re.search(r"rank(\\d+)", os.path.basename(f))
    if m:
        files[int(m.group(1))] = f
ta = TraceAnalysis(trace_files=files, trace_dir=d)
ta.get_temporal_breakdown(visualize=False)
ta.get_gpu_kernel_breakdown(visualize=False)
ta.get_comm_comp_overlap(visualize=False)
ta.get_idle_time_breakdown(ranks=sorted(files), visualize=False)
"""


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mib: float  # largest process
    tree_mib: float | None  # whole tree, sampled
    ok: bool
    err: str


def _tree_rss(pid: int, stop: threading.Event, out: list[float]) -> None:
    try:
        import psutil
    except ImportError:
        return
    peak = 0.0
    try:
        proc = psutil.Process(pid)
        while not stop.is_set():
            try:
                total = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True)
                )
            except psutil.Error:
                break
            peak = max(peak, total)
            stop.wait(0.02)
    except psutil.Error:
        pass
    out.append(peak / 2**20)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """One subprocess: wall, CPU and peak RSS (`wait4`: the process and its waited-for
    workers), and the whole tree's RSS sampled while it runs."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    stop = threading.Event()
    sampled: list[float] = []
    watcher = threading.Thread(target=_tree_rss, args=(proc.pid, stop, sampled), daemon=True)
    watcher.start()
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    return Run(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        rss_mib=usage.ru_maxrss / 1024,
        tree_mib=sampled[0] if sampled else None,
        ok=proc.returncode == 0,
        err=err.decode(errors="replace")[-300:],
    )


def _show(label: str, r: Run) -> str:
    tree = f", tree {r.tree_mib:.0f} MiB" if r.tree_mib is not None else ""
    status = "ok" if r.ok else f"FAILED: {r.err!r}"
    return (
        f"  {label}: wall {r.wall:.2f} s, CPU {r.cpu:.2f} s, peak RSS {r.rss_mib:.0f} MiB{tree}"
        f" [{status}]"
    )


def analyze_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "orchestrator.analysis", "analyze", str(path), "--json"]


def bench_sqlite(sqlite: Path, runs: int, baseline: Path | None, fallback_runs: int) -> None:
    if not sqlite.exists():
        print(f"{sqlite}: absent; make it with: .venv/bin/python bench/gen_nsys.py {sqlite}")
        return
    from orchestrator.analysis.readers import sqlite_pages

    size = sqlite.stat().st_size / 2**20
    reader = "the page reader" if sqlite_pages.available() else "SQLite (the page reader is off)"
    print(
        f"1. gh-run analyze {sqlite.name} ({size:.0f} MiB), {reader}, {runs} interleaved runs each"
    )
    trees: dict[str, tuple[Path, dict[str, str] | None]] = {"this tree": (ROOT, None)}
    if baseline is not None:
        trees = {"baseline": (baseline, None), "this tree": (ROOT, None)}
    if sqlite_pages.available() and fallback_runs:
        # what a machine without a C compiler runs: every table through SQLite
        trees["this tree, SQLite path"] = (ROOT, {"GH_RUN_NO_NATIVE_SCAN": "1"})
    got: dict[str, list[Run]] = {k: [] for k in trees}
    for i in range(runs):
        for label, (tree, env) in trees.items():
            if env is not None and i >= fallback_runs:
                continue
            r = run(analyze_cmd(sqlite), tree, env)
            got[label].append(r)
            print(_show(f"{label} run {i + 1}", r))
    med = {}
    for label, rs in got.items():
        med[label] = (
            statistics.median(r.wall for r in rs),
            statistics.median(r.cpu for r in rs),
            max(r.rss_mib for r in rs),
        )
        w, c, m = med[label]
        print(f"  {label}: median wall {w:.2f} s, median CPU {c:.2f} s, peak RSS {m:.0f} MiB")
    if baseline is not None:
        (bw, bc, bm), (aw, ac, am) = med["baseline"], med["this tree"]
        print(
            f"  this tree / baseline: wall x{aw / bw:.2f}, CPU x{ac / bc:.2f},"
            f" peak RSS x{am / bm:.2f} (on {os.cpu_count()} CPUs, same load for both)"
        )
    if "this tree, SQLite path" in med:
        (sw, sc, sm), (aw, ac, am) = med["this tree, SQLite path"], med["this tree"]
        print(
            f"  page reader / SQLite path: wall x{aw / sw:.2f}, CPU x{ac / sc:.2f},"
            f" peak RSS x{am / sm:.2f}"
        )


def bench_ddp(folder: Path, runs: int, numpy_runs: int) -> None:
    files = sorted(folder.glob("*.json*"))
    if not files:
        print(f"{folder}: no traces; make them with: .venv/bin/python bench/gen_kineto.py {folder}")
        return
    size = sum(f.stat().st_size for f in files) / 2**20
    from orchestrator.analysis.readers import kineto_scan

    scan = "the C scan" if kineto_scan.available() else "orjson (the C scan is not built)"
    print(f"2. gh-run analyze {folder} ({len(files)} ranks, {size:.0f} MiB), {scan}")
    rs, slow = [], []
    for i in range(runs):
        r = run(analyze_cmd(folder), ROOT)
        rs.append(r)
        print(_show(f"run {i + 1}", r))
        if kineto_scan.available() and i < numpy_runs:  # the fallback, interleaved
            r = run(analyze_cmd(folder), ROOT, {"GH_RUN_NO_NATIVE_SCAN": "1"})
            slow.append(r)
            print(_show(f"orjson path run {i + 1}", r))
    trees = [r.tree_mib for r in rs if r.tree_mib is not None]
    tree = f", whole tree {max(trees):.0f} MiB" if trees else ""
    print(
        f"  median wall {statistics.median(r.wall for r in rs):.2f} s, median CPU"
        f" {statistics.median(r.cpu for r in rs):.2f} s, largest process"
        f" {max(r.rss_mib for r in rs):.0f} MiB{tree} (goal for 8 x 500 k kernels: <= 15 s,"
        " <= 1536 MiB)"
    )
    if slow:
        sw, sc = statistics.median(r.wall for r in slow), statistics.median(r.cpu for r in slow)
        print(
            f"  orjson path: median wall {sw:.2f} s, CPU {sc:.2f} s; C scan / orjson path: wall"
            f" x{statistics.median(r.wall for r in rs) / sw:.2f},"
            f" CPU x{statistics.median(r.cpu for r in rs) / sc:.2f}"
        )


def bench_hta_ddp(folder: Path) -> None:
    files = sorted(folder.glob("*.json*"))
    try:
        import hta

        del hta
    except ImportError:
        print("HolisticTraceAnalysis not installed: pip install HolisticTraceAnalysis==0.5.0")
        return
    if not files:
        print(f"{folder}: no traces; make them with bench/gen_kineto.py")
        return
    size = sum(f.stat().st_size for f in files) / 2**20
    print(f"3. whole process, same traces ({len(files)} ranks, {size:.0f} MiB): gh-run vs HTA")
    gh = run(analyze_cmd(folder), ROOT)
    print(_show("gh-run analyze --json", gh))
    hta = run([sys.executable, "-c", HTA_SCRIPT, str(folder)], ROOT)
    print(_show("HTA (4 analyses)", hta))
    if gh.ok and hta.ok:
        print(f"  gh-run is {hta.wall / gh.wall:.1f}x faster (wall), {hta.cpu / gh.cpu:.1f}x (CPU)")


def bench_big(paths: list[Path]) -> None:
    for p in paths:
        if not p.exists():
            print(f"{p}: absent")
            continue
        print(f"4. one large trace: {p.name} ({p.stat().st_size / 2**20:.0f} MiB on disk)")
        print(_show("gh-run analyze --json", run(analyze_cmd(p), ROOT)))


def bench_hta(traces: list[Path], repeat: int) -> None:
    from orchestrator.analysis import analyze_paths

    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("HolisticTraceAnalysis not installed: pip install HolisticTraceAnalysis")
        return
    print(
        "5. real Kineto traces, same process, best of"
        f" {repeat} each, both sides from the file path to the result:\n"
        "  gh-run = analyze_paths([file]) (read, parse, every metric, pydantic Metrics);\n"
        "  HTA    = TraceAnalysis(trace_files={0: file}) + get_temporal_breakdown(visualize=False)."
    )
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    tot_gh = tot_hta = 0.0
    for f in traces:
        gh = hta = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            m = analyze_paths([f])
            gh = min(gh, time.perf_counter() - t0)
            t0 = time.perf_counter()
            ta = TraceAnalysis(trace_files={0: str(f.resolve())}, trace_dir=str(f.parent.resolve()))
            df = ta.get_temporal_breakdown(visualize=False)
            hta = min(hta, time.perf_counter() - t0)
        tot_gh += gh
        tot_hta += hta
        t = m.ranks[0].temporal
        h = df.iloc[0]
        print(
            f"  {f.parent.name:10s} gh-run {gh * 1e3:7.1f} ms  HTA {hta * 1e3:7.1f} ms"
            f"  ratio {hta / gh:5.2f}x  temporal idle/compute/non-compute gh-run"
            f" {t.idle_pct:.2f}/{t.compute_pct:.2f}/{t.non_compute_pct:.2f}"
            f" HTA {h.idle_time_pctg}/{h.compute_time_pctg}/{h.non_compute_time_pctg}"
        )
    if traces:
        print(
            f"  gh-run vs HTA on {len(traces)} traces: {tot_gh:.2f} s vs {tot_hta:.2f} s,"
            f" ratio {tot_hta / tot_gh:.2f}x"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sqlite", type=Path, default=ROOT / "bench/out/long.sqlite")
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier gh-run checkout")
    ap.add_argument("--cli-runs", type=int, default=3)
    ap.add_argument(
        "--sqlite-fallback-runs", type=int, default=1,
        help="of those, how many also run with every table read through SQLite (the fallback)",
    )  # fmt: skip
    ap.add_argument("--ddp", type=Path, default=ROOT / "bench/out/ddp8")
    ap.add_argument("--ddp-runs", type=int, default=2)
    ap.add_argument(
        "--ddp-fallback-runs", type=int, default=1,
        help="of those, how many are followed by one without the C scan (the fallback)",
    )  # fmt: skip
    ap.add_argument("--hta-ddp", type=Path, default=ROOT / "bench/out/ddp8-small")
    ap.add_argument("--big", type=Path, nargs="*", default=[])
    ap.add_argument("--traces", default="tests/data/traces/*/*.pt.trace.json*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--skip", nargs="*", default=[], choices=["sqlite", "ddp", "hta-ddp", "big", "traces"]
    )
    args = ap.parse_args()
    if "sqlite" not in args.skip:
        bench_sqlite(args.sqlite, args.cli_runs, args.baseline, args.sqlite_fallback_runs)
    if "ddp" not in args.skip:
        bench_ddp(args.ddp, args.ddp_runs, args.ddp_fallback_runs)
    if "hta-ddp" not in args.skip:
        bench_hta_ddp(args.hta_ddp)
    if "big" not in args.skip and args.big:
        bench_big(args.big)
    if "traces" not in args.skip:
        bench_hta(sorted(ROOT.glob(args.traces)), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
