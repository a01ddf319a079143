"""Issue 26, class 6 (the small ones): a row count past what SQLite's LIMIT holds is "every row",
never a broken store or an OverflowError; a submit that cannot write its intent leaves no run
folder behind. (A FIFO among a remote run's artifacts is refused as locally:
tests/unit/test_transport.py, test_remote_selection_equals_the_local_one.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.core.errors import RuntimeFailure
from orchestrator.executors.local import LocalExecutor
from orchestrator.runs import lifecycle as runs
from orchestrator.store.db import Run, Store, sql_limit
from tests.conftest import run_cli


def _run(run_id: str, created: float) -> Run:
    return Run(
        run_id=run_id, name="r", job_name=f"ghr-{run_id}", spec_path=None, spec_json="{}",
        cluster="dev", partition="gh", executor="local", run_dir=f"/nonexistent/{run_id}",
        state="COMPLETED", job_id="local-1", submitted_at=1.0, ended_at=2.0, created_at=created,
    )  # fmt: skip


@pytest.mark.parametrize("limit", [str(10**30), str(2**63), str(2**63 - 1), "3", "1"])
def test_status_lists_runs_whatever_the_limit(tmp_path: Path, limit: str) -> None:
    """`status --limit 10**30` told the user to move a healthy store aside."""
    home = tmp_path / "home"
    store = Store(home)
    for i in range(3):
        store.add_run(_run(f"r-{i}", 100.0 + i))
    res = run_cli(["status", "--limit", limit], home)
    assert res.rc == 0, res.text
    shown = [r for r in ("r-0", "r-1", "r-2") if r in res.out]
    assert shown == ["r-0", "r-1", "r-2"][-min(int(limit), 3) :]
    assert "move it aside" not in res.text


def test_campaign_list_takes_any_limit(tmp_path: Path) -> None:
    """`campaign list --limit 10**23` was an OverflowError."""
    home = tmp_path / "home"
    Store(home)
    for limit in (str(10**23), str(2**64)):
        res = run_cli(["campaign", "list", "--limit", limit], home)
        assert res.rc == 0 and "internal error" not in res.text, res.text


@pytest.mark.parametrize("cmd", [["status"], ["campaign", "list"]])
def test_a_limit_below_one_is_refused_with_exit_2(tmp_path: Path, cmd: list[str]) -> None:
    res = run_cli([*cmd, "--limit", "0"], tmp_path / "home")
    assert res.rc == 2 and "--limit" in res.err and "Traceback" not in res.text


def test_sql_limit() -> None:
    assert sql_limit(10**30) == sql_limit(2**63) == 2**63 - 1
    assert sql_limit(5) == 5 and sql_limit(-3) == 0


def test_a_submit_that_cannot_write_its_intent_leaves_no_run_folder(tmp_path: Path) -> None:
    """Another gh-run holds the store's write lock past the wait: the submit gives up with its
    sentence, and neither a row nor a run folder is left (a folder with no row was)."""
    spec = tmp_path / "t.yaml"
    spec.write_text("name: t\ncluster: dev\nworkload: {command: 'true'}\n")
    home = tmp_path / "home"
    store = Store(home)
    assert store._db is not None
    store._db.execute("PRAGMA busy_timeout = 200")  # 60 s in real use; the same code path
    holder = sqlite3.connect(home / "state.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(RuntimeFailure, match="locked"):
            runs.submit(store, runs.prepare(spec), LocalExecutor(), home)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.list_runs() == []
    folders = (
        [p for p in (home / "runs").rglob("*") if p.is_dir()] if (home / "runs").exists() else []
    )
    assert not any(p.name.startswith("t-") for p in folders), folders
