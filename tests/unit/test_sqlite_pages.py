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

from orchestrator.analysis.readers import nsys_db, nsys_sqlite, sqlite_columns, sqlite_pages
from orchestrator.analysis.readers import table_parts as TP
from tests.budget import examples
from tests.fixtures import sqlite_btree as SB

needs_reader = pytest.mark.skipif(
    not sqlite_pages.available(),
    reason="the compiled page reader is off (not built: no C compiler at install; or"
    " GH_RUN_NO_NATIVE_SCAN): SQLite's path reads every table",
)
DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(DATA.glob("**/*.sqlite"))
COLS = ["start", "end", "a", "b", "c"]
# a time lies strictly inside +-2**62 ns (sql_integers.TIME_LIMIT_NS), stated here again: the
# references below apply the rule in their own SQL
LIMIT = 2**62


def test_the_reader_is_built_where_a_compiler_is() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: gh-run installs without the page reader")
    assert sqlite_pages.library_path() is not None, (
        "orchestrator/analysis/readers/_sqlite_pages*.so is missing although a C compiler is here:"
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
    """What the Python reader keeps: integer start and end inside +-LIMIT, end >= start; values
    as stored."""
    conn = sqlite3.connect(path)
    q = ", ".join(c if c == "rowid" else f'"{c}"' for c in cols)
    rows = conn.execute(
        f"SELECT {q} FROM t WHERE rowid BETWEEN ? AND ? AND typeof(start) = 'integer'"
        ' AND typeof("end") = \'integer\' AND "end" >= start'
        f' AND start > {-LIMIT} AND "end" < {LIMIT} ORDER BY rowid',
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
    st.sampled_from([2**62, 2**62 - 1, -(2**62), -(2**62) + 1, 2**63 - 1, -(2**63)]),
    st.integers(-(2**47), 2**47),
    st.integers(-(2**63), 2**63 - 1),
    st.none(),
)
ODD = st.one_of(st.text(max_size=12), st.floats(allow_nan=False), st.binary(max_size=12))


@needs_reader
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
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
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
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
    native = sqlite_columns.fetch_columns(path, "t", cols)
    lib = sqlite_pages._LIB
    try:
        sqlite_pages._LIB = None
        python = sqlite_columns.fetch_columns(path, "t", cols)
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
    assert sqlite_columns.fetch_columns(wal, "t", ["start"])[0].size == 51
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
    assert sqlite_columns.fetch_columns(path, "t", ["d"])[0].tolist() == [5] * 20 + [6]
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
    assert sqlite_columns.fetch_columns(big, "t", ["start", "a"])[0].tolist() == [1, 3, 5]


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
    for table in (nsys_db.KERNEL, nsys_db.MEMCPY, nsys_db.RUNTIME, nsys_db.OSRT):
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
            python = sqlite_columns.fetch_columns(path, table, cols)
        finally:
            sqlite_pages._LIB = lib
        assert [a[: read.kept].tolist() for a in out] == [a.tolist() for a in python], table
    conn.close()
    assert checked, "no table with rows in this export"


# ---- a tree that contradicts itself, rows far apart, reals, journals (issue 26, class 1)
def _reference(path: Path, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    """SQLite's own scan of the whole table (by the tree's child pointers, never its keys),
    with the reader's rules: start and end integers (or integral reals) inside +-LIMIT, end >=
    start; the other columns CAST, NULL as -1. Sorted: rowid order is storage."""
    conn = sqlite3.connect(path)
    exprs = ", ".join(f'CAST(coalesce("{c}", -1) AS INTEGER)' for c in cols)
    ok = " AND ".join(
        f"typeof({c}) IN ('integer', 'real') AND CAST({c} AS INTEGER) = {c}"
        f" AND {c} > {-LIMIT} AND {c} < {LIMIT}"
        for c in ("start", '"end"')
    )
    try:
        rows = conn.execute(f'SELECT {exprs} FROM "{table}" WHERE {ok} AND "end" >= start')
        return sorted(rows.fetchall())
    finally:
        conn.close()


def _both_paths(path: Path, table: str, cols: list[str], step: int | None = None) -> dict[str, Any]:
    """The table by the page reader and by SQLite's path, whole (`fetch_columns`) or in parts of
    `step` rows on a thread pool (`TableRead`, as `analyze` reads): rows sorted, or the
    refusal."""
    from concurrent.futures import ThreadPoolExecutor

    out: dict[str, Any] = {}
    lib = sqlite_pages._LIB
    chunk = sqlite_columns.FETCH_CHUNK_ROWS
    for label in ("pages", "sqlite"):
        sqlite_pages._LIB = lib if label == "pages" else None
        try:
            if step is None:
                got = sqlite_columns.fetch_columns(path, table, cols)
            else:
                sqlite_columns.FETCH_CHUNK_ROWS = max(step // 3, 1)
                conn = sqlite3.connect(path)
                shape = TP.shape(conn, path, table, step)
                conn.close()
                assert shape is not None
                arrays = [np.empty(shape.rows, dtype=np.int64) for _ in cols]
                with ThreadPoolExecutor(2) as pool:
                    n, _ = sqlite_columns.TableRead(pool, path, table, cols, arrays, shape).result()
                got = [a[:n] for a in arrays]
            out[label] = sorted(zip(*(a.tolist() for a in got), strict=True))
        except TP.DamagedTable as exc:
            out[label] = exc
        finally:
            sqlite_pages._LIB = lib
            sqlite_columns.FETCH_CHUNK_ROWS = chunk
    return out


DAMAGES = ["key lowered", "key set to 0", "key raised", "right-most child misplaced",
           "children swapped"]  # fmt: skip


def _damage(raw: bytearray, root: int, how: str, rnd: random.Random) -> None:
    inner = [p for p in SB.interiors(raw, root) if len(p.cells) >= 3]
    page = inner[rnd.randrange(len(inner))]
    i = rnd.randrange(1, len(page.cells) - 1)
    cell = page.cells[i]
    if how == "key lowered":  # between its neighbours: only the rows above it are cut off
        SB.set_key(raw, cell, (page.cells[i - 1][2] + cell[2]) // 2)
    elif how == "key set to 0":
        SB.set_key(raw, cell, 0)
    elif how == "key raised":
        SB.set_key(raw, cell, (cell[2] + page.cells[i + 1][2]) // 2)
    elif how == "right-most child misplaced":
        SB.set_child(raw, page.right_at, cell[1])
    else:
        a, b = page.cells[i], page.cells[i + 1]
        SB.set_child(raw, a[0], b[1])
        SB.set_child(raw, b[0], a[1])


@pytest.mark.parametrize("how", DAMAGES)
def test_a_tree_that_contradicts_its_keys_is_refused_never_read_in_part(
    tmp_path: Path, how: str
) -> None:
    """Interior keys and child pointers damaged so that SQLite's own scan still reads every row
    without an error, while reads by rowid (the page reader's and SQLite's range queries alike)
    miss some or find some twice: both paths give the reference's rows exactly, or refuse; never
    a fraction (issue 26: 167 of 2,294 kernels, exit 0)."""
    cols = ["start", "end", "a"]
    src = tmp_path / "t.sqlite"
    _table(src, [(i, i + 10, i * 7, -i, i % 3) for i in range(6000)], 512)
    good = bytearray(src.read_bytes())
    root = SB.root_of(src, "t")
    refused = []
    for seed in range(6):
        raw = bytearray(good)
        _damage(raw, root, how, random.Random(seed))
        f = tmp_path / f"{seed}.sqlite"
        f.write_bytes(bytes(raw))
        want = _reference(f, "t", cols)
        assert len(want) >= 6000  # SQLite's scan reads it without an error
        for step in (None, 500):
            for label, got in _both_paths(f, "t", cols, step).items():
                if isinstance(got, TP.DamagedTable):
                    refused.append((seed, step, label))
                    assert str(got).startswith("table t: ") and "rowid" in str(got)
                else:
                    assert got == want, (how, seed, step, label)
    assert refused, "no read by rowid was cut short: the damage tested nothing"


@pytest.mark.parametrize("how", ["key set to 0", "key raised", "right-most child misplaced"])
def test_a_damaged_kernel_tree_gives_every_kernel_or_one_sentence(tmp_path: Path, how: str) -> None:
    """The three damages of issue 26 on a real export (2,294 kernels; the page reader found 2,239,
    167 and 56 of them, exit 0): every kernel, as SQLite's scan finds them, or (where that scan
    meets a child twice) exit 2 in one sentence naming the file, the table and the fix; on both
    paths alike."""
    from orchestrator.analysis.timeline import model as T
    from orchestrator.core.errors import UserError

    src = DATA / "nsys_h100" / "baseline" / "baseline.sqlite"
    lib = sqlite_pages._LIB
    for seed in range(3):
        raw = bytearray(src.read_bytes())
        _damage(raw, SB.root_of(src, nsys_db.KERNEL), how, random.Random(seed))
        f = tmp_path / "damaged.sqlite"
        f.write_bytes(bytes(raw))
        scanned = len(_reference(f, nsys_db.KERNEL, ["start"]))
        answers = []
        for native in (lib, None):
            sqlite_pages._LIB = native
            try:
                tls = nsys_sqlite.read_timelines(f)
                answers.append(sum(int((t.gpu.kind == T.KERNEL).sum()) for t in tls))
            except UserError as err:
                msg = str(err)
                assert str(f) in msg and nsys_db.KERNEL in msg and "export the report" in msg
                assert "\n" not in msg
                answers.append("refused")
            finally:
                sqlite_pages._LIB = lib
        if how == "right-most child misplaced":  # SQLite's scan reads a leaf twice
            assert scanned > 2294 and answers == ["refused", "refused"]
        else:
            assert scanned == 2294 and answers == [2294, 2294]


@needs_reader
def test_the_shape_pass_counts_what_sqlite_counts_and_marks_every_step(tmp_path: Path) -> None:
    """The whole-tree walk: rows = count(*), marks = the rowid of every step-th row, last = the
    largest rowid; any damage of the interior pages that SQLite's scan does not notice either
    keeps that answer or gives up."""
    path = tmp_path / "t.sqlite"
    rowids = sorted(random.Random(3).sample(range(-(2**40), 2**40), 5000))
    _table(path, [(i, i, i, i, i) for i in range(5000)], 512, rowids=rowids)
    conn = sqlite3.connect(path)
    lay = sqlite_pages.layout(conn, path, "t")
    conn.close()
    assert lay is not None
    for step in (1, 7, 1000, 5000, 6000):
        tree = sqlite_pages.shape(path, lay, step)
        assert tree is not None
        assert tree.rows == 5000 and tree.last == rowids[-1]
        assert list(tree.marks) == rowids[::step]
    good = bytearray(path.read_bytes())
    for seed in range(40):
        raw = bytearray(good)
        _damage(raw, lay.root, DAMAGES[seed % len(DAMAGES)], random.Random(seed))
        f = tmp_path / "d.sqlite"
        f.write_bytes(bytes(raw))
        tree = sqlite_pages.shape(f, lay, 1000)
        assert tree is None or (tree.rows == 5000 and list(tree.marks) == rowids[::1000])


def test_memory_follows_rows_not_the_rowid_range(tmp_path: Path) -> None:
    """Rows at rowids 2^40, 2^63 - 1 and -2^63 + 1 among a few: the arrays hold the rows (a
    megabyte at most here: tracemalloc counts numpy's buffers), on both paths, and the values
    are SQLite's. Before, one row at rowid 1e8 cost 4 GB and one at 2^40 a MemoryError."""
    import tracemalloc

    path = tmp_path / "t.sqlite"
    rowids = [-(2**63) + 1, -5, 1, 2, 3, 2**40, 2**40 + 1, 2**63 - 1]
    _table(path, [(i, i + 1, i, i, i) for i in range(len(rowids))], 512, rowids=rowids)
    want = _reference(path, "t", COLS)
    lib = sqlite_pages._LIB
    for native in (lib, None):
        sqlite_pages._LIB = native
        tracemalloc.start()
        try:
            got = sqlite_columns.fetch_columns(path, "t", COLS)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            sqlite_pages._LIB = lib
        assert sorted(zip(*(a.tolist() for a in got), strict=True)) == want
        assert peak < 1 << 20, peak


def test_parts_of_a_table_with_gaps_hold_equal_rows(tmp_path: Path) -> None:
    """A table whose rowids are far apart, cut into parts of 3 rows: by rows on both paths
    (the compiled reader's marks, SQLite's OFFSET), each part's rows at its offset."""
    path = tmp_path / "t.sqlite"
    rowids = [1, 10**9, 10**9 + 1, 2**40, 2**41, 2**41 + 7, 2**50, 2**62]
    _table(path, [(i, i + 1, i, i, i) for i in range(len(rowids))], rowids=rowids)
    conn = sqlite3.connect(path)
    lib = sqlite_pages._LIB
    try:
        for native in (lib, None):
            sqlite_pages._LIB = native
            shape = TP.shape(conn, path, "t", 3)
            assert shape is not None and shape.rows == 8 and not shape.dense
            parts = shape.parts(conn)
            assert [(p.lo, p.rows, p.offset) for p in parts] == [
                (1, 3, 0), (2**40, 3, 3), (2**50, 2, 6)
            ]  # fmt: skip
            assert parts[-1].hi == 2**62
    finally:
        sqlite_pages._LIB = lib
        conn.close()


def test_a_column_declared_real_reads_alike_on_both_paths(tmp_path: Path) -> None:
    """start and end declared REAL: SQLite returns reals (stored as integers on disk where they
    fit 6 bytes, as 8-byte floats otherwise). An integral real is that integer on both paths; a
    fractional one, or one beyond int64, leaves its row out on both (issue 26: the page reader
    kept every kernel, SQLite's path none); so does one beyond +-2**62 ns (no clock's time)."""
    path = tmp_path / "t.sqlite"
    starts = [0.0, 1.0, 2.5, 1e17, 2.0**47, -(2.0**63), 2.0**63, 1e300, float("inf"), 7.0]
    rows = [(s, s + 1 if abs(s) < 1e18 else s, i, i, i) for i, s in enumerate(starts)]
    _table(path, rows, schema='start REAL, "end" REAL, a INTEGER, b INTEGER, c INTEGER')
    want = _reference(path, "t", COLS)
    assert sorted(r[2] for r in want) == [0, 1, 3, 4, 9]
    got = _both_paths(path, "t", COLS)
    assert got["pages"] == got["sqlite"] == want


def test_a_time_beyond_two_to_the_62_is_no_time_on_either_path(tmp_path: Path) -> None:
    """bench/hostile_columns.py --kinds max,min: a kernel ending at 2**63 - 1, or a copy starting
    at -(2**63 - 1), stopped `analyze` (SQLite refused the window's bound as a parameter; numpy's
    int64 wrapped in the idle timeline's bins) or made a span of 2**63 ns. Strictly inside
    +-2**62 a row is kept, on the edge or beyond it is left out, on both paths, alone in a
    range or among others."""
    path = tmp_path / "t.sqlite"
    edges = [LIMIT - 1, LIMIT, LIMIT + 1, 2**63 - 1]
    rows = [(i, i + 10, i, i, i) for i in range(20)]
    rows += [(5, e, 1, 1, 1) for e in edges] + [(-e, 5, 2, 2, 2) for e in edges]
    rows += [(LIMIT - 2, LIMIT - 1, 3, 3, 3), (-(2**63), -(2**63), 4, 4, 4)]
    _table(path, rows)
    want = _reference(path, "t", COLS)
    assert sorted(r[2] for r in want if r[0] < 0 or r[1] >= 2**61) == [1, 2, 3]
    assert len(want) == 23
    for step in (None, 7):
        got = _both_paths(path, "t", COLS, step=step)
        assert got["pages"] == got["sqlite"] == want


def test_a_hot_rollback_journal_is_named_with_its_fix(tmp_path: Path) -> None:
    """A write stopped midway leaves a hot journal beside the file; SQLite must roll it back,
    which a read-only open cannot: the sentence says what it is and how to undo it (it used
    to speak of a read-only database)."""
    import subprocess
    import sys

    from orchestrator.core.errors import UserError

    path = tmp_path / "x.sqlite"
    shutil.copy(DATA / "nsys_h100" / "baseline" / "baseline.sqlite", path)
    script = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA cache_size = 1')\n"
        "c.execute('BEGIN'); c.execute('DELETE FROM StringIds')\n"
        "c.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 1')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    assert Path(f"{path}-journal").stat().st_size > 0
    with pytest.raises(UserError) as err:
        nsys_sqlite.read_timelines(path)
    msg = str(err.value)
    assert "rollback journal" in msg and "x.sqlite-journal" in msg and "PRAGMA quick_check" in msg
    assert "readonly" not in msg
    # the fix works: SQLite rolls the write back, and the file reads as it was
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA quick_check").fetchall()
    conn.close()
    assert not Path(f"{path}-journal").exists()
    assert nsys_sqlite.read_timelines(path)


def test_text_in_a_time_column_is_no_time_on_either_path(tmp_path: Path) -> None:
    """Found by bench/fuzz_readers.py: a kernel whose end was a tab read as end 0 on SQLite's
    path (`group_concat` prints text as it prints integers, and numpy reads a field of white
    space as 0, '+5' as 5, ' 12' as 12), where SQLite's own scan leaves the row out."""
    path = tmp_path / "t.sqlite"
    odd = ["\t", " ", "+5", " 12", "7", "-", "1e3", ""]
    rows = [(i, i + 10, i, i, i) for i in range(20)]
    rows += [(100, v, 1, 1, 1) for v in odd] + [(v, 200, 2, 2, 2) for v in odd]
    _table(path, rows, schema='start, "end", a INTEGER, b INTEGER, c INTEGER')  # no affinity
    want = _reference(path, "t", COLS)
    assert len(want) == 20
    got = _both_paths(path, "t", COLS)
    assert got["pages"] == got["sqlite"] == want
    got = _both_paths(path, "t", COLS, step=7)
    assert got["pages"] == got["sqlite"] == want


# --- one TEXT column read with the integers (issue 37: NVTX names) ----------------------------


def _text_table(path: Path, texts: list[Any], encoding: str = "UTF-8", page_size: int = 4096,
                ends: list[Any] | None = None) -> None:  # fmt: skip
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute(f'PRAGMA encoding = "{encoding}"')
    # `name` without a type: an integer or a blob stays one (a TEXT column would turn 7 into '7')
    conn.execute('CREATE TABLE t (start INTEGER, "end" INTEGER, name, k INTEGER)')
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        [(i, (ends[i] if ends else i + 1), t, i % 3) for i, t in enumerate(texts)],
    )
    conn.commit()
    conn.close()


def _both_texts(path: Path) -> dict[str, tuple[list[Any], str]]:
    """{page reader, sqlite}: (the kept rows' k column, their text) through `fetch_into`."""
    out = {}
    for reader in ("pages", "sqlite"):
        lib = sqlite_pages._LIB
        if reader == "sqlite":
            sqlite_pages._LIB = None
        try:
            text = sqlite_columns.Text("name")
            dest = [np.zeros(5000, dtype=np.int64)]
            n, _ = sqlite_columns.fetch_into(path, "t", ["k"], dest, True, text=text)
            out[reader] = (dest[0][:n].tolist(), text.joined())
        finally:
            sqlite_pages._LIB = lib
    return out


def _texts_by_sql(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        (got,) = conn.execute(
            "SELECT group_concat(CASE WHEN name IS NULL THEN '' ELSE char(2) || name END,"
            ' char(31)) FROM t WHERE "end" >= start'
        ).fetchone()
    finally:
        conn.close()
    return got or ""


@needs_reader
@pytest.mark.parametrize(
    ("texts", "native", "how"),
    [
        (["aten::mul, op_id = 1", None, "", "ünïcode ✓", "x\x1fy"], True, "values, NULLs, UTF-8"),
        ([f"name {i}" for i in range(3000)], True, "many rows, several pages"),
        (["a", "b", 7], False, "an integer in the text column: SQLite's rules"),
        (["a", "b", b"\x00\xff"], False, "a blob: SQLite's rules"),
        (["x" * 6000, "b"], False, "a value spilled to overflow pages: SQLite's rules"),
    ],
)
def test_a_text_column_reads_as_sqlites_group_concat_gives_it(
    tmp_path: Path, texts: list[Any], native: bool, how: str
) -> None:
    path = tmp_path / "t.sqlite"
    _text_table(path, texts, ends=[i + 1 if i != 1 else None for i in range(len(texts))])
    lay = _layout(path)
    assert lay is not None
    dest = [np.zeros(len(texts), dtype=np.int64)]
    read = sqlite_pages.fetch(path, lay, (1, len(texts)), ["k"], dest, True, text="name")
    assert (read is not None) == native, how
    both = _both_texts(path)
    assert both["pages"] == both["sqlite"], how
    assert both["sqlite"][1] == _texts_by_sql(path), how


@needs_reader
def test_text_of_a_utf16_file_is_left_to_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "u16.sqlite"
    _text_table(path, ["ab", None, "çd"], encoding="UTF-16le")
    lay = _layout(path)
    assert lay is not None
    dest = [np.zeros(10, dtype=np.int64)]
    assert sqlite_pages.fetch(path, lay, (1, 3), ["k"], dest, True, text="name") is None
    both = _both_texts(path)
    assert both["pages"] == both["sqlite"] == ([0, 1, 2], "\x02ab\x1f\x1f\x02çd")


def test_a_build_of_other_calling_conventions_is_left_unused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stale build (installed before a change of the C functions' arguments) answers another
    `sqlite_pages_abi`, or lacks it (then `native.load` gives None): SQLite's path serves."""

    class Built:
        def __init__(self, abi: int) -> None:
            self.abi = abi

        def sqlite_pages_abi(self) -> int:
            return self.abi

    for abi, usable in ((sqlite_pages.ABI, True), (sqlite_pages.ABI - 1, False)):
        monkeypatch.setattr(sqlite_pages.native, "load", lambda *_a, b=Built(abi): b)
        assert (sqlite_pages._library() is not None) == usable
