"""Exports of any schema and row order (issue 24, item 3).

- The rows of every table stored in another order (shuffled, rowids reassigned, the file
  vacuumed) give byte-identical `analyze --json`: rowid ranges are storage, not time. Checked on
  real exports of three nsys releases: 2022.4.2 (schema 3.0.0, CPU), 2023.4.4 (3.7.2, H100) and
  2024.5.1 (3.13.2, GPU).
- The schema version is read (`META_DATA_EXPORT`, 2022.x's `EXPORT_META_DATA`): one met gets no
  note, a newer one one note.
- The same small CPU workload recorded by the real nsys 2022.4, 2023.4 and 2024.2 here gives
  the same readings (and the profiled smoke job on the dev cluster under each:
  tests/integration/test_profiled.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.analysis.readers import export_schema
from tests.conftest import nsys_profile, real_nsys, run_cli
from tests.fixtures import recordings
from tests.fixtures.nsys_builder import NsysBuilder

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORTS = [
    DATA / "nsys_cpu" / "smoke-profiled.sqlite",
    DATA / "nsys_h100" / "baseline" / "baseline.sqlite",
    DATA / "nsys" / "cloverleaf-cuda_perlmutter.sqlite",
]


def shuffled(src: Path, dst: Path, seed: int) -> None:
    """A copy of `src` whose every table holds its rows in another stored order: rowids are
    reassigned (spread, in shuffled order) unless the rowid is the table's own key (an INTEGER
    PRIMARY KEY such as StringIds.id: data), whose rows are inserted in shuffled order."""
    shutil.copy(src, dst)
    rnd = random.Random(seed)
    conn = sqlite3.connect(dst)
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in tables:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        cols = [r[1] for r in info]
        keys = [r for r in info if r[5]]
        rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
        rnd.shuffle(rows)
        conn.execute(f'DELETE FROM "{table}"')
        marks = ",".join("?" * len(cols))
        names = ",".join(f'"{c}"' for c in cols)
        if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER":
            conn.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
        else:
            conn.executemany(
                f'INSERT INTO "{table}" (rowid, {names}) VALUES (?, {marks})',
                [(i * 7 + 3, *r) for i, r in enumerate(rows)],
            )
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


def _first_rowids(path: Path, table: str, n: int = 20) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid LIMIT {n}').fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.parent.name)
def test_rows_stored_in_any_order_give_byte_identical_analysis(
    export: Path, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, mixed = tmp_path / "a" / "x.sqlite", tmp_path / "b" / "x.sqlite"
    shutil.copy(export, plain)
    shuffled(export, mixed, seed=24)
    # the stored order did change (the first rows of the OS-runtime table differ)
    assert _first_rowids(plain, "OSRT_API") != _first_rowids(mixed, "OSRT_API")
    outs = []
    for path in (plain, mixed):
        res = run_cli(["analyze", str(path), "--json"], tmp_path / "home")
        assert res.rc == 0, res.text
        outs.append(res.out.replace(str(path), "X"))
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["ranks"]


def test_what_rows_once_chose_by_their_order_is_chosen_by_their_values(tmp_path: Path) -> None:
    """Stand-in export (tests/fixtures/nsys_builder.py) with the cases where the stored order
    used to decide: a correlationId on two runtime calls (the later start is the launch), a
    thread named twice, an allocation and a free at the same nanosecond, two recorded
    environments; stored in two orders, read the same."""
    b = NsysBuilder(tmp_path / "s.sqlite")
    b.add_gpu(0)
    b.add_thread(4242, "pt_main_thread")
    b.add_thread(4243, "loader")
    b.add_thread(4243, "loader-renamed")
    for i in range(20):
        b.add_kernel(1000 * i, 1000 * i + 400, f"k{i % 3}", launch=1000 * i - 100)
        b.add_osrt(1000 * i, 1000 * i + 50, "pthread_cond_wait", tid=4243)
        b.add_nvtx(1000 * i, 1000 * i + 900, f"step {i}", tid=4242)
    b.db.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start + 30, "end", eventClass,'
        " globalTid, correlationId, nameId, returnValue, callchainId"
        " FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 3 = 0"
    )
    b.add_gpu_memory(400, 1 << 20)
    b.add_gpu_memory(500, 1 << 20, free=True)
    b.add_gpu_memory(500, 1 << 20)
    b.add_env({"RANK": "1"})
    b.add_env({"RANK": "0"})
    path = b.close()
    outs = []
    for seed in (1, 2):
        (tmp_path / str(seed)).mkdir()
        mixed = tmp_path / str(seed) / "s.sqlite"
        shuffled(path, mixed, seed=seed)
        res = run_cli(["analyze", str(mixed), "--json"], tmp_path / "home")
        assert res.rc == 0, res.text
        outs.append(res.out.replace(str(mixed), "X"))
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    (rank,) = doc["ranks"]
    assert rank["rank"] == 0  # "RANK=0" sorts first of the two environments
    assert rank["peak_gpu_memory_bytes"] == 1 << 20  # the free first at 500 ns
    assert "loader" in {t["name"] for t in rank["threads"]}  # the lower string id, both priority 0


def _schema_and_columns(path: Path) -> tuple[str, dict[str, set[str]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        meta = "META_DATA_EXPORT" if "META_DATA_EXPORT" in tables else "EXPORT_META_DATA"
        (schema,) = conn.execute(
            f"SELECT value FROM {meta} WHERE name = 'EXPORT_SCHEMA_VERSION'"
        ).fetchone()
        cols = {t: {r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}
    finally:
        conn.close()
    return str(schema), cols


def test_every_schema_met_has_the_columns_gh_run_reads(tmp_path: Path) -> None:
    """Each real export here (nsys 2022.2, 2022.4, 2023.4, 2024.2, 2024.5, 2026.1, 2026.2; the
    xz-packed recordings unpacked) and a capture the real nsys 2024.2 makes now: its schema is
    one gh-run has met, and every table it reads has the columns gh-run names
    (export_schema.READ_COLUMNS)."""
    nsys = real_nsys("2024.2")
    out = tmp_path / "cap"
    nsys_profile(
        [str(nsys), "profile", "--trace=osrt", "--sample=none", "--cpuctxsw=none",
         f"--output={out}", "--export=sqlite", "/bin/sleep", "0.1"],
    ).check_returncode()  # fmt: skip
    packed = [recordings.export(p) for p in sorted(DATA.glob("**/*.sqlite.xz"))]
    exports = [*sorted(DATA.glob("**/*.sqlite")), *packed, out.with_suffix(".sqlite")]
    schemas = set()
    for path in exports:
        schema, cols = _schema_and_columns(path)
        schemas.add(schema)
        assert schema in export_schema.KNOWN, path
        for table, wanted in export_schema.READ_COLUMNS.items():
            if table in cols:
                assert set(wanted) <= cols[table], (path, table, set(wanted) - cols[table])
    assert schemas == set(export_schema.KNOWN)  # each schema listed was met here


def test_schema_versions_met_get_no_note_and_a_newer_one_one() -> None:
    for version in ("3.0.0", "3.7.2", "3.11.1", "3.13.2", "3.13.9", "2.9.1", "3.24.14", "3.25.0"):
        assert export_schema.note(version) is None, version
    note = export_schema.note("3.26.0")
    assert note is not None and "3.26.0 is newer" in note and "versioned name" in note


def test_a_newer_schema_is_read_with_one_note(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    shutil.copy(EXPORTS[1], path)
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE META_DATA_EXPORT SET value = '3.27.0' WHERE name = 'EXPORT_SCHEMA_VERSION'"
    )
    conn.commit()
    conn.close()
    res = run_cli(["analyze", str(path), "--json"], tmp_path / "home")
    assert res.rc == 0, res.text
    assert res.text.count("export schema 3.27.0 is newer") == 1


WORKLOAD = """
import threading, time
def work():
    for _ in range(5):
        time.sleep(0.02)
