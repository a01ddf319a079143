"""Every column of every table of real nsys exports, set in turn to a value of another kind in a
seventh of its rows, each copy analysed: which columns make `analyze` raise (docs/reliability.md,
"CPU samples and OS-runtime stacks"), or give a number no analysis of these exports holds
(tests/fixtures/implausible.py: an int64 sum that wrapped, a peak of 2**63 bytes). A refusal in
one sentence (gh-run's own error) is fine; any other exception is a finding. Tables that will not
hold the value (NOT NULL, INTEGER PRIMARY KEY) are made again without their constraints first,
as a hostile file may hold them.

    .venv/bin/python bench/hostile_columns.py tests/data/unannotated/nsys/sft_w0/sft_w0.sqlite.xz
    .venv/bin/python bench/hostile_columns.py EXPORT... --kinds text,null,real
    .venv/bin/python bench/hostile_columns.py EXPORT... --kinds max,min

Prints each raising (or implausible) column and, per export and kind, how many columns were
probed; exits 1 when any raised. About 1 s a column on this machine's two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import lzma
import shutil
import sqlite3
import sys
import tempfile
import traceback
from pathlib import Path

from orchestrator.analysis import analyze_paths
from orchestrator.core.errors import GhRunError
from tests.fixtures.implausible import implausible

KINDS = {
    "text": "'x'",
    "null": "NULL",
    "real": "1.5",
    "blob": "x'00'",
    # the extremes of a 64-bit integer: a sum or a difference of two overflows in numpy
    "max": "9223372036854775807",
    "min": "-9223372036854775807",
}
# what the file says it was run with (a DataLoader's workers from the captured command), echoed
ECHOED = ("settings.",)
# the enums gh-run reads; the others only name things no reader looks up
ENUMS_READ = {
    "ENUM_CUDA_MEM_KIND",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE",
    "ENUM_CUPTI_SYNC_TYPE",
    "ENUM_CUDA_UNIF_MEM_MIGRATION",
    "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_NSYS_EVENT_TYPE",
}
PICKED = "rowid IN (SELECT rowid FROM {t} WHERE rowid % 7 = 3 LIMIT 20)"


def columns(export: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(export)) as db:
        names = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = []
        for t in names:
            if t.startswith("ENUM_") and t not in ENUMS_READ:
                continue
            if db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]:
                out += [(t, r[1]) for r in db.execute(f'PRAGMA table_info("{t}")')]
    return out


def hostile_copy(export: Path, out: Path, table: str, column: str, value: str) -> None:
    shutil.copyfile(export, out)
    with contextlib.closing(sqlite3.connect(out)) as db, db:
        update = f'UPDATE "{table}" SET "{column}" = {value} WHERE ' + PICKED.format(t=f'"{table}"')
        try:
            db.execute(update)
        except sqlite3.Error:  # a constraint: the table again without any
            db.execute(f'CREATE TABLE loose AS SELECT * FROM "{table}" ORDER BY rowid')
            db.execute(f'DROP TABLE "{table}"')
            db.execute(f'ALTER TABLE loose RENAME TO "{table}"')
            db.execute(update)


def probe(export: Path, kind: str, work: Path) -> int:
    raised = 0
    cols = columns(export)
    for i, (table, column) in enumerate(cols):
        case = work / f"{kind}-{i}.sqlite"
        hostile_copy(export, case, table, column, KINDS[kind])
        try:
            result = analyze_paths([case]).model_dump(mode="json")
        except GhRunError:
            result = None
        except Exception as exc:  # the finding: anything but gh-run's own sentence
            result = None
            raised += 1
            where = traceback.extract_tb(exc.__traceback__)[-1]
            print(
                f"  {table}.{column} = {kind}: {type(exc).__name__}: {str(exc)[:100]} "
                f"({Path(where.filename).name}:{where.lineno})",
                flush=True,
            )
        if result is not None and (odd := implausible(result, ECHOED)):
            raised += 1
            print(f"  {table}.{column} = {kind}: {odd}", flush=True)
        case.unlink()
    print(f"{export.name}, {kind}: {len(cols)} columns, {raised} raised or implausible", flush=True)
    return raised


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exports", nargs="+", type=Path, help="nsys .sqlite exports (or .xz)")
    parser.add_argument("--kinds", default="text,null", help=f"of {', '.join(KINDS)}")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := [k for k in kinds if k not in KINDS]:
        parser.error(f"--kinds {unknown[0]}: use some of {', '.join(KINDS)}")
    raised = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for given in args.exports:
            export = given
            if given.suffix == ".xz":
                export = work / given.name[: -len(".xz")]
                with lzma.open(given) as src, export.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            for kind in kinds:
                raised += probe(export, kind, work)
    return 1 if raised else 0


if __name__ == "__main__":
    sys.exit(main())
