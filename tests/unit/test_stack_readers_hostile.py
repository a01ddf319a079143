"""The readers of CPU samples, OS-runtime stacks and pageable copies on an export whose cells
hold a value of another kind (text, NULL, a fraction, a blob) where nsys writes an integer.

Before, such a cell stopped `analyze` with "internal error: ValueError: invalid literal for
int()" (a text symbol id in SAMPLING_CALLCHAINS, a text globalTid in COMPOSITE_EVENTS, a text
callchain id in OSRT_API). Now each reads as a reference made with plain SQL reads: a row whose
id, time or thread is not an integer is left out (the export without that row), a frame whose
symbol or module is not one reads as unknown (the id -1, which no string has), and a call whose
callchain id is not one has no stack (the id 0); a copy whose size or process is not one has
size 0 or no process. The exports are real ones: tests/data/unannotated/nsys/sft_w0 (samples
and stacks; data loading on the main thread) and tests/data/causes_h200/img_pageable (pageable
copies), both recorded on an H200.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.readers import cpu_samples, osrt_stacks, pageable_copies
from tests.fixtures.recordings import export

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "unannotated" / "nsys" / "sft_w0"
# pageable host-device copies (tests/data/causes_h200/README.md: a torchvision-style loop)
PAGEABLE = DATA / "causes_h200" / "img_pageable" / "img_pageable.sqlite.xz"
OTHER_KINDS = ["'x'", "NULL", "1.5", "x'00'"]
PICKED = "rowid % 5 = 0"  # about a fifth of the rows, all through the capture


@pytest.fixture(scope="module")
def clean() -> Path:
    return export(EXPORT / "sft_w0.sqlite.xz")


def _variant(clean: Path, folder: Path, name: str, sql: str, loose: str | None = None) -> str:
    """A copy of the export changed by `sql`; `loose`: a table first made again without its
    column types and constraints (CREATE TABLE AS), as a hostile export may hold it, so that
    any value fits any of its columns."""
    out = folder / f"{name}.sqlite"
    shutil.copyfile(clean, out)
    with contextlib.closing(sqlite3.connect(out)) as db, db:
        if loose:
            db.execute(f"CREATE TABLE loose AS SELECT rowid AS rid, * FROM {loose} ORDER BY rowid")
            db.execute(f"DROP TABLE {loose}")
            db.execute(f"ALTER TABLE loose RENAME TO {loose}")
        db.execute(sql.replace("rowid", "rid") if loose else sql)
    return str(out)


def _differs(a: Any, b: Any) -> bool:
    return any(
        not np.array_equal(x, y) if isinstance(y, np.ndarray) else x != y
        for x, y in ((getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(b))
    )


def _span(path: Path) -> tuple[Any, Any]:
    """One window over every sample and OS-runtime call of the export, and a second after."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        spans = db.execute(
            "SELECT min(start), max(start) FROM COMPOSITE_EVENTS UNION ALL "
            'SELECT min(start), max("end") FROM OSRT_API'
        ).fetchall()
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    return np.array([lo], dtype=np.int64), np.array([hi + 10**9], dtype=np.int64)


def _threads(path: Path) -> set[tuple[int, int]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT DISTINCT globalTid FROM OSRT_API").fetchall()
    return {((g >> 24) & 0xFFFFFF, g & 0xFFFFFF) for (g,) in rows}


def _same(got: Any, want: Any) -> None:
    assert got is not None and want is not None
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, np.ndarray):
            assert np.array_equal(a, b), f.name
        else:
            assert a == b, f.name


@pytest.mark.parametrize("kind", OTHER_KINDS)
@pytest.mark.parametrize(
    ("column", "reference"),
    [  # (its id is the table's INTEGER PRIMARY KEY: SQLite holds nothing else there)
        ("start", "DELETE FROM COMPOSITE_EVENTS WHERE {picked}"),
        ("globalTid", "DELETE FROM COMPOSITE_EVENTS WHERE {picked}"),
    ],
)
def test_a_sample_of_another_kind_is_left_out(
    clean: Path, tmp_path: Path, kind: str, column: str, reference: str
) -> None:
    starts, ends = _span(clean)
    bad = _variant(clean, tmp_path, "bad", f"UPDATE COMPOSITE_EVENTS SET {column} = {kind} "
                   f"WHERE {PICKED}", loose="COMPOSITE_EVENTS")  # fmt: skip
    ref = _variant(clean, tmp_path, "ref", reference.format(picked=PICKED))
    want = cpu_samples.read(ref, starts, ends)
    assert want is not None and want.start.size > 100  # the samples this checks
    _same(cpu_samples.read(bad, starts, ends), want)


