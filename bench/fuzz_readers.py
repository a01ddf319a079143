"""The long fuzz loop of both trace readers against their reference readers (issue 26): random
byte and structure mutations of real exports and traces (tests/fixtures/reader_fuzz.py), each
read with and without the compiled parts. Prints how many mutations ended the same as the
reference, refused (a sentence, allowed) or as a silent difference (must be 0), and stops with
exit 1 at the first difference, keeping the file under bench/out/fuzz/ for a test.

    .venv/bin/python bench/fuzz_readers.py [--seconds 600] [--seed 1] [--only nsys|kineto]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import random
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures import reader_fuzz as F  # noqa: E402
from tests.fixtures import sqlite_btree as SB  # noqa: E402

DATA = ROOT / "tests" / "data"
OUT = ROOT / "bench" / "out" / "fuzz"


def nsys_sources() -> list[Path]:
    """Real exports with a kernel table, and a built one with small pages (a deep tree)."""
    out = [p for p in sorted(DATA.glob("**/*.sqlite")) if _has_kernels(p)]
    return out


def _has_kernels(p: Path) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{p}?mode=ro", uri=True)) as db, db:
            return bool(db.execute(f"SELECT count(*) FROM {F.KERNEL}").fetchone()[0])
    except sqlite3.Error:
        return False


def kineto_sources() -> list[Path]:
    return sorted(DATA.glob("traces/*/*.json.gz")) + sorted(DATA.glob("public_traces/*/*.json.gz"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["nsys", "kineto"], default=None)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(args.seed)
    readers = [r for r in ("nsys", "kineto") if args.only in (None, r)]
    sources = {"nsys": nsys_sources(), "kineto": kineto_sources()}
    raw = {
        "nsys": {p: p.read_bytes() for p in sources["nsys"]},
        "kineto": {p: gzip.decompress(p.read_bytes()) for p in sources["kineto"]},
    }
    roots = {p: SB.root_of(p, F.KERNEL) for p in sources["nsys"]}
    counts: dict[str, Counter[str]] = {r: Counter() for r in readers}
    end = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < end:
        reader = readers[i % len(readers)]
        i += 1
        src = rnd.choice(sources[reader])
        case = OUT / ("case.sqlite" if reader == "nsys" else "case.json")
        for side in ("-journal", "-wal"):
            Path(f"{case}{side}").unlink(missing_ok=True)
        if reader == "nsys":
            case.write_bytes(F.nsys_mutate(raw["nsys"][src], roots[src], rnd))
            outcome, detail = F.nsys_case(case, step=rnd.choice([64, 500, 4096]))
        else:
            case.write_bytes(F.kineto_mutate(raw["kineto"][src], rnd))
            outcome, detail = F.kineto_case(case)
        counts[reader][outcome] += 1
        if outcome == F.DIFF:
            keep = OUT / f"diff-{reader}-{i}{case.suffix}"
            case.rename(keep)
            print(f"SILENT DIFFERENCE ({reader}, from {src.name}): {detail}; kept as {keep}")
            break
    for reader in readers:
        c = counts[reader]
        total = sum(c.values())
        print(
            f"{reader}: {total} mutations: {c[F.SAME]} read as the reference reads them,"
            f" {c[F.REFUSED]} refused in one sentence, {c[F.DIFF]} silent differences"
        )
    return 1 if any(c[F.DIFF] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
