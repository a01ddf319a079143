"""bf16 autocast's effect class by class, read from a pair of traces (docs/metrics.md, "bf16
autocast, class by class"): the same workload in fp32 and in bf16 autocast, each trace's kernel
time split into fp32 GEMMs, fp32 fused attention, tensor-core GEMMs, 16-bit attention and the
rest (`kernel_classes.gemm_precision`, `attention_precision`), per step (gh-run's own step
count of each trace), and the ratios the projection assumes (critical_path.AUTOCAST_X): fp32
GEMMs against the bf16 run's tensor-core GEMMs, fp32 attention against its 16-bit attention,
the rest against the rest (autocast's casts included). Prints; asserts nothing.

    .venv/bin/python bench/autocast_classes.py FP32_TRACE BF16_TRACE

A trace is an nsys SQLite export (.sqlite, or a folder holding one) or a PyTorch-profiler
Chrome trace (.json, .json.gz, .json.xz), or a test-data folder of either. The first ratio
sets the fp32 run's fp32 GEMMs against every tensor-core GEMM of the bf16 run: where the fp32
run has TF32 GEMMs or convolutions already (its "tensor-core GEMMs" row), read it with them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import sqlite3
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.analysis.families.kernel_classes import (  # noqa: E402
    attention_precision,
    gemm_precision,
)
from orchestrator.analysis.loader import analyze_paths  # noqa: E402

CLASSES = ("fp32 GEMMs", "fp32 attention", "tensor-core GEMMs", "16-bit attention", "the rest")


def _class(name: str) -> str:
    g, a = gemm_precision(name), attention_precision(name)
    if g == "fp32":
        return "fp32 GEMMs"
    if g == "tensor-core":
        return "tensor-core GEMMs"
    if a == "fp32":
        return "fp32 attention"
    if a == "low":
        return "16-bit attention"
    return "the rest"


def _kernels(path: Path) -> list[tuple[str, int]]:
    """(name, ns) of every kernel in the trace."""
    if path.suffix == ".sqlite":
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k"
                " JOIN StringIds s ON s.id = COALESCE(k.demangledName, k.shortName)"
            ).fetchall()
        return [(str(n), int(d)) for n, d in rows]
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [(str(e["name"]), int(1000 * e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") == "kernel"]  # fmt: skip


def _trace(arg: str) -> tuple[Path, Path]:
    """(what gh-run analyses, the trace file): a test-data folder is unpacked first."""
    p = Path(arg)
    if p.is_dir():
        from tests.fixtures.recordings import unpacked

        p = unpacked(p) if any(p.glob("*.xz")) else p
        found = sorted(p.glob("*.sqlite")) or sorted(p.glob("*trace.json*"))
        if not found:
            raise SystemExit(f"{arg}: no .sqlite or trace JSON in it")
        return p, found[0]
    return p, p


def per_step(arg: str) -> Counter[str]:
    analysed, trace = _trace(arg)
    steps = analyze_paths([analysed]).ranks[0].steps
    n = steps.count if steps is not None and steps.count else 1
    by: Counter[str] = Counter()
    for name, ns in _kernels(trace):
        by[_class(name)] += ns
    return Counter({k: v / n / 1e6 for k, v in by.items()})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("fp32")
    p.add_argument("bf16")
    a = p.parse_args()
    f, b = per_step(a.fp32), per_step(a.bf16)
    print(f"{'ms a step':<20}{'fp32 run':>10}{'bf16 run':>10}")
    for c in CLASSES:
        print(f"{c:<20}{f[c]:>10.2f}{b[c]:>10.2f}")
    # (what the ratio is of, the fp32 run's class, the bf16 run's): a TF32 GEMM of the fp32
    # run counts on neither side of the first, as autocast moves it to bf16 too
    pairs = (("fp32 GEMMs", "fp32 GEMMs", "tensor-core GEMMs"),
             ("fp32 attention", "fp32 attention", "16-bit attention"),
             ("the rest", "the rest", "the rest"))  # fmt: skip
    for label, before, after in pairs:
        if f[before] and b[after]:
            print(f"{label}: {f[before] / b[after]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
