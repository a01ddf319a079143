"""Faults injected for real (issue 8): daemons stopped, a node set DOWN under a running job,
gh-run SIGKILLed between its intent and sbatch's answer, two processes racing on one store,
a full disk and interrupted copies. Every test restores the cluster in a `finally`.
Nothing is mocked: sbatch/squeue/sacct/scontrol are the real ones of scripts/devcluster.sh.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts import collect as artifacts
from orchestrator.core.errors import RuntimeFailure
from orchestrator.executors.local import LocalExecutor
from orchestrator.runs import lifecycle as runs
from orchestrator.store.db import Run, Store
from tests import devcluster
from tests.conftest import REPO

SMOKE = str(REPO / "jobs" / "smoke.yaml")


def _slurm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), env=devcluster.slurm_env(), capture_output=True, text=True, check=False
    )


def _until(pred: Callable[[], bool], timeout: float = 60.0, step: float = 0.5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def _write_spec(tmp: Path, name: str, body: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture
def stopped() -> Iterator[Callable[[str], None]]:
    """stop(daemon) for the test; every daemon it stopped is started again afterwards."""
    done: list[str] = []

    def _stop(daemon: str) -> None:
        done.append(daemon)
        devcluster.stop(daemon)

    try:
        yield _stop
    finally:
        for daemon in reversed(done):
            devcluster.start(daemon)


# -- daemons down --------------------------------------------------------------------------------
@pytest.mark.cluster_exclusive  # stops a daemon
@pytest.mark.cluster
def test_slurmctld_down_at_submit(dev_cluster, cli, gh_home: Path, stopped) -> None:  # type: ignore[no-untyped-def]
    stopped("slurmctld")
    rid = "down-at-submit-" + os.urandom(4).hex()
    res = cli("submit", SMOKE, "-x", "slurm", "--run-id", rid, timeout=120)
    assert res.rc == 1, res.text
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "could not be reached" in lines[0] and "Traceback" not in res.text
    # gh-run asks the controller which cluster it is before it writes anything: no controller,
    # nothing written, nothing sent.
    assert "sent nothing" in lines[0]
    assert Store(gh_home).list_runs() == []
    devcluster.start("slurmctld")
    assert not _slurm("squeue", "-h", "--name", f"ghr-{rid}").stdout.strip()
    # A later status does not resurrect it.
    assert cli("status").rc == 0 and Store(gh_home).list_runs() == []


@pytest.mark.cluster_exclusive  # stops a daemon
@pytest.mark.cluster
def test_slurmctld_down_during_wait(dev_cluster, cli, gh_home: Path, stopped) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "-x", "slurm", "--set", "workload.args=[-c, 'sleep 6; echo ok']")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    # Wait for the workload's srun step, not only the job: srun asks the controller for its step,
    # so a batch script that reaches srun during the outage fails (a slow machine showed it).
    step = re.compile(rf"^{run.job_id}\.\d+$", re.M)
    steps = ("squeue", "-h", "-s", "-j", str(run.job_id), "-o", "%i")
    assert _until(lambda: bool(step.search(_slurm(*steps).stdout)))
    # Both gone, so every poll fails (sacct alone still answers while only slurmctld is down):
    # the waiter starts during the outage and must retry with backoff until they return.
    stopped("slurmctld")
    stopped("slurmdbd")
    env = {**devcluster.slurm_env(), "GH_RUN_HOME": str(gh_home), "NO_COLOR": "1"}
    waiter = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "wait", run.run_id],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The daemons stay down until the waiter has said it failed twice (squeue alone takes
    # ~8 s to give up on a dead controller, so a fixed short outage may never be noticed).
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(waiter.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        assert _until(lambda: any("retry 2," in line for line in lines), 90), "".join(lines)
        devcluster.start("slurmdbd")
        devcluster.start("slurmctld")
        out = waiter.stdout.read() if waiter.stdout else ""  # type: ignore[union-attr]
        waiter.wait(timeout=240)
        reader.join(timeout=10)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    err = "".join(lines)
    assert waiter.returncode == 0, out + err
    final = Store(gh_home).get_run(run.run_id)
    assert final.state == "COMPLETED" and final.exit_code == 0
    # The outage was seen and survived: every poll during it failed and was retried with an
    # exponential backoff (2 s, 4 s, ...), said in one line each.
    retries = [(int(n), int(s)) for n, s in re.findall(r"retry (\d+), next in (\d+) s", err)]
    assert retries, err
    assert [n for n, _ in retries] == list(range(1, len(retries) + 1)), err
    assert all(s == min(60, 2**n) for n, s in retries), err
    assert "Traceback" not in err


@pytest.mark.cluster_exclusive  # stops a daemon
@pytest.mark.cluster
def test_slurmdbd_down_falls_back_to_squeue_scontrol(
    dev_cluster, cli, gh_home: Path, stopped
) -> None:  # type: ignore[no-untyped-def]
    stopped("slurmdbd")
    ok = cli("submit", SMOKE, "-x", "slurm", "--wait", timeout=180)
    assert ok.rc == 0, ok.text
    warnings = [ln for ln in ok.err.splitlines() if "falling back to squeue/scontrol" in ln]
    assert len(warnings) == 1, ok.err
    bad = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "workload.args=[-c, 'echo dbd-down-fail >&2; exit 4']",
        timeout=180,
    )
    assert bad.rc == 1, bad.text
    run = Store(gh_home).find_run("last")
    assert (run.state, run.exit_code) == ("FAILED", 4)
    assert "dbd-down-fail" in bad.out


# -- a node fails under a running job -------------------------------------------------------------
def _down_node_under(job_id: str) -> str:
    assert _until(
        lambda: _slurm("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "RUNNING"
    )
    node = _slurm("squeue", "-h", "-j", job_id, "-o", "%N").stdout.strip()
    assert node in devcluster.NODES
    res = _slurm("scontrol", "update", f"nodename={node}", "state=down", "reason=gh-run-test")
    assert res.returncode == 0, res.stderr
    return node


def _resume(node: str) -> None:
    _slurm("scontrol", "update", f"nodename={node}", "state=resume")
    _until(lambda: "down" not in _slurm("sinfo", "-h", "-n", node, "-o", "%T").stdout, timeout=60)


@pytest.mark.cluster_exclusive  # takes a node down
@pytest.mark.cluster
def test_node_down_gh_run_resubmits(dev_cluster, cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = _write_spec(
        tmp_path,
        "nodefail",
        """\
        name: nodefail
        cluster: dev
        resources: {time: "00:05:00"}
        workload:
          command: bash
          args: [-c, 'echo "attempt on $SLURMD_NODENAME"; sleep 4']
        retries: {max: 1, on: [NODE_FAIL], requeue: false}
        """,
    )
    res = cli("submit", str(spec), "-x", "slurm")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert "--no-requeue" in (Path(run.run_dir) / "job.sbatch").read_text()
    node = _down_node_under(str(run.job_id))
    try:
        assert _until(
            lambda: (
                _slurm("sacct", "-n", "-X", "-j", str(run.job_id), "-o", "State")
                .stdout.strip()
                .startswith("NODE_FAIL")
            ),
            60,
        )
    finally:
        _resume(node)
    done = cli("wait", run.run_id, timeout=240)
    final = Store(gh_home).get_run(run.run_id)
    details = [e.detail or "" for e in Store(gh_home).events(run.run_id)]
    assert final.state == "COMPLETED" and final.attempt == 1, (done.text, details)
    assert final.job_id != run.job_id
    assert any("NODE_FAIL" in d for d in details)
    assert any(f"resubmitted as job {final.job_id}" in d for d in details)
    # One job per attempt, never a duplicate.
    jobs = _slurm("sacct", "-n", "-X", "-P", "--name", run.job_name, "-o", "JobID").stdout.split()
    assert sorted(jobs) == sorted({str(run.job_id), str(final.job_id)})


@pytest.mark.cluster_exclusive  # takes a node down
@pytest.mark.cluster
def test_node_down_slurm_requeue_recorded(dev_cluster, cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = _write_spec(
        tmp_path,
        "requeue",
        """\
        name: requeue
        cluster: dev
        workload: {command: bash, args: [-c, 'sleep 120']}
        retries: {max: 2, on: [NODE_FAIL, PREEMPTED, TIMEOUT], signal_seconds: 30}
        """,
    )
    res = cli("submit", str(spec), "-x", "slurm")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    script = (Path(run.run_dir) / "job.sbatch").read_text()
    assert "#SBATCH --requeue" in script and "#SBATCH --signal=B:USR1@30" in script
    assert _until(
        lambda: json.loads(cli("status", run.run_id, "--json").out)[0]["run"]["state"] == "RUNNING",
        60,
    )
    node = _down_node_under(str(run.job_id))
    try:

        def requeued() -> bool:
            cli("status", run.run_id)
            return Store(gh_home).get_run(run.run_id).attempt == 1

        assert _until(requeued, 60)
    finally:
        _resume(node)
        cli("cancel", run.run_id)
    final = Store(gh_home).get_run(run.run_id)
    assert final.job_id == run.job_id  # SLURM kept the id: no second submission by gh-run
    assert any("SLURM requeued" in (e.detail or "") for e in Store(gh_home).events(run.run_id))


# -- how jobs end ----------------------------------------------------------------------
@pytest.mark.cluster
def test_killed_by_signal_recorded(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "workload.args=[-c, 'echo about-to-die >&2; kill -KILL $$']",
    )
    assert res.rc == 1, res.text
    run = Store(gh_home).find_run("last")
    assert run.state == "FAILED", res.text
    # srun reports the task's SIGKILL as 128+9 from the batch step.
    assert run.exit_code == 137 or "signal 9" in (run.reason or ""), run
    assert "about-to-die" in res.out


@pytest.mark.cluster
def test_out_of_memory_recorded(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    # The dev cluster enforces --mem through jobacct_gather's OverMemoryKill (polled every
    # second): slurmstepd SIGKILLs the step, sacct says FAILED, and slurmstepd writes
    # "Exceeded job memory limit" into the step's stderr; gh-run records OUT_OF_MEMORY.
    alloc = "x = bytearray(600 * 1024 * 1024); import time; time.sleep(20); print(''survived'')"
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--wait",
        "--set",
        "resources.mem=200M",
        "--set",
        f"workload.args=[-c, 'echo allocating-600M >&2; python3 -c \"{alloc}\"']",
        timeout=60,
    )
    assert res.rc == 1, res.text
    run = Store(gh_home).find_run("last")
    assert run.state == "OUT_OF_MEMORY", res.text
    assert "Exceeded job memory limit" in (run.reason or "") and "sacct state FAILED" in (
        run.reason or ""
    ), run
    # Killed while holding the memory: the line after the sleep never ran.
    logs = cli("logs", run.run_id)
    assert logs.rc == 0 and "survived" not in logs.out, logs.text
    # The log tail: the workload's own line and slurmstepd's reason.
    assert "OUT_OF_MEMORY" in res.out and "allocating-600M" in res.out, res.out
    assert "exceeded memory limit" in res.out, res.out
    status = cli("status", run.run_id)
    assert status.rc == 0 and "OUT_OF_MEMORY" in status.out, status.text
    assert "Exceeded job memory limit" in status.out, status.out


# -- gh-run killed between its intent and sbatch's answer ---------------------------------------
@pytest.mark.cluster
def test_sigkill_between_intent_and_job_id_is_repaired(
    dev_cluster, cli, gh_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    real = shutil.which("sbatch", path=devcluster.slurm_env().get("PATH"))
    assert real
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "wrapper.pid"
    # A slow sbatch: the real sbatch submits, then the answer is held back 60 s.
    (bindir / "sbatch").write_text(
        f'#!/bin/bash\necho $$ > {pidfile}\nout="$({real} "$@")"; rc=$?\nsleep 60\n'
        'echo "$out"; exit $rc\n'
    )
    (bindir / "sbatch").chmod(0o755)
    env = {
        **devcluster.slurm_env(),
        "GH_RUN_HOME": str(gh_home),
        "PATH": f"{bindir}:{os.environ['PATH']}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "submit", SMOKE, "-x", "slurm"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def job_exists() -> bool:
            if not (gh_home / "state.db").exists():
                return False
            try:
                with contextlib.closing(sqlite3.connect(gh_home / "state.db")) as con, con:
                    row = con.execute("SELECT job_name FROM runs").fetchone()
            except sqlite3.OperationalError:
                # The file is created a moment before its tables: not yet a run to look for.
                return False
            if not row:
                return False
            queued = _slurm("squeue", "-h", "--name", row[0]).stdout.strip()
            known = _slurm("sacct", "-n", "-X", "--name", row[0], "-o", "JobID").stdout.strip()
            return bool(queued or known)

        assert _until(job_exists, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
    run = Store(gh_home).find_run("last")
    assert run.state == "INTENT" and run.job_id is None
    time.sleep(5.5)  # repair leaves intents younger than 5 s to a live submitter
    status = cli("status", run.run_id)
    assert status.rc == 0, status.text
    repaired = Store(gh_home).get_run(run.run_id)
    assert repaired.job_id and repaired.state != "INTENT"
    assert any("repaired: found job" in (e.detail or "") for e in Store(gh_home).events(run.run_id))
    assert cli("wait", run.run_id).rc == 0
    ids = _slurm("sacct", "-n", "-X", "-P", "--name", run.job_name, "-o", "JobID").stdout.split()
    assert ids == [repaired.job_id], "a duplicate job was submitted"


# -- two processes, one state store --------------------------------------------------------------
DRIVER = """
import sys
from pathlib import Path
from orchestrator.runs import lifecycle as R
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.store.db import Run, Store
home = Path(sys.argv[1]); spec = Path(sys.argv[2])
store = Store(home); prep = R.prepare(spec)
for _ in range(100):
    R.submit(store, prep, SlurmExecutor(), home)
