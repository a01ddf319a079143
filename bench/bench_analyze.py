"""Benchmark of `gh-run analyze` (wall time, peak RSS) and of gh-run vs Holistic Trace Analysis.

1. Runs `python -m orchestrator.analysis analyze FILE --json` as a subprocess on an nsys-schema
   SQLite file (default bench/out/long.sqlite, made by bench/gen_nsys.py) --cli-runs times and
   prints, per run, its wall time, CPU time (user + system, all threads: what a busy 2-core
   machine has to find) and peak RSS (`getrusage(RUSAGE_CHILDREN)`), then the median wall and
   CPU time. Goal: <= 10 s, <= 1 GiB.
2. On the same Kineto traces (default tests/data/traces/*/sft_rank0.pt.trace.json.gz), times
   gh-run's `analyze_paths` and HTA's `TraceAnalysis(...)` + `get_temporal_breakdown` in this
   one process (both include parsing; best of --repeat runs each) and prints the ratio.
   Goal: gh-run >= 5x faster.

Prints figures only; nothing here asserts a timing.

    .venv/bin/python bench/bench_analyze.py [--sqlite FILE] [--cli-runs N] [--traces GLOB]
        [--repeat N]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench_cli(sqlite: Path, runs: int) -> None:
    if not sqlite.exists():
        print(f"{sqlite}: absent; make it with: .venv/bin/python bench/gen_nsys.py {sqlite}")
        return
    cmd = [sys.executable, "-m", "orchestrator.analysis", "analyze", str(sqlite), "--json"]
    size = sqlite.stat().st_size / 2**20
    walls, cpus = [], []
    for i in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rss_mib = after.ru_maxrss / 1024  # the largest child so far
        walls.append(wall)
        cpus.append(cpu)
        status = "ok" if done.returncode == 0 else f"FAILED rc={done.returncode}: {done.stderr!r}"
        print(
            f"gh-run analyze {sqlite.name} ({size:.0f} MiB) run {i + 1}/{runs}: wall {wall:.2f} s,"
            f" CPU {cpu:.2f} s, peak RSS {rss_mib:.0f} MiB [{status}]"
        )
    print(
        f"gh-run analyze {sqlite.name}: median wall {statistics.median(walls):.2f} s,"
        f" median CPU {statistics.median(cpus):.2f} s over {runs} runs on {os.cpu_count()} CPUs"
        " (goal <= 10 s, <= 1024 MiB)"
    )


def bench_hta(traces: list[Path], repeat: int) -> None:
    from orchestrator.analysis import analyze_paths

    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("HolisticTraceAnalysis not installed: pip install HolisticTraceAnalysis")
        return
    print(
        "Kineto traces, same files, same process, best of"
        f" {repeat} each, both sides timed from the file path to the result:\n"
        "  gh-run = analyze_paths([file]): read + gunzip + parse (layout scan, orjson fallback)"
        " + every metric\n    (temporal, union, gaps, kernels, copies, ranges, steps, threads,"
        " sync, timeline) + pydantic Metrics + metrics.json fold;\n"
        "  HTA    = TraceAnalysis(trace_files={0: file}) (read + gunzip + json parse + DataFrame)"
        " + get_temporal_breakdown(visualize=False)."
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
            f"gh-run vs HTA on {len(traces)} traces: {tot_gh:.2f} s vs {tot_hta:.2f} s,"
            f" ratio {tot_hta / tot_gh:.2f}x (goal >= 5x)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sqlite", type=Path, default=ROOT / "bench/out/long.sqlite")
    ap.add_argument("--cli-runs", type=int, default=3)
    ap.add_argument("--traces", default="tests/data/traces/*/*.pt.trace.json*")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    bench_cli(args.sqlite, args.cli_runs)
    bench_hta(sorted(ROOT.glob(args.traces)), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
