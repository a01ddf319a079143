"""Cut a PyTorch-profiler (Kineto) trace to a few of its steps, for test data small enough to
commit (tests/data/heldout_h200/kineto/): the events of `--steps` consecutive `ProfilerStep#N`
spans from `--first` on (by the order of their starts), every event of any thread or stream
that starts inside them, every metadata event, the trace's other top-level keys as they are but
`traceName` (the path of the file the profiler wrote, on the machine that recorded it: the
trimmed file's own name instead); written xz-compressed (`NAME.json.xz`, which
tests/fixtures/recordings.py unpacks).

GPU work launched in the last kept step but run after its end is kept up to the start of the
step after it (or the trace's end): a step's own kernels stay with it.

    python3 bench/trim_kineto_trace.py TRACE.json.gz OUT.json.xz --first 2 --steps 4
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import sys
from pathlib import Path
from typing import Any


def trim(doc: dict[str, Any], first: int, steps: int) -> dict[str, Any]:
    events = doc["traceEvents"]
    marks = (
        sorted(  # the host's step spans (the GPU's copies of them, `gpu_user_annotation`, aside)
            (
                e
                for e in events
                if str(e.get("name", "")).startswith("ProfilerStep#")
                and e.get("cat") == "user_annotation"
            ),
            key=lambda e: float(e["ts"]),
        )
    )
    if len(marks) < first + steps:
        raise SystemExit(
            f"the trace has {len(marks)} ProfilerStep spans, fewer than {first + steps}"
        )
    lo = float(marks[first]["ts"])
    last = marks[first + steps - 1]
    nxt = marks[first + steps] if first + steps < len(marks) else None
    hi = float(nxt["ts"]) if nxt else float(last["ts"]) + float(last.get("dur", 0)) * 2
    kept = [e for e in events if "ts" not in e or e.get("ph") == "M" or lo <= float(e["ts"]) < hi]
    return {**doc, "traceEvents": kept}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument(
        "--first", type=int, default=2, help="the first step kept (0: the trace's first)"
    )
    p.add_argument("--steps", type=int, default=4)
    a = p.parse_args()
    src = Path(a.trace)
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        doc = json.load(f)
    out = trim(doc, a.first, a.steps)
    if "traceName" in out:
        out["traceName"] = Path(a.out).name.removesuffix(".xz")
    with lzma.open(a.out, "wt", preset=9) as f:
        json.dump(out, f, separators=(",", ":"))
    print(
        f"{a.out}: {len(out['traceEvents'])} of {len(doc['traceEvents'])} events", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
