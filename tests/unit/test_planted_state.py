"""Issue 42, class 1: files a project carries are data, never instructions. A state store that
came with a project (every file of a clone is the cloner's, so ownership checks pass) holds
rows someone else wrote; gh-run must show them as recorded and never act on them: no retry
that runs the row's job.sbatch, no SSH connection with the row's options (ProxyCommand is a
program ssh runs), no cancel, no collection. Rows are bound to this home and user by a seal
(orchestrator/store/row_seal.py); each way a row can fail to be the user's own is built here, and a
control row sealed by the user in this home shows that each plant would have acted."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.spec.job import load_spec
from orchestrator.store import row_seal
from orchestrator.store.db import Run, Store

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "jobs" / "smoke.yaml"


def gh_run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "GH_RUN_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env={**base, "NO_COLOR": "1", "COLUMNS": "250", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This user's key in a folder of the test's own (XDG_DATA_HOME), for gh-run here and in
    the subprocesses alike."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    row_seal.forget()
    yield
    row_seal.forget()


def _spec_json(retry_on: str) -> str:
    spec = load_spec(SMOKE)
    data = spec.model_dump(mode="json")
    data["retries"] = {"max": 2, "on": [retry_on], "requeue": False}
    return type(spec).model_validate(data).model_dump_json()


def retry_row(project: Path, marker: Path) -> Run:
    """A local run that `status` would find ended at its time limit, with retries left: a
    retry runs its run folder's job.sbatch, here one that leaves a marker."""
    run_dir = project / ".gh-run" / "runs" / "planted-1"
    run_dir.mkdir(parents=True)
    script = run_dir / "job.sbatch"
    script.write_text(f"#!/bin/bash\ntouch {marker}\n")
    (run_dir / "local_exit").write_text("0 time-limit\n")
    return Run(
        run_id="planted-1",
        name="smoke",
        job_name="ghr-planted-1",
        spec_path=None,
        spec_json=_spec_json("TIMEOUT"),
        cluster="dev",
        partition="debug",
        executor="local",
        run_dir=str(run_dir),
        state="RUNNING",
        job_id="local-999999999",
        submitted_at=1.0,
        script_sha256=row_seal.file_sha256(script),
    )


def proxy_row(project: Path, marker: Path) -> Run:
    """A SLURM run reached over SSH whose recorded login runs a program through ProxyCommand
    (and, failing that, through rsync's -e)."""
    login = {
        "source": "clusters/x.yaml",
        "cluster": "dev",
        "user": "someone",
        "host": "planted.invalid",
        "port": 22,
        "options": {"ProxyCommand": f"sh -c 'touch {marker}; exit 1'"},
        "rsync_options": ["-e", f"sh -c 'touch {marker}'"],
        "connect_timeout_s": 2,
    }
    return Run(
        run_id="planted-2",
        name="smoke",
        job_name="ghr-planted-2",
        spec_path=None,
        spec_json=_spec_json("NODE_FAIL"),
        cluster="dev",
        partition="debug",
        executor="slurm",
        run_dir="/cluster/runs/planted-2",
        state="RUNNING",
        job_id="4242",
        submitted_at=1.0,
        transport=json.dumps(login),
        slurm_cluster=None,
    )


ROWS: dict[str, Callable[[Path, Path], Run]] = {"retry": retry_row, "proxy": proxy_row}


def _insert(db_path: Path, run: Run, seal: str | None) -> None:
    from orchestrator.store.db import as_dict

    data = {**as_dict(run), "seal": seal}
    db = sqlite3.connect(db_path)
    db.execute(
        f"INSERT INTO runs ({', '.join(data)}) VALUES ({', '.join(':' + k for k in data)})", data
    )
    db.commit()
    db.close()


