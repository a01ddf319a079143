"""What the guards of issue 42 cost `gh-run analyze`: this tree against an earlier gh-run (a
checkout: `git archive main | tar -x -C DIR`), interleaved run by run so both meet the same load
on this shared machine. Wall time, CPU time (user + system, workers included) and peak RSS of
`python -m orchestrator.analysis analyze PATH --json` (bench/bench_analyze.py's `run`).

1. The 5 M-kernel stand-in export alone (bench/gen_nsys.py: bench/out/long.sqlite).
2. The same export with its record beside it (`<report>.gh-run.json`, as a job writes it):
   the baseline takes the record when the report's size matches; this tree checks the report's
   sha256, cold (an empty hash cache: the report read whole) and warm (the cached answer).
3. A folder of 64 small stand-in exports, each with its record (as `analyze --on-cluster`'s
   reduce or a campaign reads them): baseline, this tree cold, this tree warm.
4. The same 64 records with their reports left on the cluster (absent here).

The machine's load average is printed before and after: other engineers share its cores.
Nothing here asserts a timing.

    .venv/bin/python bench/bench_guards.py --baseline DIR [--runs 3] [--sqlite FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_analyze import Run, analyze_cmd, run  # noqa: E402

OUT = ROOT / "bench" / "out"
SMALL_KERNELS = 20_000


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def _write_records(paths: list[Path]) -> None:
    """Records written by this tree (the format both read: gh-run.report-analysis/2)."""
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "analyze", "--write-records", *map(str, paths)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def _small_folder(folder: Path) -> Path:
    """64 stand-in exports of 20,000 kernels each (one seed each: 64 ranks of one job), each
    with its record."""
    if (folder / "done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for r in range(64):
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gen_nsys.py"), str(folder / f"rank{r}.sqlite"),
             "--kernels", str(SMALL_KERNELS), "--copies", str(SMALL_KERNELS // 5),
             "--memsets", "200", "--seed", str(r + 1)],
            check=True, capture_output=True,
        )  # fmt: skip
    _write_records(sorted(folder.glob("rank*.sqlite")))
    (folder / "done").write_text("")
    return folder


def _case(
    title: str, path: Path, trees: dict[str, tuple[Path, bool]], runs: int
) -> dict[str, tuple[float, float, float]]:
    """`runs` interleaved runs of each tree; (median wall, median CPU, peak RSS) per tree.
    `trees`: label -> (checkout, cold hash cache)."""
    print(f"{title}  [{_load()}]")
    got: dict[str, list[Run]] = {k: [] for k in trees}
    for i in range(runs):
        for label, (tree, cold) in trees.items():
            cache = Path(tempfile.mkdtemp(prefix="gh-run-bench-cache.")) if cold else None
            env = {"XDG_CACHE_HOME": str(cache)} if cache else None
            r = run(analyze_cmd(path), tree, env)
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
            got[label].append(r)
            status = "ok" if r.ok else f"FAILED {r.err!r}"
            print(
                f"  {label} run {i + 1}: wall {r.wall:.2f} s, CPU {r.cpu:.2f} s,"
                f" peak RSS {r.rss_mib:.0f} MiB [{status}]"
            )
    med = {}
    for label, rs in got.items():
        med[label] = (
            statistics.median(r.wall for r in rs),
            statistics.median(r.cpu for r in rs),
            max(r.rss_mib for r in rs),
        )
        w, c, m = med[label]
        print(f"  {label}: median wall {w:.2f} s, CPU {c:.2f} s, peak RSS {m:.0f} MiB")
    base = med.get("baseline")
    if base:
        for label, (w, c, m) in med.items():
            if label != "baseline":
                print(
                    f"  {label} / baseline: wall x{w / base[0]:.2f}, CPU x{c / base[1]:.2f},"
                    f" RSS x{m / base[2]:.2f}"
                )
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="an earlier gh-run checkout")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sqlite", type=Path, default=OUT / "long.sqlite")
    ap.add_argument("--skip", nargs="*", default=[], choices=["long", "long-record", "64"])
    args = ap.parse_args()
    print(f"start: {_load()}")
    both = {"baseline": (args.baseline, False), "this tree": (ROOT, False)}
    if "long" not in args.skip:
        alone = OUT / "guards-long"
        alone.mkdir(parents=True, exist_ok=True)
        export = alone / "long.sqlite"
        if not export.exists():
            os.link(args.sqlite, export)
        for f in alone.glob("*.gh-run.json"):
            f.unlink()
        _case(f"1. {export.name} (5 M kernels, no record)", export, both, args.runs)
    if "long-record" not in args.skip:
        beside = OUT / "guards-long-record"
        beside.mkdir(parents=True, exist_ok=True)
        export = beside / "long.sqlite"
        if not export.exists():
            os.link(args.sqlite, export)
        if not (beside / "long.sqlite.gh-run.json").exists():
            _write_records([export])
        trees = {**both, "this tree, cold cache": (ROOT, True)}
        trees["this tree"] = (ROOT, False)  # warm: the record's writing cached the sha256
        _case(f"2. {export.name} with its record beside it", export, trees, args.runs)
    if "64" not in args.skip:
        folder = _small_folder(OUT / "guards-64")
        trees = {**both, "this tree, cold cache": (ROOT, True)}
        _case("3. a folder of 64 exports, each with its record", folder, trees, args.runs)
        alone = OUT / "guards-64-records"
        shutil.rmtree(alone, ignore_errors=True)
        alone.mkdir()
        for rec in folder.glob("*.gh-run.json"):
            shutil.copyfile(rec, alone / rec.name)
        _case("4. the 64 records alone (reports left on the cluster)", alone, both, args.runs)
    print(f"end: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
