"""The compiled reader of SQLite table pages (`sqlite_pages`, `_sqlite_pages.c`): built where a C
compiler is; on any table, rowid range and page size the rows SQLite gives (or, where a value is
not an integer or NULL, a refusal that leaves the range to SQLite); on files it must not read
alone (WAL, a journal beside, WITHOUT ROWID, generated or rowid-alias columns, a column added
later, records that spill to overflow pages) a refusal; on corrupt files a refusal or rows, never
a crash; and through `fetch_into` the same columns as SQLite's path."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.analysis import nsys_sqlite, sqlite_pages

needs_reader = pytest.mark.skipif(
    not sqlite_pages.available(),
    reason="the compiled page reader is off (not built: no C compiler at install; or"
    " GH_RUN_NO_NATIVE_SCAN): SQLite's path reads every table",
)
DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(DATA.glob("**/*.sqlite"))
COLS = ["start", "end", "a", "b", "c"]


def test_the_reader_is_built_where_a_compiler_is() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: gh-run installs without the page reader")
    assert sqlite_pages.library_path() is not None, (
        "orchestrator/analysis/_sqlite_pages*.so is missing although a C compiler is here:"
        " reinstall with `pip install -e .` and read its build output"
    )


def _table(path: Path, rows: list[tuple[Any, ...]], page_size: int = 4096,
           schema: str = 'start INTEGER, "end" INTEGER, a INTEGER, b INTEGER, c INTEGER',
           rowids: list[int] | None = None) -> None:  # fmt: skip
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute(f"CREATE TABLE t ({schema})")
    if rows:
        names = ["rowid"] if rowids is not None else []
        names += ["start", '"end"', "a", "b", "c"][: len(rows[0])]
        conn.executemany(
            f"INSERT INTO t ({', '.join(names)}) VALUES ({','.join('?' * len(names))})",
            [(r, *row) for r, row in zip(rowids, rows, strict=True)] if rowids else rows,
        )
    conn.commit()
    conn.close()


def _sqlite_rows(path: Path, lo: int, hi: int, cols: list[str]) -> list[tuple[Any, ...]]:
    """What the Python reader keeps: integer start and end, end >= start; values as stored."""
    conn = sqlite3.connect(path)
    q = ", ".join(c if c == "rowid" else f'"{c}"' for c in cols)
    rows = conn.execute(
        f"SELECT {q} FROM t WHERE rowid BETWEEN ? AND ? AND typeof(start) = 'integer'"
        ' AND typeof("end") = \'integer\' AND "end" >= start ORDER BY rowid',
        (lo, hi),
    ).fetchall()
    conn.close()
    return rows


def _pages(path: Path, lo: int, hi: int, cols: list[str], **kw: Any) -> Any:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    lay = sqlite_pages.layout(conn, path, "t")
    conn.close()
    assert lay is not None
    out = [np.full(max(hi - lo + 1, 0), -7, dtype=np.int64) for _ in cols]
    read = sqlite_pages.fetch(path, lay, (lo, hi), cols, out, True, **kw)
    return read, out


INTS = st.one_of(
    st.sampled_from([0, 1, -1, 127, -128, 32767, -32768, 2**23 - 1, -(2**23), 2**31 - 1]),
    st.integers(-(2**47), 2**47),
    st.integers(-(2**63), 2**63 - 1),
    st.none(),
)
ODD = st.one_of(st.text(max_size=12), st.floats(allow_nan=False), st.binary(max_size=12))


@needs_reader
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.tuples(INTS, INTS, INTS, INTS, INTS), min_size=0, max_size=1500),
    page_size=st.sampled_from([512, 1024, 4096, 65536]),
    gaps=st.integers(1, 5),
    data=st.data(),
)
def test_any_integer_table_reads_as_sqlite_gives_it(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]], page_size: int,
    gaps: int, data: st.DataObject,
) -> None:  # fmt: skip
    """Integers of every stored width, NULLs, rowids with gaps, trees of several levels (small
    pages), any rowid range: the kept rows, their columns (NULL as -1) and the subset are what
    SQLite gives."""
    path = tmp_path_factory.mktemp("p") / "t.sqlite"
    rowids = [1 + i * gaps for i in range(len(rows))]
    _table(path, rows, page_size, rowids=rowids if rows else None)
    top = 1 + gaps * len(rows) + 3
    lo = data.draw(st.integers(-3, top), label="lo")
    hi = data.draw(st.integers(lo - 1, top), label="hi")
    want = _sqlite_rows(path, lo, hi, ["rowid", *COLS])
    cond_vals = tuple(data.draw(st.lists(st.integers(-3, 3), max_size=3)))
    read, out = _pages(path, lo, hi, COLS, cond="c", values=cond_vals,
                       sub=(("rowid", 0), ("b", 99)))  # fmt: skip
    assert read is not None
    assert read.kept == len(want)
    conn = sqlite3.connect(path)
    (seen,) = conn.execute(
        "SELECT count(*) FROM t WHERE rowid BETWEEN ? AND ?", (lo, hi)
    ).fetchone()
    conn.close()
    assert read.seen == seen
    for i in range(len(COLS)):
        assert out[i][: read.kept].tolist() == [-1 if r[i + 1] is None else r[i + 1] for r in want]
    hits = [r for r in want if r[5] in cond_vals]
    assert read.subset[0].tolist() == [r[0] for r in hits]
    assert read.subset[1].tolist() == [99 if r[4] is None else r[4] for r in hits]


@needs_reader
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(INTS, ODD), st.one_of(INTS, ODD), st.one_of(INTS, ODD), st.one_of(INTS, ODD)
        ),
        min_size=1,
        max_size=300,
    ),
)
def test_a_value_that_is_not_an_integer_is_left_to_sqlite(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]]
) -> None:
    """Text, reals and blobs: where one is in a kept row's read column the reader refuses the
    range; elsewhere (a row left out by its times) it reads on. Through `fetch_into` the columns
    equal SQLite's path's either way."""
    path = tmp_path_factory.mktemp("o") / "t.sqlite"
    _table(path, rows, 1024, schema='start INTEGER, "end" INTEGER, a INTEGER, b INTEGER')
    cols = COLS[:4]
    want = _sqlite_rows(path, 1, len(rows), ["rowid", *cols])
    read, _ = _pages(path, 1, len(rows), cols)
    odd = any(not isinstance(v, int) and v is not None for r in want for v in r[3:])
    if odd:
        assert read is None
    else:
        assert read is not None and read.kept == len(want)
    native = nsys_sqlite.fetch_columns(path, "t", cols)
    lib = sqlite_pages._LIB
    try:
        sqlite_pages._LIB = None
        python = nsys_sqlite.fetch_columns(path, "t", cols)
    finally:
        sqlite_pages._LIB = lib
    assert [a.tolist() for a in native] == [a.tolist() for a in python]


@needs_reader
def test_every_rowid_range_of_a_deep_tree_with_gaps(tmp_path: Path) -> None:
    """Ranges that start and end on a rowid, between two, before the first and after the last,
    over a tree of three levels (512-byte pages)."""
    path = tmp_path / "t.sqlite"
    n = 4000
    _table(path, [(i, i + 1, i, -i, i % 5) for i in range(n)], 512,
           rowids=[1 + 3 * i for i in range(n)])  # fmt: skip
    edges = [-1, 0, 1, 2, 3, 4, 5, 299, 300, 301, 302, 6000, 11995, 11996, 11997, 11998, 12001]
    for lo in edges:
        for hi in edges:
            want = _sqlite_rows(path, lo, hi, COLS)
            read, out = _pages(path, lo, hi, COLS)
            assert read is not None and read.kept == len(want), (lo, hi)
            assert out[2][: read.kept].tolist() == [r[2] for r in want], (lo, hi)


@needs_reader
def test_narrow_arrays_take_what_a_numpy_cast_gives(tmp_path: Path) -> None:
    vals = [0, 1, -1, 2**31, -(2**31) - 1, 2**40 + 5, 300, -129]
    path = tmp_path / "t.sqlite"
    _table(path, [(i, i, v, v, v) for i, v in enumerate(vals)])
    conn = sqlite3.connect(path)
    lay = sqlite_pages.layout(conn, path, "t")
    conn.close()
    assert lay is not None
    out = [np.empty(len(vals), dtype=t) for t in (np.int8, np.int16, np.int32)]
    read = sqlite_pages.fetch(path, lay, (1, len(vals)), ["a", "b", "c"], out, True)
    assert read is not None and read.kept == len(vals)
    for a in out:
        assert a.tolist() == np.array(vals, dtype=np.int64).astype(a.dtype).tolist()


def _layout(path: Path, table: str = "t") -> sqlite_pages.Layout | None:
    conn = sqlite3.connect(path)
    try:
        return sqlite_pages.layout(conn, path, table)
    finally:
        conn.close()


@needs_reader
def test_files_and_tables_it_must_not_read_alone_are_refused(tmp_path: Path) -> None:
    rows = [(i, i + 1, i, i, i) for i in range(50)]
    # WAL mode: committed rows may be in the -wal file; the header says so once it is gone too
    wal = tmp_path / "wal.sqlite"
    _table(wal, rows)
    conn = sqlite3.connect(wal)
    conn.execute("PRAGMA journal_mode = WAL")
    keep = sqlite3.connect(wal)  # holds the -wal file open
    keep.execute("INSERT INTO t VALUES (1000, 1001, 1, 1, 1)")
    keep.commit()
    assert Path(f"{wal}-wal").stat().st_size > 0
    assert _layout(wal) is None
    keep.close()
    conn.close()
    lay = _layout(wal)
    assert lay is not None
    out = [np.empty(51, dtype=np.int64)]
    assert sqlite_pages.fetch(wal, lay, (1, 51), ["a"], out, True) is None
    assert nsys_sqlite.fetch_columns(wal, "t", ["start"])[0].size == 51
    # a journal beside the file: SQLite would roll it back first
    jr = tmp_path / "j.sqlite"
    _table(jr, rows)
    Path(f"{jr}-journal").write_bytes(b"")
    assert _layout(jr) is None
    # tables whose records are not one value per column, in order, or where SQL's `rowid` is a
    # column
    for name, schema in {
        "norowid": 'start INTEGER, "end" INTEGER, a INTEGER PRIMARY KEY) WITHOUT ROWID; --',
        "alias": 'id INTEGER PRIMARY KEY, start INTEGER, "end" INTEGER',
        "generated": 'start INTEGER, "end" INTEGER, g INTEGER AS ("end" - start)',
        "rowid column": 'start INTEGER, "end" INTEGER, rowid INTEGER',
    }.items():
        f = tmp_path / f"{name}.sqlite"
        conn = sqlite3.connect(f)
        conn.execute(f"CREATE TABLE t ({schema})")
        conn.close()
        assert _layout(f) is None, name
    assert _layout(jr, "missing") is None


@needs_reader
def test_a_column_added_later_and_spilled_records_are_left_to_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _table(path, [(i, i + 1, i, i, i) for i in range(20)])
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 5")
    conn.execute("INSERT INTO t VALUES (100, 101, 1, 1, 1, 6)")
    conn.commit()
    conn.close()
    read, _ = _pages(path, 1, 21, ["start", "d"])
    assert read is None  # the old rows' d is the default, not in their records
    read, out = _pages(path, 1, 21, ["start", "a"])
    assert read is not None and read.kept == 21
    assert nsys_sqlite.fetch_columns(path, "t", ["d"])[0].tolist() == [5] * 20 + [6]
    # a record too long for its page spills to overflow pages
    big = tmp_path / "big.sqlite"
    _table(big, [(1, 2, 1, 1, 1), (3, 4, 1, 1, 1), (5, 6, 1, 1, 1)], 512,
           schema='start INTEGER, "end" INTEGER, a INTEGER, b INTEGER, c')  # fmt: skip
    conn = sqlite3.connect(big)
    conn.execute("UPDATE t SET c = ? WHERE rowid = 2", ("x" * 2000,))
    conn.commit()
    conn.close()
    assert _pages(big, 1, 3, ["start", "a"])[0] is None
    read, out = _pages(big, 3, 3, ["start", "a"])
    assert read is not None and out[0][:1].tolist() == [5]
    assert nsys_sqlite.fetch_columns(big, "t", ["start", "a"])[0].tolist() == [1, 3, 5]


@needs_reader
def test_corrupt_files_give_rows_or_a_refusal_never_a_crash(tmp_path: Path) -> None:
    """Bytes flipped anywhere, a file cut short, a page that is its own child: the reader
    returns (within its arrays) or refuses; it never reads outside the file's pages."""
    src = tmp_path / "t.sqlite"
    _table(src, [(i, i + 10, i * 7, -i, i % 3) for i in range(3000)], 512)
    good = src.read_bytes()
    rnd = random.Random(7)
    refused = 0
    for trial in range(400):
        raw = bytearray(good)
        for _ in range(rnd.randint(1, 12)):
            raw[rnd.randrange(100, len(raw))] = rnd.randrange(256)
        if trial % 10 == 0:
            raw = raw[: rnd.randrange(512, len(raw))]
        f = tmp_path / "bad.sqlite"
        f.write_bytes(bytes(raw))
        lay = sqlite_pages.Layout(2, {c: i for i, c in enumerate(COLS)})
        out = [np.zeros(3000, dtype=np.int64) for _ in COLS]
        read = sqlite_pages.fetch(f, lay, (1, 3000), COLS, out, True)
        refused += read is None
        if read is not None:
            assert 0 <= read.kept <= read.seen <= 3000
    assert 0 < refused < 400
    # the root (page 2, interior) made its own first child: a cycle, refused
    raw = bytearray(good)
    root = 512
    assert raw[root] == 5
    first = int.from_bytes(raw[root + 12 : root + 14], "big")
    raw[root + first : root + first + 4] = (2).to_bytes(4, "big")
    f = tmp_path / "cycle.sqlite"
    f.write_bytes(bytes(raw))
    out = [np.zeros(3000, dtype=np.int64)]
    assert sqlite_pages.fetch(f, sqlite_pages.Layout(2, {"start": 0, "end": 1}), (1, 3000),
                              ["start"], out, True) is None  # fmt: skip