def plant(how: str, project: Path, run: Run, tmp_path: Path, mp: pytest.MonkeyPatch) -> None:
    """Write `run` into the project's store, as each way of not being the user's own row."""
    home = project / ".gh-run"
    home.mkdir(exist_ok=True)
    if how == "no seal":
        Store(home).close()
        _insert(home / "state.db", run, None)
    elif how == "a made-up seal":
        Store(home).close()
        _insert(home / "state.db", run, "0" * 64)
    elif how == "another user's key":
        with mp.context() as m:
            m.setenv("XDG_DATA_HOME", str(tmp_path / "their-data"))
            row_seal.forget()
            Store(home).add_run(run)
        row_seal.forget()
    elif how == "this user's key, another home":
        elsewhere = tmp_path / "elsewhere" / ".gh-run"
        Store(elsewhere).add_run(run)
        for suffix in ("", "-wal", "-shm"):
            src = elsewhere / f"state.db{suffix}"
            if src.exists():
                (home / src.name).write_bytes(src.read_bytes())
    elif how == "sealed, then a sealed field changed":
        store = Store(home)
        store.add_run(run)
        store.close()
        db = sqlite3.connect(home / "state.db")
        db.execute("UPDATE runs SET job_name = job_name || 'x'")
        db.commit()
        db.close()
    elif how == "a store from before seals":
        Store(home).close()
        db = sqlite3.connect(home / "state.db")
        db.execute("ALTER TABLE runs DROP COLUMN seal")
        db.execute("ALTER TABLE runs DROP COLUMN script_sha256")
        db.execute("PRAGMA user_version = 4")
        db.commit()
        db.close()
        from orchestrator.store.db import as_dict

        data = {k: v for k, v in as_dict(run).items() if k not in ("seal", "script_sha256")}
        db = sqlite3.connect(home / "state.db")
        db.execute(
            f"INSERT INTO runs ({', '.join(data)}) VALUES ({', '.join(':' + k for k in data)})",
            data,
        )
        db.commit()
        db.close()
    elif how == "control: sealed by this user here":
        Store(home).add_run(run)
    else:
        raise AssertionError(how)


HOWS = [
    "no seal",
    "a made-up seal",
    "another user's key",
    "this user's key, another home",
    "sealed, then a sealed field changed",
    "a store from before seals",
]


@pytest.mark.parametrize("kind", sorted(ROWS))
@pytest.mark.parametrize("how", HOWS)
def test_a_planted_row_is_shown_and_never_acted_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, how: str
) -> None:
    project = tmp_path / "cloned"
    project.mkdir()
    marker = tmp_path / "planted-code-ran"
    run = ROWS[kind](project, marker)
    plant(how, project, run, tmp_path, monkeypatch)
    status = gh_run(["status"], project)
    assert status.returncode == 0, status.stdout + status.stderr
    assert run.run_id in status.stdout and "RUNNING" in status.stdout
    assert "not bound to this home" in status.stderr, status.stderr
    one = gh_run(["status", run.run_id], project)
    assert one.returncode == 0 and "not bound" in one.stdout, one.stdout + one.stderr
    for args in (["cancel", run.run_id], ["fetch", run.run_id], ["wait", run.run_id]):
        res = gh_run(args, project)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and "gh-run adopt" in errors[0], res.stderr
        assert "Traceback" not in res.stderr
    if kind == "proxy":
        res = gh_run(["logs", run.run_id], project)
        assert res.returncode == 2 and "no connection was made" in res.stderr, res.stderr
    assert not marker.exists(), f"{how}: the planted row's program ran"
    # the row is as it was: nothing recorded a retry or a new state
    db = sqlite3.connect(project / ".gh-run" / "state.db")
    assert db.execute("SELECT state, attempt FROM runs").fetchall() == [("RUNNING", 0)]


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_control_the_same_row_of_ones_own_acts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The same rows, sealed by this user in this home: `status` retries the one and reaches
    the other through its ProxyCommand: the plants above would have run."""
    project = tmp_path / "own"
    project.mkdir()
    marker = tmp_path / "code-ran"
    run = ROWS[kind](project, marker)
    plant("control: sealed by this user here", project, run, tmp_path, monkeypatch)
    gh_run(["status"], project)
    if kind == "retry":  # the retry runs in the background: wait for the supervisor
        import time

        for _ in range(100):
            if marker.exists():
                break
            time.sleep(0.1)
    assert marker.exists()


def test_adopt_says_what_it_binds_and_then_the_run_is_acted_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "cloned"
    project.mkdir()
    marker = tmp_path / "ran"
    proxy = proxy_row(project, marker)
    plant("no seal", project, proxy, tmp_path, monkeypatch)
    res = gh_run(["adopt", proxy.run_id], project)
    assert res.returncode == 0, res.stderr
    assert "-o ProxyCommand=sh -c 'touch" in res.stdout and "rsync -e" in res.stdout
    assert "bound" in res.stdout and not marker.exists()  # adopting reaches nothing
    store = Store(project / ".gh-run")
    assert store.get_run(proxy.run_id).unbound is None


def test_a_retry_of_ones_own_run_refuses_a_changed_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's own sealed row, whose job.sbatch changed after it was written (a pull into
    a committed run folder): the retry is not submitted, and the event says why."""
    project = tmp_path / "own"
    project.mkdir()
    marker = tmp_path / "changed-script-ran"
    run = retry_row(project, marker)
    Path(run.run_dir, "job.sbatch").write_text(f"#!/bin/bash\ntouch {marker}-x\n")
    Store(project / ".gh-run").add_run(run)
    gh_run(["status"], project)
    store = Store(project / ".gh-run")
    events = " ".join(e.detail or "" for e in store.events(run.run_id))
    assert "retry not submitted" in events and "sha256 differs" in events, events
    assert not Path(f"{marker}-x").exists()


