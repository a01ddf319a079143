"""Issue 15, class 5: a state store gh-run did not write itself. The schema is versioned
(PRAGMA user_version) and migrated forward; rows are read by column name; a newer store is
refused in one line naming it; a corrupt, read-only or full home is one sentence naming the
file and the fix; `status` works on a read-only home. Real SQLite files, real mounts."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.store.db import SCHEMA_VERSION, Run, Store
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _one_line(text: str) -> str:
    # A cluster file given as a path is not the site's: gh-run says so first, as a note.
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and "not a site file" not in ln]
    assert len(lines) == 1, lines
    assert "Traceback" not in text and "internal error" not in text, text
    return lines[0]


def _run(run_id: str = "r-1") -> Run:
    return Run(
        run_id=run_id,
        name="r",
        job_name=f"ghr-{run_id}",
        spec_path=None,
        spec_json="{}",
        cluster="dev",
        partition="gh",
        executor="local",
        run_dir=f"/nonexistent/{run_id}",
        state="COMPLETED",
        job_id="local-1",
        submitted_at=1.0,
        ended_at=2.0,
    )


def test_a_new_store_carries_its_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "h")
    assert store.rows("PRAGMA user_version")[0]["user_version"] == SCHEMA_VERSION
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"


def test_a_newer_store_is_refused_and_left_alone(gh_home: Path) -> None:
    store = Store(gh_home)
    store.add_run(_run())
    store.close()
    db = sqlite3.connect(gh_home / "state.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = (gh_home / "state.db").read_bytes()
    for args in (["status"], ["submit", "jobs/smoke.yaml", "-x", "local"]):
        res = run_cli(args, gh_home)
        assert res.rc == 2, res.text
        line = _one_line(res.err)
        assert str(gh_home / "state.db") in line and "newer gh-run" in line
        assert f"schema {SCHEMA_VERSION + 1}" in line and "--home" in line
    assert (gh_home / "state.db").read_bytes() == before
    assert not (gh_home / "runs").exists()  # nothing submitted


# The runs table as an early gh-run wrote it (no attempt/campaign/variant/collected columns),
# with no campaign tables and no version.
OLD_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, name TEXT NOT NULL, job_name TEXT NOT NULL UNIQUE,
    spec_path TEXT, spec_json TEXT NOT NULL, cluster TEXT NOT NULL, partition TEXT NOT NULL,
    executor TEXT NOT NULL, run_dir TEXT NOT NULL, job_id TEXT, state TEXT NOT NULL,
    exit_code INTEGER, reason TEXT, created_at REAL NOT NULL, submitted_at REAL, ended_at REAL
);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
    ts REAL NOT NULL, state TEXT NOT NULL, detail TEXT);
INSERT INTO runs VALUES ('old-1', 'old', 'ghr-old-1', NULL, '{}', 'dev', 'gh', 'local',
    '/nonexistent/old-1', 'local-1', 'COMPLETED', 0, NULL, 1.0, 1.0, 2.0);
"""


def test_an_older_store_is_migrated_forward(gh_home: Path) -> None:
    gh_home.mkdir(mode=0o700)
    db = sqlite3.connect(gh_home / "state.db")
    db.executescript(OLD_SCHEMA)
    db.close()
    res = run_cli(["status"], gh_home)
    assert res.rc == 0 and "old-1" in res.out, res.text
    store = Store(gh_home)
    assert store.rows("PRAGMA user_version")[0]["user_version"] == SCHEMA_VERSION
    run = store.get_run("old-1")
    assert run.attempt == 0 and run.campaign_id is None and run.state == "COMPLETED"
    store.add_run(_run("new-1"))  # the added columns are written to
    assert {r.run_id for r in store.list_runs()} == {"old-1", "new-1"}
    assert store.rows("SELECT COUNT(*) AS n FROM campaigns")[0]["n"] == 0


def test_columns_are_read_by_name(gh_home: Path) -> None:
    store = Store(gh_home)
    store.add_run(_run())
    store.close()
    db = sqlite3.connect(gh_home / "state.db")
    db.execute("ALTER TABLE runs ADD COLUMN priority INTEGER DEFAULT 5")
    db.execute("ALTER TABLE events ADD COLUMN host TEXT")
    db.close()
    res = run_cli(["status", "r-1"], gh_home)
    assert res.rc == 0 and "COMPLETED" in res.out, res.text


def test_a_corrupt_store_is_one_sentence(gh_home: Path) -> None:
    gh_home.mkdir(mode=0o700)
    (gh_home / "state.db").write_bytes(b"this is not SQLite\n" * 100)
    res = run_cli(["status"], gh_home)
    assert res.rc == 1, res.text
    line = _one_line(res.err)
    assert str(gh_home / "state.db") in line and "move it aside" in line


def test_a_home_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("oops")
    res = run_cli(["status"], home)
    assert res.rc == 2, res.text
    assert "is a file, not a folder" in _one_line(res.err)


@pytest.fixture
def root_mounts() -> Iterator[list[Path]]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount (a real read-only or full file system)")
    mounted: list[Path] = []
    yield mounted
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


def _mount(mounted: list[Path], *argv: str) -> None:
    res = subprocess.run(["mount", *argv], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount here: {res.stderr.strip()}")
    if Path(argv[-1]) not in mounted:
        mounted.append(Path(argv[-1]))


def test_status_works_on_a_read_only_home(
    gh_home: Path, tmp_path: Path, root_mounts: list[Path]
) -> None:
    res = run_cli(["submit", "jobs/smoke.yaml", "-x", "local", "--wait"], gh_home)
    assert res.rc == 0, res.text
    ro = tmp_path / "ro"
    ro.mkdir()
    _mount(root_mounts, "--bind", str(gh_home), str(ro))
    _mount(root_mounts, "-o", "remount,bind,ro", str(ro))
    res = run_cli(["status"], ro)
    assert res.rc == 0, res.text
    assert "smoke-" in res.out and "COMPLETED" in res.out
    assert "cannot be written" in res.err
    res = run_cli(["status", "last"], ro)
    assert res.rc == 0 and "events" in res.out, res.text
    res = run_cli(["submit", "jobs/smoke.yaml", "-x", "local"], ro)
    assert res.rc != 0, res.text
    line = _one_line(res.err)
    assert str(ro) in line and "--home" in line


def test_a_full_home_is_one_sentence(
    gh_home: Path, tmp_path: Path, tmpfs: Callable[[Path, str], Path]
) -> None:
    tmpfs(gh_home, "1m")
    Store(gh_home).close()
    (gh_home / "filler").write_bytes(b"")
    # unbuffered: from Python 3.14 on, a buffered file keeps what it could not write and its
    # close raises again
    with (gh_home / "filler").open("ab", buffering=0) as f, pytest.raises(OSError):
        while True:  # fill the home's file system for real
            f.write(b"\0" * 65536)
    cluster = tmp_path / "elsewhere.yaml"
    text = (REPO / "clusters" / "dev.yaml").read_text()
    cluster.write_text(text.replace('runs: "{home}/runs"', f'runs: "{tmp_path / "runs"}"'))
    res = run_cli(["submit", "jobs/smoke.yaml", "-x", "local", "--cluster", str(cluster)], gh_home)
    assert res.rc == 1, res.text
    line = _one_line(res.err)
    assert str(gh_home / "state.db") in line and "free space" in line
