"""A bursty CPU load beside a benchmark: every few seconds a random number (0 to MAX) of busy
loops, as a submitting machine shared with test suites and compression jobs sees it (issue 30).

    python3 bench/bursty_load.py LOG [--seed N] [--max 4] [--min-s 2] [--max-s 5]

Runs until it is sent SIGTERM or SIGINT. Each burst's loops are separate processes that stop
on their own at the burst's end (a deadline passed to each), so killing this process leaves
nothing spinning. One line per burst goes to LOG: its start (epoch s), its length (s), the
number of loops, and the machine's 1-minute load average then. `summary LOG` prints what the
load was: the mean number of loops over time and the time share of each number.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

# A busy loop that ends by itself at a deadline (monotonic seconds): no orphan can outlive it.
LOOP = "import sys, time\nend = float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def run(log: Path, seed: int, most: int, min_s: float, max_s: float) -> None:
    rng = random.Random(seed)
    stop = False

    def _stop(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with log.open("a") as out:
        while not stop:
            n = rng.randint(0, most)
            length = rng.uniform(min_s, max_s)
            end = time.monotonic() + length
            loops = [subprocess.Popen([sys.executable, "-c", LOOP, repr(end)]) for _ in range(n)]
            load1 = os.getloadavg()[0]
            out.write(f"{time.time():.3f} {length:.3f} {n} {load1:.2f}\n")
            out.flush()
            while not stop and time.monotonic() < end:
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))
            for p in loops:
                if stop:
                    p.terminate()
                p.wait()


def summary(log: Path) -> str:
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    if not rows:
        return "bursty load: no burst recorded"
    total = sum(float(r[1]) for r in rows)
    share: dict[int, float] = {}
    for r in rows:
        share[int(r[2])] = share.get(int(r[2]), 0.0) + float(r[1])
    mean = sum(n * s for n, s in share.items()) / total
    loads = [float(r[3]) for r in rows]
    shares = ", ".join(f"{n}: {100 * s / total:.0f}%" for n, s in sorted(share.items()))
    return (
        f"bursty load: {len(rows)} bursts over {total / 60:.1f} min, mean {mean:.2f} busy loops "
        f"(time share by loops {shares}); 1-min load average {min(loads):.1f}-{max(loads):.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args[:1] == ["summary"]:
        print(summary(Path(args[1])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--max", type=int, default=4, dest="most")
    ap.add_argument("--min-s", type=float, default=2.0)
    ap.add_argument("--max-s", type=float, default=5.0)
    ns = ap.parse_args(args)
    run(ns.log, ns.seed, ns.most, ns.min_s, ns.max_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
