"""The CPU of every process that ended, from `dump-acct` (Debian's acct) on stdin: by program,
and the Python processes by how much each took (the CLI calls the tests make are the many of
0.15-1.5 s; the xdist workers and pytest itself the few long-lived ones). bench/suite_cpu.sh
runs a command under process accounting and pipes its records here.

    dump-acct /tmp/gh-run-pacct | .venv/bin/python bench/pacct_summary.py --wall 931 --cores 2

A process's parent is not followed: pids are reused within a suite's run (tens of thousands of
processes), so a parent id names whoever held it last.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass

TICKS = 100.0  # dump-acct prints times in clock ticks of 1/100 s (AHZ)
LONG_S = 200.0  # elapsed: a pytest worker or a daemon, not one call
SIZES = (0.05, 0.15, 0.3, 0.6, 1.5, 4.0)


@dataclass(frozen=True)
class Proc:
    comm: str
    cpu_s: float
    elapsed_s: float


def parse(lines: list[str]) -> list[Proc]:
    """dump-acct's lines: comm|version|utime|stime|etime|uid|gid|mem|io|pid|ppid|..."""
    out = []
    for line in lines:
        f = [x.strip() for x in line.split("|")]
        if len(f) < 11:
            continue
        try:
            cpu = (float(f[2]) + float(f[3])) / TICKS
            out.append(Proc(f[0].rstrip("*"), cpu, float(f[4]) / TICKS))
        except ValueError:
            continue
    return out


def size_label(cpu: float) -> str:
    for edge in SIZES:
        if cpu < edge:
            return f"< {edge:g} s"
    return f">= {SIZES[-1]:g} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wall", type=float, default=0.0, help="the command's wall time, s")
    ap.add_argument("--cores", type=int, default=0, help="the machine's cores")
    ap.add_argument("--top", type=int, default=20, help="programs listed")
    args = ap.parse_args()
    procs = parse(sys.stdin.readlines())
    total = sum(p.cpu_s for p in procs)
    line = f"{len(procs)} processes ended, {total:.0f} s of CPU"
    if args.wall and args.cores:
        line += (
            f"; {total / (args.wall * args.cores):.0%} of {args.cores} cores over {args.wall:.0f} s"
            f" (the CPU alone needs >= {total / args.cores:.0f} s)"
        )
    print(line)
    by: dict[str, float] = {}
    count = Counter[str]()
    for p in procs:
        by[p.comm] = by.get(p.comm, 0.0) + p.cpu_s
        count[p.comm] += 1
    print(f"  {'program':18} {'processes':>9} {'CPU s':>8} {'share':>6}")
    for comm, cpu in sorted(by.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {comm:18} {count[comm]:9d} {cpu:8.1f} {cpu / total:6.1%}")
    py = [p for p in procs if p.comm.startswith("python")]
    long = sorted((p for p in py if p.elapsed_s >= LONG_S), key=lambda p: -p.elapsed_s)
    short = [p for p in py if p.elapsed_s < LONG_S]
    long_cpu, short_cpu = sum(p.cpu_s for p in long), sum(p.cpu_s for p in short)
    print(
        f"Python: {len(long)} long-lived (>= {LONG_S:g} s: xdist workers, pytest) used"
        f" {long_cpu:.0f} s; {len(short)} others {short_cpu:.0f} s"
    )
    sizes = Counter[str]()
    sized: dict[str, float] = {}
    for p in short:
        sizes[size_label(p.cpu_s)] += 1
        sized[size_label(p.cpu_s)] = sized.get(size_label(p.cpu_s), 0.0) + p.cpu_s
    labels = [f"< {e:g} s" for e in SIZES] + [f">= {SIZES[-1]:g} s"]
    for label in labels:
        if sizes[label]:
            print(f"  each {label:9} {sizes[label]:6d} processes {sized.get(label, 0.0):8.1f} s")
    for p in long[:16]:
        print(f"  long-lived {p.comm:12} {p.elapsed_s:7.0f} s elapsed {p.cpu_s:7.1f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
