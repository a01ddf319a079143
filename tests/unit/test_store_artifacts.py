"""State store (intent before submission, events, concurrency) and verified artifact copies."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import collect as artifacts
from orchestrator.core.errors import UserError
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import INTENT, Run, Store


def make_run(run_dir: Path, run_id: str = "r-1", executor: str = "local", **kw: object) -> Run:
    spec = JobSpec.model_validate(
        {"name": "t", "workload": {"command": "true"}, "artifacts": ["*.txt", "sub/**/*.bin"]}
    )
    return Run(
        run_id=run_id,
        name="t",
        job_name=f"ghr-{run_id}",
        spec_path=None,
        spec_json=spec.model_dump_json(),
        cluster="dev",
        partition="gh",
        executor=executor,
        run_dir=str(run_dir),
        **kw,
    )  # type: ignore[arg-type]


def test_intent_then_job_id_with_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    store.add_run(make_run(tmp_path))
    assert store.get_run("r-1").state == INTENT
    store.update_run("r-1", job_id="42", state="PENDING", event="submitted")
    store.update_run("r-1", state="RUNNING")
    store.update_run("r-1", state="RUNNING")  # no change: no event
    store.update_run("r-1", state="COMPLETED", exit_code=0)
    assert [e.state for e in store.events("r-1")] == [INTENT, "PENDING", "RUNNING", "COMPLETED"]
    assert store.find_run("42").run_id == "r-1"
    assert store.find_run("r-").run_id == "r-1"
    assert store.find_run("last").run_id == "r-1"


def test_store_files_are_user_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "home").st_mode) == 0o700


def test_unknown_run_is_a_user_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    with pytest.raises(UserError, match="no run"):
        store.find_run("nope")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Store(home)

    def writer(prefix: str) -> None:
        s = Store(home)
        for i in range(50):
            s.add_run(make_run(tmp_path, f"{prefix}-{i}"))
            s.update_run(f"{prefix}-{i}", state="PENDING", job_id=f"{prefix}{i}")

    threads = [threading.Thread(target=writer, args=(p,)) for p in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs = Store(home).list_runs()
    assert len(runs) == 150
    assert len({r.run_id for r in runs}) == 150
    assert all(r.state == "PENDING" for r in runs)


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "artifacts" / "sub" / "deep").mkdir(parents=True)
    (run_dir / "artifacts" / "a.txt").write_text("alpha\n")
    (run_dir / "artifacts" / "sub" / "deep" / "b.bin").write_bytes(os.urandom(3 << 20))
    (run_dir / "artifacts" / "ignored.log").write_text("not matched\n")
    (run_dir / "42_0_log.out").write_text("out\n")
    (run_dir / "42_0_log.err").write_text("err\n")
    (run_dir / "job.sbatch").write_text("#!/bin/bash\n")
    return run_dir


def test_collect_copies_verifies_and_records(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    home = tmp_path / "home"
    store = Store(home)
    run = make_run(run_dir, state="COMPLETED")
    store.add_run(run)
    spec = JobSpec.model_validate_json(run.spec_json)
    manifest = artifacts.collect(store, run, spec, home)
    rels = {f.relpath for f in manifest.files}
    assert {
        "artifacts/a.txt",
        "artifacts/sub/deep/b.bin",
        "logs/42_0_log.out",
        "logs/42_0_log.err",
        "run/job.sbatch",
    } <= rels
    assert "artifacts/ignored.log" not in rels
    dest = home / "artifacts" / "r-1"
    for f in manifest.files:
        assert artifacts.sha256_of(dest / f.relpath) == (f.size, f.sha256)
        assert artifacts.sha256_of(Path(f.source)) == (f.size, f.sha256)
    on_disk = json.loads((dest / "manifest.json").read_text())
    assert {f["relpath"] for f in on_disk["files"]} == rels
    assert store.get_run("r-1").collected_at is not None
    assert {a.relpath for a in store.artifacts("r-1")} == rels
    assert artifacts.verify(store, run, home) == []
    # idempotent: a second fetch changes nothing
    again = artifacts.collect(store, run, spec, home)
    assert [(f.relpath, f.sha256) for f in again.files] == [
        (f.relpath, f.sha256) for f in manifest.files
    ]


def test_symlink_out_of_the_run_is_refused(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not take me\n")
    (run_dir / "artifacts" / "link.txt").symlink_to(secret)
    home = tmp_path / "home"
    store = Store(home)
    run = make_run(run_dir, state="COMPLETED")
    store.add_run(run)
    manifest = artifacts.collect(store, run, JobSpec.model_validate_json(run.spec_json), home)
    assert [r.path for r in manifest.refused] == ["link.txt"]
    assert not (home / "artifacts" / "r-1" / "artifacts" / "link.txt").exists()


def test_verify_detects_a_changed_copy(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    home = tmp_path / "home"
    store = Store(home)
    run = make_run(run_dir, state="COMPLETED")
    store.add_run(run)
    artifacts.collect(store, run, JobSpec.model_validate_json(run.spec_json), home)
    (home / "artifacts" / "r-1" / "artifacts" / "a.txt").write_text("tampered\n")
    problems = artifacts.verify(store, run, home)
    assert problems == ["artifacts/a.txt: size or sha256 differs from the manifest"]


def test_an_intent_is_left_alone_while_the_controller_cannot_be_asked(
    tmp_path: Path, dead_controller: Path
) -> None:
    # gh-run died between its intent and sbatch's answer, long ago; now the controller is down.
    # Not knowing whether the job exists must not turn the run into SUBMIT_FAILED (it may be
    # running), nor stop `gh-run status` from showing the store.
    from tests.conftest import run_cli

    home = tmp_path / "home"
    store = Store(home)
    store.add_run(make_run(tmp_path, executor="slurm", created_at=time.time() - 600))
    res = run_cli(["status"], home, env={"SLURM_CONF": str(dead_controller)})
    assert res.rc == 0, res.text
    assert "r-1" in res.out and "still an intent" in res.err, res.text
    assert Store(home).get_run("r-1").state == INTENT