"""


@pytest.mark.cluster_exclusive  # 200 jobs fill the queue
@pytest.mark.cluster
def test_two_processes_200_runs_none_lost(dev_cluster, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Two processes running gh-run's own submit path (runs.submit, what `gh-run submit` calls)
    # against the real controller, 100 sbatch calls each, into one state store at once.
    spec = _write_spec(
        tmp_path, "trivial", "name: trivial\ncluster: dev\nworkload: {command: 'true'}\n"
    )
    env = {**os.environ, "GH_RUN_HOME": str(gh_home)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(gh_home), str(spec)],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    store = Store(gh_home)
    all_runs = store.list_runs()
    assert len(all_runs) == 200
    assert len({r.run_id for r in all_runs}) == 200
    assert len({r.job_id for r in all_runs}) == 200
    assert len({r.run_dir for r in all_runs}) == 200
    assert len(list((gh_home / "runs").iterdir())) == 200
    # The controller's own view: each run's unique job name was submitted exactly once.
    queued = _slurm("squeue", "-h", "--states=all", "-o", "%j").stdout.split()
    ours = {r.job_name for r in all_runs}
    assert len(ours) == 200
    assert sorted(n for n in queued if n in ours) == sorted(ours)
    # Running 200 jobs on the dev cluster's 4 CPUs takes minutes and proves nothing more
    # about the store: cancel them in one scancel, then track all 200 to an end (one batched
    # query per poll).
    assert _slurm("scancel", *[r.job_id or "" for r in all_runs]).returncode == 0
    final = runs.wait(store, all_runs, min_interval=0.5, max_interval=2.0, timeout=240)
    assert len(final) == 200
    assert {r.state for r in final} <= {"COMPLETED", "CANCELLED"}, {r.state for r in final}
    for r in all_runs[:5]:
        assert [e.state for e in store.events(r.run_id)][:2] == ["INTENT", "PENDING"]


# -- artifacts: interrupted, truncated, disk full ------------------------------------------------
def _finished_local_run(home: Path, tmp: Path, size: int) -> tuple[Store, Run]:
    spec = _write_spec(
        tmp,
        "art",
        f"""\
        name: art
        cluster: dev
        workload:
          command: bash
          args: [-c, 'head -c {size} /dev/urandom > "$GH_RUN_ARTIFACTS/blob.bin"']
        artifacts: ["*.bin"]
        """,
    )
    store = Store(home)
    run = runs.submit(store, runs.prepare(spec), LocalExecutor(time_limit="00:01:00"), home)
    [run] = runs.wait(store, [run], min_interval=0.2, max_interval=0.5, timeout=60)
    assert run.state == "COMPLETED"
    return store, run


def test_truncated_source_never_marked_collected(
    gh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run = _finished_local_run(gh_home, tmp_path, 3 << 20)
    src = Path(run.run_dir) / "artifacts" / "blob.bin"
    real_copy = artifacts.copy_data

    def truncating_copy(fin: int, fout: int, size: int) -> None:
        # The job (or a cleaner) truncates the file while gh-run is copying it: a real
        # truncate(2) on the real source file, in the middle of the copy.
        if size == 3 << 20:
            os.pwrite(fout, os.pread(fin, 1 << 20, 0), 0)
            os.truncate(src, 1000)
        real_copy(fin, fout, size)

    monkeypatch.setattr(artifacts, "copy_data", truncating_copy)
    with pytest.raises(RuntimeFailure, match="does not match the source"):
        runs.collect(store, run, gh_home)
    assert store.artifacts(run.run_id) == []
    assert store.get_run(run.run_id).collected_at is None
    dest = gh_home / "artifacts" / run.run_id
    assert not list(dest.rglob("blob.bin*")) and not list(dest.rglob(".*.partial"))


def test_interrupted_collection_never_marked_collected(
    gh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run = _finished_local_run(gh_home, tmp_path, 2 << 20)
    src = Path(run.run_dir) / "artifacts" / "blob.bin"
    before = artifacts.sha256_of(src)

    real_copy = artifacts.copy_data

    def interrupted(fin: int, fout: int, size: int) -> None:
        if size != 2 << 20:  # the run's own small files come first
            return real_copy(fin, fout, size)
        os.pwrite(fout, os.pread(fin, 1 << 20, 0), 0)
        raise KeyboardInterrupt  # Ctrl-C in the middle of the copy

    monkeypatch.setattr(artifacts, "copy_data", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runs.collect(store, run, gh_home)
    assert store.artifacts(run.run_id) == [] and store.get_run(run.run_id).collected_at is None
    assert not list((gh_home / "artifacts").rglob(".*.partial"))
    assert artifacts.sha256_of(src) == before
    monkeypatch.undo()
    manifest = runs.collect(store, run, gh_home)  # the next fetch completes it
    assert any(
        f.relpath == "artifacts/blob.bin" and (f.size, f.sha256) == before for f in manifest.files
    )


def test_disk_full_at_destination(gh_home: Path, tmp_path: Path, cli, tmpfs) -> None:  # type: ignore[no-untyped-def]
    _store, run = _finished_local_run(gh_home, tmp_path, 3 << 20)
    src = Path(run.run_dir) / "artifacts" / "blob.bin"
    before = artifacts.sha256_of(src)
    target = tmpfs(gh_home / "artifacts", "1m")
    try:
        res = cli("fetch", run.run_id)
        assert res.rc == 1, res.text
        assert "no space left" in res.err and "source is untouched" in res.err
        assert "Traceback" not in res.text
        assert Store(gh_home).artifacts(run.run_id) == []
        assert Store(gh_home).get_run(run.run_id).collected_at is None
        assert not list(target.rglob(".*.partial"))
    finally:
        subprocess.run(["umount", str(target)], check=False)
    assert artifacts.sha256_of(src) == before
