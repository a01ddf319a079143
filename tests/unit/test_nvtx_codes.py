"""The page reader's coded text (`sqlite_pages.fetch`'s `cuts`, issue 37's speed cut): each kept
row's code and the distinct values, each cut where the first pattern starts, are what SQLite's
rows give (the reference: every row read by SQL, cut by `torch_ranges.split`, interned in order
of first appearance); and the NVTX reader gives the same ranges from them as from SQLite's joined
text (GH_RUN_NO_NATIVE_SCAN's path), hostile names included (the joining characters, bad UTF-8,
names that decode alike, many distinct names, NULLs, rows left out by their times)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import nsys_nvtx, nsys_sqlite, sqlite_columns, sqlite_pages
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline import torch_ranges
from tests.budget import examples

needs_reader = pytest.mark.skipif(
    not sqlite_pages.available(),
    reason="the compiled page reader is off (not built, or GH_RUN_NO_NATIVE_SCAN)",
)
CUTS = tuple(s.encode() for s in torch_ranges.SUFFIXES)
# a value given as bytes is stored as TEXT holding those bytes (bad UTF-8 among them)
Value = str | bytes | None


def _table(path: Path, values: list[Value], ends: list[int] | None = None) -> None:
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE t (start INTEGER, "end" INTEGER, name TEXT, k INTEGER)')
    for i, v in enumerate(values):
        end = ends[i] if ends is not None else i + 1
        if isinstance(v, bytes):
            conn.execute("INSERT INTO t VALUES (?, ?, CAST(? AS TEXT), ?)", (i, end, v, i))
        else:
            conn.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (i, end, v, i))
    conn.commit()
    conn.close()


def _reference(path: Path, lo: int, hi: int) -> tuple[list[int], list[tuple[str, bool]]]:
    """(each kept row's code, the distinct (cut value, was cut) in order of first appearance),
    from SQLite's rows cut by `torch_ranges.split`; bad bytes decoded as U+FFFD after the cut
    (a cut at an ASCII pattern falls between whole characters)."""
    conn = sqlite3.connect(path)
    conn.text_factory = bytes
    rows = conn.execute(
        'SELECT name FROM t WHERE rowid BETWEEN ? AND ? AND "end" >= start ORDER BY rowid',
        (lo, hi),
    ).fetchall()
    conn.close()
    index: dict[tuple[bytes, bool], int] = {}
    codes = []
    for (v,) in rows:
        if v is None:
            codes.append(-1)
            continue
        # split on the text as Python reads it; the cut's place in bytes is the same (ASCII)
        op, cut = torch_ranges.split(v.decode("latin-1"))
        key = (op.encode("latin-1"), cut)
        codes.append(index.setdefault(key, len(index)))
    return codes, [(v.decode("utf-8", "replace"), c) for v, c in index]


def _coded(path: Path, lo: int, hi: int, cuts: tuple[bytes, ...] = CUTS) -> Any:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    lay = sqlite_pages.layout(conn, path, "t")
    conn.close()
    assert lay is not None
    dest = [np.zeros(max(hi - lo + 1, 1), dtype=np.int64)]
    read = sqlite_pages.fetch(path, lay, (lo, hi), ["k"], dest, True, text="name", cuts=cuts)
    assert read is not None and read.coded is not None
    got = read.coded
    assert got.codes.size == read.kept
    return got, dest[0][: read.kept].tolist()


_NAME = st.one_of(
    st.none(),
    st.text(max_size=10),
    st.sampled_from(["aten::mul", "x, y", "", "ProfilerStep#3", ", op_id = ", "a\x1e", "\x1f"]),
    st.binary(max_size=6),  # bad UTF-8 too
)
_SUFFIX = st.sampled_from(
    ["", ", seq = 3", ", op_id = 77", ", seq = 1, op_id = 2", ", sizes = [[1, 2]]", ", op_id",
     ", input_op_ids = [(1, 0)]", ",  seq = 1", ", sizes =", ", op_id = \x1f"]
)  # fmt: skip


def _value(name: Value, suffix: str) -> Value:
    if name is None:
        return None
    return name + suffix.encode() if isinstance(name, bytes) else name + suffix


@needs_reader
@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(st.tuples(_NAME, _SUFFIX), min_size=1, max_size=40),
    st.lists(st.booleans(), max_size=40),
)
def test_codes_and_values_are_what_sqlites_rows_give(
    tmp_path: Path, parts: list[tuple[Value, str]], dropped: list[bool]
) -> None:
    path = tmp_path / "t.sqlite"
    path.unlink(missing_ok=True)
    values = [_value(n, s) for n, s in parts]
    # rows whose end is before their start are left out by the time rule, and take no code
    ends = [i - 1 if i < len(dropped) and dropped[i] else i + 1 for i in range(len(values))]
    _table(path, values, list(ends))
    got, kept = _coded(path, 1, len(values))
    codes, distinct = _reference(path, 1, len(values))
    assert got.codes.tolist() == codes
    values_read = [v.decode("utf-8", "replace") for v in got.values()]
    assert list(zip(values_read, got.cut.tolist(), strict=True)) == distinct
    assert got.texts() == values_read  # one decode of all-ASCII values, else one per value
    assert kept == [i for i in range(len(values)) if ends[i] >= i]


@needs_reader
def test_many_distinct_values_over_many_pages_and_rowid_ranges(tmp_path: Path) -> None:
    """Thousands of distinct operators (the reader's table grows), a million-style suffix on
    each row; a rowid range within the table gives that range's own first appearances."""
    path = tmp_path / "t.sqlite"
    values: list[Value] = [f"op{i % 2500}, seq = {i}, op_id = {i}" for i in range(6000)]
    values += [f"plain {i % 700}" for i in range(3000)]
    _table(path, values)
    for lo, hi in [(1, len(values)), (2001, 7500)]:
        got, _ = _coded(path, lo, hi)
        codes, distinct = _reference(path, lo, hi)
        assert got.codes.tolist() == codes
        assert [
            (v.decode(), c) for v, c in zip(got.values(), got.cut.tolist(), strict=True)
        ] == distinct
    got, _ = _coded(path, 1, len(values))
    assert len(got.values()) == 2500 + 700 and sum(got.cut.tolist()) == 2500


@needs_reader
def test_without_patterns_every_value_is_interned_whole(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _table(path, ["a, op_id = 1", None, "a, op_id = 1", "b", "a, op_id = 2"])
    got, _ = _coded(path, 1, 5, cuts=())
    assert got.codes.tolist() == [0, -1, 0, 1, 2]
    assert got.values() == [b"a, op_id = 1", b"b", b"a, op_id = 2"] and not any(got.cut.tolist())


@needs_reader
def test_patterns_the_reader_cannot_take_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _table(path, ["a"])
    for bad in [(b"",), (b"a\x00b",)]:
        with pytest.raises(ValueError, match="cut patterns"):
            _coded(path, 1, 1, cuts=bad)


HOSTILE: list[Value] = [
    "aten::mul, op_id = 1",
    "aten::mul, seq = 4, op_id = 2",
    "aten::mul",
    b"\xffbad, op_id = 3",
    b"\xfebad, op_id = 4",  # decodes as the one above: one operator
    b"\xe2, seq = 9",
    "a\x1fb, op_id = 5",
    "mark\x1e",
    "mark, op_id = 6",
    "\x02lead",
    "",
    None,
    "ProfilerStep#4, op_id = 77",
    "x, y",
]


@pytest.mark.parametrize("rows", [len(HOSTILE), 3000])
def test_the_nvtx_reader_gives_the_same_ranges_from_codes_as_from_joined_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """A stand-in export (tests/fixtures/nsys_builder.py): each reader's ranges, names and
    kinds, row for row; the page reader's run took its coded path."""
    from tests.fixtures.nsys_builder import NsysBuilder

    if not sqlite_pages.available():
        pytest.fail("the compiled page reader is not built (setup.py builds it)")
    b = NsysBuilder(tmp_path / "odd.sqlite")
    b.add_gpu(0)
    b.add_kernel(0, 10, "k")
    for i in range(rows):
        name = HOSTILE[i % len(HOSTILE)]
        if isinstance(name, str) and rows > len(HOSTILE):
            name = f"{name}{i % 97}, op_id = {i}" if i % 3 else name
        b.add_nvtx(100 + 10 * i, 105 + 10 * i, name, tid=b.pid + i % 2)  # type: ignore[arg-type]
    path = b.close()
    conn = sqlite3.connect(path)  # bytes went in as blobs: as TEXT holding those bytes
    conn.execute("UPDATE NVTX_EVENTS SET text = CAST(text AS TEXT) WHERE typeof(text) = 'blob'")
    conn.commit()
    conn.close()
    coded: list[int] = []
    real = nsys_nvtx._from_coded

    def spy(parts: list[sqlite_pages.Coded], keys: Any) -> Any:
        coded.append(sum(p.codes.size for p in parts))
        return real(parts, keys)

    monkeypatch.setattr(nsys_nvtx, "_from_coded", spy)
    pages = _ranges(path)
    assert coded == [rows]
    monkeypatch.setattr(sqlite_pages, "_LIB", None)
    assert _ranges(path) == pages
    assert coded == [rows]  # SQLite's path: no codes
    ops = Counter(name for name, kind, _ in pages if kind == T.CPU_OP)
    assert ops["\ufffdbad"] >= 2 and ops["aten::mul"] >= 2


def _ranges(path: Path) -> list[tuple[str, int, tuple[int, int, int]]]:
    (tl,) = [t for t in nsys_sqlite.read_timelines(path) if t.host.start.size]
    h = tl.host
    return [
        (tl.names[n], k, (s, e, t))
        for n, k, s, e, t in zip(h.name.tolist(), h.kind.tolist(), h.start.tolist(),
                                 h.end.tolist(), h.tid.tolist(), strict=True)
    ]  # fmt: skip


def test_text_read_by_sqlite_has_no_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's path fills the joined text whatever `cuts` asks: the caller's other path."""
    path = tmp_path / "t.sqlite"
    _table(path, ["a, op_id = 1", None, "b"])
    monkeypatch.setattr(sqlite_pages, "_LIB", None)
    text = sqlite_columns.Text("name", cuts=CUTS)
    dest = [np.zeros(3, dtype=np.int64)]
    n, _ = sqlite_columns.fetch_into(path, "t", ["k"], dest, True, text=text)
    assert n == 3 and not text.coded
    assert text.joined() == "\x02a, op_id = 1\x1f\x1f\x02b"
