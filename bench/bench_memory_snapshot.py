"""Reading a PyTorch memory snapshot of a million events (issue 39: <= 5 s and <= 1 GiB here),
against `pickle.load` of the same file alone, each in a fresh process (wall time and the
process's peak RSS, 3 runs each, the median).

The snapshot: a real one when given (`--snapshot FILE`, e.g. the H200's 1 M-event churn dump:
`xz -dk churn-1m.pickle.xz`), else one made here from the real H200 recordings
(tests/data/memory_h200): their events repeated, with addresses and times shifted per copy, until
`--events` (1,000,000) events, their frames shared as a real snapshot shares them, the hook's
marks repeated likewise. What is timed for gh-run: the safe load (readers/safe_pickle.py), the
columns (readers/torch_snapshot.py) and the whole memory analysis (families/memory_use.py).

    .venv/bin/python bench/bench_memory_snapshot.py [--events N] [--snapshot FILE] [--runs 3]

Prints each run's seconds and MiB and the ratios. No assertion: timings are read, not judged
by a test.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "memory_h200"

BASELINE = """
import pickle, resource, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    data = pickle.load(fh)
took = time.perf_counter() - t0
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

GH_RUN = """
import resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
t0 = time.perf_counter()
from orchestrator.analysis.readers import safe_pickle, torch_snapshot
from orchestrator.analysis.families import memory_use
data = safe_pickle.load(Path(sys.argv[1]))
t1 = time.perf_counter()
with safe_pickle.no_gc():
    tls = torch_snapshot.from_data(data)
del data
t2 = time.perf_counter()
uses = [memory_use.analyze(tl) for tl in tls]
t3 = time.perf_counter()
assert uses and uses[0].events > 0
print(t3 - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, t1 - t0, t2 - t1, t3 - t2,
      uses[0].events)
"""


def make(events: int, out: Path) -> None:
    """A snapshot of `events` events from the real recordings' (see the module docstring)."""
    with lzma.open(DATA / "leak" / "memory.rank0.pickle.xz") as fh:
        real = pickle.load(fh)  # our own recording: plain data
    trace = real["device_traces"][0]
    marks = real["gh_run"]["marks"]
    t0, t1 = trace[0]["time_us"], trace[-1]["time_us"]
    span = t1 - t0 + 1000
    copies = -(-events // len(trace))
    big: list[dict[str, Any]] = []
    out_marks = []
    for c in range(copies):
        shift_t, shift_a = c * span, c * (1 << 36)
        for e in trace:
            d = dict(e)  # frames stay the shared list of the original
            d["time_us"] = e["time_us"] + shift_t
            if "addr" in d:
                d["addr"] = e["addr"] + shift_a
            big.append(d)
            if len(big) == events:
                break
        out_marks += [[t + shift_t, k, v] for t, k, v in marks if k not in ("start", "exit")]
        if len(big) == events:
            break
    snap = dict(real)
    snap["device_traces"] = [big]
    snap["gh_run"] = dict(real["gh_run"], marks=out_marks)
    with open(out, "wb") as fh:
        pickle.dump(snap, fh, protocol=4)


def timed(code: str, *args: str) -> list[float]:
    res = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return [float(x) for x in res.stdout.split()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--snapshot", type=Path, default=None)
    p.add_argument("--runs", type=int, default=3)
    ns = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = ns.snapshot
        if path is None:
            path = Path(tmp) / "snapshot.pickle"
            make(ns.events, path)
        size = path.stat().st_size
        print(f"snapshot: {path.name}, {size / 2**20:.1f} MiB; load average {os.getloadavg()}")
        base = [timed(BASELINE, str(path)) for _ in range(ns.runs)]
        ours = [timed(GH_RUN, str(path), str(REPO)) for _ in range(ns.runs)]
    b_s = statistics.median(x[0] for x in base)
    b_mb = statistics.median(x[1] for x in base) / 2**20
    o_s = statistics.median(x[0] for x in ours)
    o_mb = statistics.median(x[1] for x in ours) / 2**20
    parts = [statistics.median(x[i] for x in ours) for i in (2, 3, 4)]
    print(f"pickle.load alone:  {b_s:6.2f} s  {b_mb:7.0f} MiB peak RSS   (runs: "
          + ", ".join(f"{x[0]:.2f}" for x in base) + ")")  # fmt: skip
    print(f"gh-run (all):       {o_s:6.2f} s  {o_mb:7.0f} MiB peak RSS   (runs: "
          + ", ".join(f"{x[0]:.2f}" for x in ours) + ")")  # fmt: skip
    print(f"  safe load {parts[0]:.2f} s, columns {parts[1]:.2f} s, analysis {parts[2]:.2f} s;"
          f" {int(ours[0][5]):,} events")  # fmt: skip
    print(f"ratio to pickle.load alone: time x{o_s / b_s:.2f}, memory x{o_mb / b_mb:.2f};"
          f" goal: <= 5 s and <= 1024 MiB")  # fmt: skip
    print(json.dumps({"events": int(ours[0][5]), "bytes": size, "pickle_s": b_s,
                      "pickle_mib": b_mb, "gh_run_s": o_s, "gh_run_mib": o_mb}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
