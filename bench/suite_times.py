"""Where the test suite's time goes: per file and per test, wall time against CPU time.

Reads the JSON lines that the `tests.timings` pytest plugin writes (one per test: wall time,
CPU of the worker, CPU of the children it waited for), e.g.

    GH_RUN_TEST_TIMES=/tmp/t.jsonl .venv/bin/python -m pytest -p tests.timings -n 2 tests/unit
    .venv/bin/python bench/suite_times.py /tmp/t.jsonl [--top 30]

A test's wall time beyond its CPU time is waiting (SLURM, a lock, a sleep, another process's
turn on a busy core): pytest-xdist can overlap it with other tests. CPU time is what the cores
must do whatever the order, so the sum of CPU over the cores is the floor of the run's wall time.
Several files (e.g. one per interpreter) are read together and told apart by their Python.

`--write-slow tests/slow_tests.txt` rewrites the list of the tests that `make check` leaves out
(each test function with a case over --slow-test s of CPU, or over --slow-function s in all;
tests/conftest.py marks them `slow`); `make test` runs them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25, help="how many files and tests to list")
    parser.add_argument("--cores", type=int, default=2, help="the cores of the machine measured")
    parser.add_argument("--write-slow", type=Path, help="write the slow test functions here")
    parser.add_argument("--slow-test", type=float, default=1.0, help="CPU s of one case")
    parser.add_argument("--slow-function", type=float, default=5.0, help="CPU s of all cases")
    args = parser.parse_args()
    rows = [json.loads(line) for f in args.files for line in f.read_text().splitlines() if line]
    if not rows:
        print("no timings in the files given", file=sys.stderr)
        return 2
    by_python: dict[str, list[dict[str, object]]] = defaultdict(list)
    for r in rows:
        by_python[str(r.get("python", "?"))].append(r)
    for python, group in sorted(by_python.items()):
        wall = sum(float(r["wall"]) for r in group)  # type: ignore[arg-type]
        cpu = sum(float(r["cpu"]) + float(r["child_cpu"]) for r in group)  # type: ignore[arg-type]
        print(
            f"Python {python}: {len(group)} tests, {wall:.0f} s of test wall time, {cpu:.0f} s CPU "
            f"({cpu / max(wall, 1e-9):.0%} of it computing); CPU alone needs >= "
            f"{cpu / args.cores:.0f} s on {args.cores} cores"
        )
        files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for r in group:
            f = str(r["test"]).split("::")[0]
            files[f][0] += float(r["wall"])  # type: ignore[arg-type]
            files[f][1] += float(r["cpu"]) + float(r["child_cpu"])  # type: ignore[arg-type]
            files[f][2] += 1
        bad = [str(r["test"]) for r in group if r.get("outcome", "passed") not in ("passed", "?")]
        for test in bad:
            print(f"  not passed: {test}")
        print(f"  {'file':<52} {'tests':>5} {'wall s':>8} {'CPU s':>8} {'CPU%':>5}")
        for f, (w, c, n) in sorted(files.items(), key=lambda kv: -kv[1][1])[: args.top]:
            print(f"  {f:<52} {int(n):>5} {w:>8.1f} {c:>8.1f} {c / max(w, 1e-9):>5.0%}")
        print(f"  {'test':<80} {'wall s':>7} {'CPU s':>7}")
        tests = sorted(group, key=lambda r: -float(r["wall"]))  # type: ignore[arg-type]
        for r in tests[: args.top]:
            c = float(r["cpu"]) + float(r["child_cpu"])  # type: ignore[arg-type]
            print(f"  {str(r['test'])[:80]:<80} {float(r['wall']):>7.1f} {c:>7.1f}")  # type: ignore[arg-type]
    if args.write_slow:
        write_slow(rows, args.write_slow, args.slow_test, args.slow_function)
    return 0


def write_slow(rows: list[dict[str, object]], out: Path, one: float, every: float) -> None:
    cases: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        cpu = float(r["cpu"]) + float(r["child_cpu"])  # type: ignore[arg-type]
        cases[str(r["test"]).split("[")[0]].append(cpu)
    slow = sorted(f for f, c in cases.items() if max(c) > one or sum(c) > every)
    kept = sum(len(c) for f, c in cases.items() if f not in slow)
    kept_cpu = sum(sum(c) for f, c in cases.items() if f not in slow)
    header = (
        "# The test functions `make check` leaves out (tests/conftest.py marks them `slow`):\n"
        f"# a case over {one:g} s of CPU or over {every:g} s for all its cases, as measured by\n"
        "# bench/suite_times.py --write-slow (DEVELOPERS.md). `make test` runs every test.\n"
        f"# Left in `make check`: {kept} tests, {kept_cpu:.0f} s of CPU when measured.\n"
    )
    out.write_text(header + "".join(f"{f}\n" for f in slow))
    print(f"{len(slow)} slow test functions written to {out}; {kept} tests left in make check")


if __name__ == "__main__":
    sys.exit(main())
