"""Benchmark of `analyze` on PyTorch-annotated nsys exports (issue 37): a stand-in with a
million PyTorch operator ranges, and the real 2026 exports of tests/data/nsys2026.

1. Whole process, `python -m orchestrator.analysis analyze FILE --json` (what `gh-run analyze`
   runs), median of --repeat runs: wall, CPU (user + system of the process and its reader
   threads) and peak RSS, with the compiled page reader and without it (GH_RUN_NO_NATIVE_SCAN).
   Start-up is the same command on the smallest real export (`mock`: 2 kernels), so "beyond
   start-up" is a case's wall minus that one's. With `--baseline DIR` (an earlier checkout,
   e.g. `git archive main | tar -x -C DIR`, built with `pip install -e`), the same command run
   from there, interleaved, so both meet the same machine load; the ratio.
2. In this process, `loader.analyze_paths` of each real export after one warm-up: the analysis
   alone, without the interpreter's start-up or imports.

Compiled modules: every case runs once before the rounds with bytecode writing on, so the rounds
read gh-run's (and the baseline's) modules from their .pyc files, as an installed wheel does
(PYTHONDONTWRITEBYTECODE=1, set in some environments, would otherwise have every run compile
every module). One case, `mock (no .pyc)`, shows that cost: the start-up from a copy of the
`orchestrator` package without its __pycache__ folders, run with PYTHONDONTWRITEBYTECODE=1 (gh-run's
modules compiled on every run; Python's and the libraries' read from their .pyc).

The stand-in (bench/gen_nsys.py --torch-ops N) is written once to --out: 200 k kernels, 20 k
copies, 2 k memsets, 20 k OS-runtime calls, 400 steps and N operator ranges named and nested as
`torch.autograd.profiler.emit_nvtx` names them (`aten::linear, seq = 12, op_id = 3401`).
Goals (issue 37): the stand-in <= 3 s wall; each small real export <= 0.5 s of analysis beyond
start-up. Nothing here asserts: it prints figures, the machine's load and the ratios.

    .venv/bin/python bench/bench_torch_ops.py [--repeat N] [--ops N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL = ["h100_2gpu_1s", "mfu_2gpu_before", "mfu_2gpu_after", "mock"]
GOAL_STANDIN_S = 3.0
GOAL_BEYOND_START_S = 0.5


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one run, from the child's own rusage (`os.wait4`)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def analyze_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "orchestrator.analysis", "analyze", str(path), "--json"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "torch_ops.sqlite")
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args()
    from tests.fixtures.recordings import export

    if not args.out.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gen_nsys.py"), str(args.out),
             "--kernels", "200000", "--copies", "20000", "--memsets", "2000",
             "--osrt", "20000", "--torch-ops", str(args.ops), "--kernels-per-step", "500"],
            check=True,
        )  # fmt: skip
    real = {n: export(ROOT / "tests" / "data" / "nsys2026" / f"{n}.sqlite.xz") for n in REAL}
    print(f"load average before: {os.getloadavg()}")
    cases: dict[str, tuple[list[str], Path, dict[str, str]]] = {}
    for name, path in [("stand-in", args.out), *real.items()]:
        cases[name] = (analyze_cmd(path), ROOT, {})
        if name in ("stand-in", "h100_2gpu_1s"):
            cases[f"{name} (no page reader)"] = (analyze_cmd(path), ROOT,
                                                 {"GH_RUN_NO_NATIVE_SCAN": "1"})  # fmt: skip
        if args.baseline is not None and name in ("stand-in", "h100_2gpu_1s", "mock"):
            cases[f"{name} (baseline)"] = (analyze_cmd(path), args.baseline, {})
    nopyc = Path(tempfile.mkdtemp(prefix="gh-run-nopyc-"))
    shutil.copytree(ROOT / "orchestrator", nopyc / "orchestrator",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    cases["mock (no .pyc)"] = (analyze_cmd(real["mock"]), nopyc, {"PYTHONDONTWRITEBYTECODE": "1"})
    for name, (cmd, cwd, env) in cases.items():  # .pyc written where they are missing or stale
        if "no .pyc" not in name:
            timed(cmd, cwd, {**env, "PYTHONDONTWRITEBYTECODE": ""})
    runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in cases}
    for _ in range(args.repeat):  # interleaved: every case meets the same load
        for name, (cmd, cwd, env) in cases.items():
            runs[name].append(timed(cmd, cwd, env))
    print(f"load average after: {os.getloadavg()}")
    med = {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v),
               max(r for _, _, r in v)) for k, v in runs.items()}  # fmt: skip
    start = med["mock"][0]
    print(f"\nwhole process, median of {args.repeat} (start-up = mock's wall, {start:.3f} s):")
    print(f"{'case':34} {'wall s':>8} {'CPU s':>8} {'RSS MiB':>8} {'beyond start-up':>16}")
    for name, (w, c, r) in med.items():
        print(f"{name:34} {w:8.3f} {c:8.3f} {r / 1024:8.0f} {w - start:16.3f}")
    sw = med["stand-in"][0]
    print(f"\nstand-in ({args.ops:,} operator ranges): {sw:.3f} s wall, goal <= {GOAL_STANDIN_S} s:"
          f" {'met' if sw <= GOAL_STANDIN_S else 'NOT met'}")  # fmt: skip
    for n in REAL:
        beyond = med[n][0] - start
        print(
            f"{n}: {beyond:.3f} s beyond start-up, goal <= {GOAL_BEYOND_START_S} s:"
            f" {'met' if beyond <= GOAL_BEYOND_START_S else 'NOT met'}"
        )
    if args.baseline is not None:
        for n in ("stand-in", "h100_2gpu_1s", "mock"):
            b, a = med[f"{n} (baseline)"][0], med[n][0]
            print(f"{n}: baseline {b:.3f} s, this tree {a:.3f} s: {b / a:.2f}x")
            bc, ac = med[f"{n} (baseline)"][1], med[n][1]
            print(f"{n}: CPU baseline {bc:.3f} s, this tree {ac:.3f} s: {bc / ac:.2f}x")
    print(f"\nstart-up CPU with .pyc (mock) {med['mock'][1]:.3f} s, compiling gh-run's modules"
          f" (no .pyc) {med['mock (no .pyc)'][1]:.3f} s")  # fmt: skip
    shutil.rmtree(nopyc, ignore_errors=True)

    from orchestrator.analysis import loader

    print("\nin this process, analysis alone (median of the runs after one warm-up):")
    for n, path in real.items():
        loader.analyze_paths([path], use_records=False)
        took = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            loader.analyze_paths([path], use_records=False)
            took.append(time.perf_counter() - t0)
        print(f"  {n:20} {statistics.median(took):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
