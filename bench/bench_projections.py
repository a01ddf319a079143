"""What the projections cost (issue 41 item 5): the time `critical_path.build` and
`critical_path.project` take inside one `analyze` of the 5 M-kernel export, against that
analyze's whole time, measured in the same run (in this process, one worker, so that the two
clocks see the same work and the same machine load). Nothing here asserts a timing; it prints
the figures and the ratio (the goal: projections <= 5 % of analyze).

    .venv/bin/python bench/bench_projections.py [--sqlite FILE] [--repeat N]

FILE defaults to bench/out/long.sqlite (bench/gen_nsys.py: 5 M kernels, 1 M copies), made
first where it is missing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _timed(fn: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            spent.append(time.perf_counter() - t)

    return wrapper


def one(path: Path) -> tuple[float, float, float, int]:
    """(analyze s, build s, project s, ops replayed) of one analyze of `path`."""
    from orchestrator.analysis import loader
    from orchestrator.analysis.families import critical_path

    built: list[float] = []
    projected: list[float] = []
    ops: list[int] = []
    build, project = critical_path.build, critical_path.project

    def counting_build(*a: Any, **k: Any) -> Any:
        g = build(*a, **k)
        ops.append(0 if g is None else int(g.start.size))
        return g

    critical_path.build = _timed(counting_build, built)  # type: ignore[assignment]
    critical_path.project = _timed(project, projected)  # type: ignore[assignment]
    try:
        t = time.perf_counter()
        loader.analyze_paths([path], use_records=False, jobs=1)
        total = time.perf_counter() - t
    finally:
        critical_path.build, critical_path.project = build, project  # type: ignore[assignment]
    return total, sum(built), sum(projected), sum(ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sqlite", type=Path, default=REPO / "bench" / "out" / "long.sqlite")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if not a.sqlite.is_file():
        a.sqlite.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_nsys.py"), str(a.sqlite)],
                       check=True)  # fmt: skip
    rows = [one(a.sqlite) for _ in range(a.repeat)]
    for total, b, p, n in rows:
        print(
            f"analyze {total:8.2f} s   projections {b + p:6.2f} s (build {b:.2f}, replays"
            f" {p:.2f}; {n:,} ops)   ratio {100 * (b + p) / total:5.2f} %"
        )
    if len(rows) > 1:
        ratios = [100 * (b + p) / t for t, b, p, _ in rows]
        print(f"median ratio {statistics.median(ratios):.2f} % over {len(rows)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
