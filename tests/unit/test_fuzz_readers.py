"""Both trace readers against their reference readers on random mutations of real files (issue
26): the nsys reader (page reader and SQLite's path, in parts as `analyze` reads) against
SQLite's own scan of the kernel table; the Kineto reader (compiled scan and orjson) against
Python's json. Every case reads as the reference reads it, or is refused in one sentence: never
a silent difference. Bounded here; bench/fuzz_readers.py runs the same cases for as long as it
is given (docs/reliability.md has its figures)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.fixtures import reader_fuzz as F
from tests.fixtures import sqlite_btree as SB

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "nsys_h100" / "baseline" / "baseline.sqlite"
TRACES = [
    DATA / "traces" / "baseline" / "sft_rank0.pt.trace.json.gz",
    *sorted((DATA / "public_traces" / "hta").glob("critical_path_simple_add_*.json.gz")),
]


@pytest.fixture(scope="module")
def export_bytes() -> tuple[bytes, int]:
    return EXPORT.read_bytes(), SB.root_of(EXPORT, F.KERNEL)


def test_the_unmutated_files_read_as_the_references_read_them() -> None:
    assert len(TRACES) == 2
    assert F.nsys_case(EXPORT) == (F.SAME, "")
    for t in TRACES:
        assert F.kineto_case(t) == (F.SAME, "")


SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1), step=st.sampled_from([64, 500, 4096]))
def test_a_damaged_export_reads_as_sqlite_reads_it_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, export_bytes: tuple[bytes, int], seed: int, step: int
) -> None:
    raw, root = export_bytes
    f = tmp_path_factory.mktemp("n") / "case.sqlite"
    f.write_bytes(F.nsys_mutate(raw, root, random.Random(seed)))
    outcome, detail = F.nsys_case(f, step)
    assert outcome != F.DIFF, detail


@settings(max_examples=examples(80), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(range(len(TRACES))))
def test_a_mutated_trace_reads_as_json_reads_it_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, seed: int, which: int
) -> None:
    raw = gzip.decompress(TRACES[which].read_bytes())
    f = tmp_path_factory.mktemp("k") / "case.json"
    f.write_bytes(F.kineto_mutate(raw, random.Random(seed)))
    outcome, detail = F.kineto_case(f)
    assert outcome != F.DIFF, detail
