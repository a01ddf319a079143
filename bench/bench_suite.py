"""Benchmark: how long the test suite takes in one process and on pytest-xdist workers.

The same tests run twice in this run, one after the other: in one process (`-n 0`, the
baseline) and on --workers workers (`--dist worksteal`, as `make test`/`make check` run them).
Printed: the wall time of each, the CPU time of each (user + system of pytest and everything it
started), and the ratios. On a machine others keep busy, wall times stretch with their load and
the CPU times much less; the ratio of the two runs holds best when they run back to back.
Where the time goes: pytest's own `--durations` (e.g. `pytest -q --durations=40 tests/unit`).

    .venv/bin/python bench/bench_suite.py [--workers 2] [PATH...]     # default: tests/unit
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the children, exit code) of one pytest run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        check=False,
    ).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("paths", nargs="*", default=["tests/unit"])
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start")
    one = run(["-n", "0", *args.paths])
    many = run(["-n", str(args.workers), "--dist", "worksteal", *args.paths])
    for name, (wall, cpu, rc) in (("one process", one), (f"{args.workers} workers", many)):
        print(f"{name:>12}: {wall:7.1f} s wall  {cpu:7.1f} s CPU  (pytest exit {rc})")
    print(f"{'ratio':>12}: {one[0] / many[0]:7.2f}x faster  {many[1] / one[1]:7.2f}x the CPU")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0 if one[2] == many[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
