"""Write the Kineto traces of a data-parallel job (stand-ins, tests/fixtures/kineto_builder.py):
N ranks, NCCL all-reduce buckets overlapping backward compute, one final all-reduce per step,
libkineto's text layout (so `gh-run analyze` takes its fast path and HTA reads them too).

    .venv/bin/python bench/gen_kineto.py OUT_DIR [--ranks 8] [--kernels 500000]
        [--kernels-per-step 500] [--straggler R] [--gzip]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.kineto_builder import write_ddp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=500_000, help="compute kernels per rank")
    ap.add_argument("--kernels-per-step", type=int, default=500)
    ap.add_argument("--straggler", type=int, default=None)
    ap.add_argument("--straggle-us", type=float, default=2000.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gzip", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    steps = max(1, args.kernels // args.kernels_per_step)
    name = "rank{rank}.pt.trace.json" + (".gz" if args.gzip else "")
    paths = write_ddp(
        args.out,
        args.ranks,
        steps,
        args.kernels_per_step,
        seed=args.seed,
        straggler=args.straggler,
        straggle_us=args.straggle_us,
        name=name,
    )
    size = sum(p.stat().st_size for p in paths) / 2**20
    print(
        f"wrote {len(paths)} traces to {args.out}: {steps} steps x {args.kernels_per_step} kernels"
        f" per rank, {size:.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