@needs_reader
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_exports_read_alike_by_both_paths(path: Path) -> None:
    """Every big table of every real export the tests hold: the page reader reads it (no
    refusal) and gives SQLite's path's columns."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    checked = 0
    for table in (nsys_sqlite.KERNEL, nsys_sqlite.MEMCPY, nsys_sqlite.RUNTIME, nsys_sqlite.OSRT):
        if table not in tables:
            continue
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        cols = ["start", "end", *(c for c in cols if c not in ("start", "end"))][:8]
        lay = sqlite_pages.layout(conn, path, table)
        assert lay is not None
        rng = conn.execute(f"SELECT min(rowid), max(rowid) FROM {table}").fetchone()
        if rng[0] is None:  # an empty table: nothing to compare
            continue
        checked += 1
        out = [np.empty(rng[1] - rng[0] + 1, dtype=np.int64) for _ in cols]
        read = sqlite_pages.fetch(path, lay, rng, cols, out, True)
        assert read is not None, table
        lib = sqlite_pages._LIB
        try:
            sqlite_pages._LIB = None
            python = nsys_sqlite.fetch_columns(path, table, cols)
        finally:
            sqlite_pages._LIB = lib
        assert [a[: read.kept].tolist() for a in out] == [a.tolist() for a in python], table
    conn.close()
    assert checked, "no table with rows in this export"
