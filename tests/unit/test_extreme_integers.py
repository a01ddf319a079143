"""A real export with 64-bit extremes in its times and sizes (bench/hostile_columns.py --kinds
max,min found each): `analyze` reads the rest, leaves the rows out (a time beyond +-2**62 ns) or
reads the size as unknown (beyond 16 TiB, or negative), says so, and gives no figure that only an
int64 sum past 64 bits, or a span of 2**63 ns, can give. The rules are stated again here, not
imported: TIME_LIMIT and SIZE_LIMIT below are `sql_integers`' bounds."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import analyze_paths
from tests.fixtures.implausible import implausible

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "nsys_h100" / "baseline" / "baseline.sqlite"  # kernels, copies, memory events
MAX = 2**63 - 1
TIME_LIMIT = 2**62
SIZE_LIMIT = 2**44
PICKED = "rowid IN (SELECT rowid FROM {t} ORDER BY rowid LIMIT 5 OFFSET 7)"


def _analysed(path: Path) -> dict[str, Any]:
    return analyze_paths([path]).model_dump(mode="json")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def clean() -> dict[str, Any]:
    return _analysed(EXPORT)


def _copy(tmp_path: Path, table: str, column: str, value: int) -> Path:
    path = tmp_path / EXPORT.name
    shutil.copyfile(EXPORT, path)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(f'UPDATE {table} SET "{column}" = ? WHERE {PICKED.format(t=table)}', (value,))
    return path


def _count(path: Path, sql: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute(sql).fetchone()[0])


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "end", MAX),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "end", TIME_LIMIT),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start", -MAX),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "start", -MAX),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "end", MAX),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "end", MAX),
        ("NVTX_EVENTS", "end", MAX),
        ("OSRT_API", "start", -MAX),
    ],
)
def test_a_time_no_clock_gives_leaves_its_row_out(
    tmp_path: Path, clean: dict[str, Any], table: str, column: str, value: int
) -> None:
    path = _copy(tmp_path, table, column, value)
    got = _analysed(path)
    assert implausible(got) is None
    rank, was = got["ranks"][0], clean["ranks"][0]
    # the GPU's rows: the others read as before, five fewer of the table's
    kernels = sum(k["count"] for k in rank["top_kernels"])
    if table == "CUPTI_ACTIVITY_KIND_KERNEL":
        notes = got["sources"][0]["notes"]
        assert any(f"5 rows of {table} left out" in n for n in notes), notes
        assert 0 < rank["busy_ns"] <= was["busy_ns"]
    else:
        assert kernels == sum(k["count"] for k in was["top_kernels"])
    assert 0 <= rank["span_start_ns"] <= rank["span_end_ns"] < TIME_LIMIT


@pytest.mark.parametrize(
    ("table", "value"),
    [
        ("CUPTI_ACTIVITY_KIND_MEMCPY", MAX),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", -MAX),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", SIZE_LIMIT),
        ("CUPTI_ACTIVITY_KIND_MEMSET", MAX),
        ("CUDA_GPU_MEMORY_USAGE_EVENTS", MAX),
        ("CUDA_GPU_MEMORY_USAGE_EVENTS", -MAX),
    ],
)
def test_a_size_no_machine_holds_reads_as_unknown(
    tmp_path: Path, clean: dict[str, Any], table: str, value: int
) -> None:
    path = _copy(tmp_path, table, "bytes", value)
    got = _analysed(path)
    assert implausible(got) is None
    rank, was = got["ranks"][0], clean["ranks"][0]
    # the copy or memset itself stays: its time is the GPU's
    assert rank["busy_ns"] == was["busy_ns"]
    copied = sum(c["bytes"] for c in rank["copies"])
    assert 0 <= copied <= sum(c["bytes"] for c in was["copies"])
    assert 0 < rank["peak_gpu_memory_bytes"] < SIZE_LIMIT
    if table == "CUDA_GPU_MEMORY_USAGE_EVENTS":
        # five allocations or frees fewer: the peak moves by at most their sizes
        moved = _count(
            EXPORT,
            f"SELECT sum(bytes) FROM {table} WHERE {PICKED.format(t=table)}",
        )
        assert abs(rank["peak_gpu_memory_bytes"] - was["peak_gpu_memory_bytes"]) <= moved