def test_planted_campaign_groups_and_schedules_are_not_acted_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campaign's plan and a schedule record that came with a project: `campaign resume`
    sends no group script, and `campaign list` reaches no host through the record's login."""
    from orchestrator.store import campaigns as db

    project = tmp_path / "cloned"
    project.mkdir()
    home = project / ".gh-run"
    marker = tmp_path / "group-ran"
    run = retry_row(project, marker)
    Store(home).close()
    _insert(home / "state.db", Run(**{**run.__dict__, "state": "INTENT", "job_id": None,
                                       "campaign_id": "c-1", "variant": "v"}), None)  # fmt: skip
    con = sqlite3.connect(home / "state.db")
    con.execute(
        "INSERT INTO campaigns (campaign_id, name, file, campaign_json, executor, state, "
        "created_at) VALUES ('c-1', 'c', NULL, '{}', 'local', 'PLANNED', 1.0)"
    )
    con.execute(
        "INSERT INTO campaign_groups (campaign_id, group_index, job_name, script, size, "
        "is_array, state) VALUES ('c-1', 0, 'ghr-c', ?, 1, 0, 'PLANNED')",
        (str(Path(run.run_dir) / "job.sbatch"),),
    )
    con.execute(
        "INSERT INTO campaign_variants (campaign_id, variant, overrides_json, group_index, "
        "array_index, run_id) VALUES ('c-1', 'v', '[]', 0, 0, 'planted-1')"
    )
    con.commit()
    con.close()
    store = Store(home)
    group = db.groups_of(store, "c-1")[0]
    from orchestrator.campaign.submission import send

    failures = send(store, "c-1")
    assert failures and "not bound to this home" in failures[0], failures
    assert not marker.exists()
    assert group.seal is None
    (home / "schedules").mkdir()
    (home / "schedules" / "c.json").write_text(
        json.dumps(
            {
                "name": "c",
                "mode": "cron",
                "file": "/x.yaml",
                "cron": "0 2 * * *",
                "tz": "UTC",
                "installed_at": 1.0,
                "transport": proxy_row(project, marker).transport,
            }
        )
    )
    listing = gh_run(["campaign", "list"], project)
    assert "not checked: not installed by you" in listing.stdout, listing.stdout + listing.stderr
    gone = gh_run(["campaign", "unschedule", "c"], project)
    assert gone.returncode == 2 and "nothing was removed" in gone.stderr, gone.stderr
    assert not marker.exists()
