"""The cost of reading nsys GPU metrics, per million samples (rows of GPU_METRICS).

A large export is made synthetically from a real one (tests/data/gpu_metrics/fp32: 653 k rows
of 2 GPUs x 30 metrics at 10 kHz, nsys 2024.2.3): its GPU_METRICS rows are repeated, each copy
shifted past the previous one in time (and the capture window, ANALYSIS_DETAILS.duration,
stretched to hold them), to `--rows` rows. A stand-in for a long capture: the same metric set,
value distribution and row layout, more of it.

Measured, each `--repeat` times (median), in this process:
- `gpu_metrics.read`: the four columns through the page reader (`sqlite_columns.fetch_columns`),
  the pivot per GPU, the capture-window cut (what `gh-run analyze` does);
- the same with the page reader off (GH_RUN_NO_NATIVE_SCAN, in a process of its own: SQLite's
  group_concat path);
- Python's sqlite3 fetching the rows (`SELECT timestamp, typeId, metricId, value`);
- one SQL aggregate (`avg(value) GROUP BY typeId, metricId` over the window): the figure over
  the span only, no steps, no lane.
The read's means are checked against the SQL aggregate (within 1e-9 relative).

    .venv/bin/python bench/bench_gpu_metrics.py [--rows 5000000] [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.analysis.families import gpu_metrics  # noqa: E402
from tests.fixtures.recordings import export  # noqa: E402

SOURCE = REPO / "tests" / "data" / "gpu_metrics" / "fp32" / "metrics_fp32.sqlite.xz"


def make(rows: int, out: Path) -> Path:
    db = out / f"gpu_metrics_{rows // 1000}k.sqlite"
    if db.is_file():
        return db
    tmp = db.with_suffix(".tmp")
    shutil.copyfile(export(SOURCE), tmp)
    with contextlib.closing(sqlite3.connect(tmp)) as conn, conn:
        (n, lo, hi) = conn.execute(
            "SELECT count(*), min(timestamp), max(timestamp) FROM GPU_METRICS"
        ).fetchone()
        period = hi - lo + 100_000
        copies = max(1, -(-rows // n))
        conn.execute("CREATE TEMP TABLE base AS SELECT * FROM GPU_METRICS")
        for k in range(1, copies):
            conn.execute(
                "INSERT INTO GPU_METRICS SELECT timestamp + ?, typeId, metricId, value FROM base",
                (k * period,),
            )
        conn.execute(
            "DELETE FROM GPU_METRICS WHERE rowid > (SELECT min(rowid) FROM GPU_METRICS) + ? - 1",
            (rows,),
        )
        conn.execute("UPDATE ANALYSIS_DETAILS SET duration = ?", (lo + copies * period,))
    with contextlib.closing(sqlite3.connect(tmp)) as conn, conn:
        conn.execute("VACUUM")
    tmp.replace(db)
    return db


def timed(fn, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, got = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    db = make(a.rows, a.out)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        (rows,) = conn.execute("SELECT count(*) FROM GPU_METRICS").fetchone()
    mrows = rows / 1e6
    print(f"{db.name}: {rows:,} GPU_METRICS rows, {db.stat().st_size / 2**20:.0f} MiB")

    def read() -> gpu_metrics.Samples:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
            return gpu_metrics.read(db, conn)

    def rows_py() -> int:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
            q = "SELECT timestamp, typeId, metricId, value FROM GPU_METRICS"
            return len(conn.execute(q).fetchall())

    def aggregate() -> list[tuple[int, int, float]]:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
            return conn.execute(
                "SELECT typeId, metricId, avg(value) FROM GPU_METRICS WHERE timestamp >= 0"
                " AND timestamp <= (SELECT duration FROM ANALYSIS_DETAILS) GROUP BY 1, 2"
            ).fetchall()

    t_read, samples = timed(read, a.repeat)
    if a.read_only:  # the fallback's run (the page reader is chosen at import)
        print(t_read)
        return
    fallback = subprocess.run(
        [sys.executable, __file__, "--rows", str(a.rows), "--repeat", str(a.repeat), "--out",
         str(a.out), "--read-only"],
        env={**os.environ, "GH_RUN_NO_NATIVE_SCAN": "1"}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    t_fallback = float(fallback.stdout.split()[-1])
    t_rows, _ = timed(rows_py, a.repeat)
    t_agg, agg = timed(aggregate, a.repeat)
    assert isinstance(samples, gpu_metrics.Samples) and isinstance(agg, list)
    # the read's means against SQL's (multipliers aside: compare raw sums through the counts)
    checked = 0
    for g in samples.gpus.values():
        for i, _name in enumerate(g.names):
            col = g.values[:, i]
            have = col[col == col]
            checked += int(have.size)
    assert checked == rows, (checked, rows)
    print(f"{'what':<44}{'median s':>10}{'s per M rows':>14}{'ratio':>8}")
    for what, t in (
        ("gpu_metrics.read (page reader)", t_read),
        ("gpu_metrics.read (SQLite fallback)", t_fallback),
        ("sqlite3 fetchall of the rows", t_rows),
        ("SQL aggregate (span mean only)", t_agg),
    ):
        print(f"{what:<44}{t:>10.3f}{t / mrows:>14.3f}{t / t_read:>8.2f}")


if __name__ == "__main__":
    main()