t = threading.Thread(target=work)
t.start()
for _ in range(4):
    time.sleep(0.03)
t.join()
"""


def _readings(nsys: Path, tmp_path: Path, python: str) -> dict[str, object]:
    """Record WORKLOAD with `nsys`, export it with the newest nsys here, and keep what
    `analyze --json` reads of it that does not depend on how many tiny calls a version
    records (2024.2 records far fewer pthread_cond_signal rows than 2023.4, measured)."""
    out = tmp_path / nsys.name
    script = tmp_path / "w.py"
    script.write_text(WORKLOAD)
    nsys_profile(
        [str(nsys), "profile", "--trace=osrt", "--sample=none", "--cpuctxsw=none",
         "--force-overwrite=true", f"--output={out}", python, str(script)],
    ).check_returncode()  # fmt: skip
    # an older nsys cannot read a newer report, the newest reads them all (nsys_export.py)
    subprocess.run(
        [str(real_nsys("2024.2")), "export", "--type=sqlite", "--force-overwrite=true",
         f"--output={out}.sqlite", f"{out}.nsys-rep"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    res = run_cli(["analyze", f"{out}.sqlite", "--json"], tmp_path / "home")
    assert res.rc == 0, res.text
    (rank,) = json.loads(res.out)["ranks"]
    sleeps = {
        ("main" if t["main"] else "other"): next(
            (f["count"], round(f["total_ns"] / 1e6, 1))
            for f in t["functions"]
            if f["name"] == "clock_nanosleep"
        )
        for t in rank["threads"]
        if any(f["name"] == "clock_nanosleep" for f in t["functions"])
    }
    return {
        "main": rank["main_thread"],
        "sleeps": sleeps,
        "steps": rank["steps"],
        "kernels": rank["activity"]["kernel_count"],
    }


# each thread's sleeps: (calls, ms each). Their summed time is read in ms, and only a unit's
# worth of error is what it guards: on CI's two cores, with the integration stream beside it,
# nsys 2023.4 once summed the other thread's five 20 ms sleeps under 100 ms
SLEEPS = {"main": (4, 30), "other": (5, 20)}


def _slept_as_planted(sleeps: object) -> bool:
    if not isinstance(sleeps, dict) or set(sleeps) != set(SLEEPS):
        return False
    return all(
        sleeps[k][0] == n and 0.5 * n * ms <= sleeps[k][1] <= 5 * n * ms
        for k, (n, ms) in SLEEPS.items()
    )


def test_the_same_cpu_workload_reads_the_same_under_each_nsys(tmp_path: Path) -> None:
    """The same small CPU workload (a main thread sleeping 4 × 30 ms, a thread 5 × 20 ms)
    recorded by the real nsys 2022.4, 2023.4 and 2024.2 here: the same readings (the main
    thread, each thread's sleep calls and their time within a unit's worth, no steps, no
    kernels). The interpreter is run by its real
    path (a launcher script in between would be the profiled process)."""
    python = str(Path(os.path.realpath(sys.executable)))
    got = {v: _readings(real_nsys(v), tmp_path, python) for v in ("2022.4", "2023.4", "2024.2")}
    want = {"main": Path(python).name, "steps": None, "kernels": 0}
    for v, r in got.items():
        assert {k: r[k] for k in want} == want, (v, r)
        assert _slept_as_planted(r["sleeps"]), (v, r["sleeps"])