@pytest.mark.parametrize("kind", OTHER_KINDS)
@pytest.mark.parametrize("column", ["symbol", "module"])
def test_a_frame_of_another_kind_reads_as_unknown(
    clean: Path, tmp_path: Path, kind: str, column: str
) -> None:
    starts, ends = _span(clean)
    bad = _variant(clean, tmp_path, "bad", f"UPDATE SAMPLING_CALLCHAINS SET {column} = {kind} "
                   f"WHERE {PICKED}", loose="SAMPLING_CALLCHAINS")  # fmt: skip
    ref = _variant(clean, tmp_path, "ref", f"UPDATE SAMPLING_CALLCHAINS SET {column} = -1 "
                   f"WHERE {PICKED}")  # fmt: skip
    want = cpu_samples.read(ref, starts, ends)
    assert want is not None and _differs(want, cpu_samples.read(str(clean), starts, ends))
    _same(cpu_samples.read(bad, starts, ends), want)


@pytest.mark.parametrize("kind", OTHER_KINDS)
@pytest.mark.parametrize(
    ("table", "column", "reference"),
    [
        ("OSRT_API", "start", "DELETE FROM OSRT_API WHERE {picked}"),
        ("OSRT_API", "globalTid", "DELETE FROM OSRT_API WHERE {picked}"),
        ("OSRT_API", "callchainId", "UPDATE OSRT_API SET callchainId = 0 WHERE {picked}"),
        ("OSRT_CALLCHAINS", "symbol", "UPDATE OSRT_CALLCHAINS SET symbol = -1 WHERE {picked}"),
        ("OSRT_CALLCHAINS", "module", "UPDATE OSRT_CALLCHAINS SET module = -1 WHERE {picked}"),
    ],
)
def test_an_os_runtime_call_of_another_kind_reads_as_sql_says(
    clean: Path, tmp_path: Path, kind: str, table: str, column: str, reference: str
) -> None:
    starts, ends = _span(clean)
    threads = _threads(clean)
    bad = _variant(clean, tmp_path, "bad", f"UPDATE {table} SET {column} = {kind} "
                   f"WHERE {PICKED}", loose=table)  # fmt: skip
    ref = _variant(clean, tmp_path, "ref", reference.format(picked=PICKED))
    want = osrt_stacks.read(ref, starts, ends, threads)
    assert want is not None and want.start.size > 10  # the calls this checks
    _same(osrt_stacks.read(bad, starts, ends, threads), want)


def test_analyze_reads_such_an_export_to_the_end(clean: Path, tmp_path: Path) -> None:
    bad = _variant(clean, tmp_path, "bad", f"UPDATE SAMPLING_CALLCHAINS SET symbol = 'x' "
                   f"WHERE {PICKED}")  # fmt: skip
    with contextlib.closing(sqlite3.connect(bad)) as db, db:
        db.execute(f"UPDATE OSRT_API SET callchainId = 'x' WHERE {PICKED}")
        db.execute(f"UPDATE COMPOSITE_EVENTS SET globalTid = 'x' WHERE {PICKED}")
    metrics = analyze_paths([bad])
    assert metrics.ranks[0].steps.count > 0


MEMCPY, RUNTIME = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"


@pytest.mark.parametrize("kind", OTHER_KINDS)
@pytest.mark.parametrize(
    ("table", "column", "reference"),
    [
        (MEMCPY, "start", f"DELETE FROM {MEMCPY} WHERE {{picked}}"),
        (MEMCPY, '"end"', f"DELETE FROM {MEMCPY} WHERE {{picked}}"),
        (MEMCPY, "correlationId", f"DELETE FROM {MEMCPY} WHERE {{picked}}"),
        (MEMCPY, "bytes", f"UPDATE {MEMCPY} SET bytes = 0 WHERE {{picked}}"),
        (MEMCPY, "globalPid", f"UPDATE {MEMCPY} SET globalPid = NULL WHERE {{picked}}"),
        (RUNTIME, "start", f"DELETE FROM {RUNTIME} WHERE {{picked}}"),
        (RUNTIME, "globalTid", f"DELETE FROM {RUNTIME} WHERE {{picked}}"),
    ],
)
def test_a_copy_of_another_kind_reads_as_sql_says(
    tmp_path: Path, kind: str, table: str, column: str, reference: str
) -> None:
    clean = export(PAGEABLE)
    lo, hi = 0, 2**62
    picked = "rowid % 3 = 0" if table == MEMCPY else PICKED
    bad = _variant(clean, tmp_path, "bad", f"UPDATE {table} SET {column} = {kind} "
                   f"WHERE {picked}", loose=table)  # fmt: skip
    ref = _variant(clean, tmp_path, "ref", reference.format(picked=picked), loose=table)
    want = pageable_copies.read(ref, lo, hi)
    assert want is not None and want.start.size > 3  # the copies this checks
    _same(pageable_copies.read(bad, lo, hi), want)
