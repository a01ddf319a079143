"""Issue 15, class 3 (the local executor contains the whole process tree, `setsid` children
included, and enforces the time limit on all of it), class 2 (a disk that fills while a local
job ends does not turn the finished job into FAILED) and class 5 (a local run whose submitter
died between start and record is repaired from its run folder; `wait` ends; `cancel` never
claims a cancel it did not send). Real processes, real signals, a real full tmpfs."""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.executors.local import LocalExecutor
from orchestrator.runs import lifecycle as runs
from orchestrator.store.db import INTENT, Run, Store
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _spec(tmp: Path, script: str, time_limit: str = "00:01:00", cluster: str = "dev") -> Path:
    path = tmp / "job.yaml"
    body = f"""\
        name: tree
        cluster: {cluster}
        resources: {{time: "{time_limit}"}}
        workload:
          command: bash
          args: [-c, {script!r}]
        artifacts: ["*"]
        """
    path.write_text(textwrap.dedent(body))
    return path


def _run(home: Path, spec: Path, timeout: float = 90) -> tuple[Store, Run]:
    store = Store(home)
    prep = runs.prepare(spec)
    ex = LocalExecutor(time_limit=prep.spec.resources.time)
    run = runs.submit(store, prep, ex, home)
    [run] = runs.wait(store, [run], min_interval=0.2, max_interval=0.5, timeout=timeout)
    return store, run


def _pids(run: Run, *names: str) -> list[int]:
    folder = Path(run.run_dir) / "artifacts"
    return [int((folder / n).read_text()) for n in names]


# Three ways out of a session: setsid, a double fork into setsid, and a nohup'd setsid daemon.
ESCAPES = (
    'setsid sleep 300 & echo $! > "$GH_RUN_ARTIFACTS/a"; '
    '( setsid sleep 301 & echo $! > "$GH_RUN_ARTIFACTS/b" ); '
    '( ( setsid nohup sleep 302 >/dev/null 2>&1 & echo $! > "$GH_RUN_ARTIFACTS/c" ) & ); '
    "sleep 0.5"
)


def test_children_that_setsid_do_not_outlive_the_job(gh_home: Path, tmp_path: Path) -> None:
    _store, run = _run(gh_home, _spec(tmp_path, ESCAPES + "; exit 0"))
    assert run.state == "COMPLETED", run
    pids = _pids(run, "a", "b", "c")
    assert not [p for p in pids if _alive(p)], f"escaped the job: {pids}"


def test_time_limit_stops_setsid_children(gh_home: Path, tmp_path: Path) -> None:
    _store, run = _run(gh_home, _spec(tmp_path, ESCAPES + "; wait; sleep 300", "00:00:03"))
    assert run.state == "TIMEOUT", run
    assert run.ended_at is not None and run.submitted_at is not None
    pids = _pids(run, "a", "b", "c")
    assert not [p for p in pids if _alive(p)], f"ran past the time limit: {pids}"


def test_disk_filling_at_the_end_keeps_a_finished_job_completed(
    gh_home: Path, tmp_path: Path, tmpfs: Callable[[Path, str], Path]
) -> None:
    small_tmpfs = tmpfs(tmp_path / "small", "2m")
    cluster = tmp_path / "clusters" / "full.yaml"
    cluster.parent.mkdir()
    text = (REPO / "clusters" / "dev.yaml").read_text()
    cluster.write_text(text.replace('runs: "{home}/runs"', f'runs: "{small_tmpfs}"'))
    # The job fills the disk holding its run folder, then ends well.
    script = 'head -c 8M /dev/zero > "$GH_RUN_ARTIFACTS/fill"; df -k . >&2; exit 0'
    _store, run = _run(gh_home, _spec(tmp_path, script, cluster=str(cluster)))
    free = shutil.disk_usage(small_tmpfs).free
    assert free < 64 * 1024, free  # really full
    assert run.state == "COMPLETED" and run.exit_code == 0, run


def _interrupted_local_submit(home: Path, tmp: Path, script: str, age: float) -> tuple[Store, Run]:
    """What a gh-run killed between starting the local job and recording its id leaves: an
    INTENT row and a started job. (`age`: how long ago the intent was written.)"""
    store = Store(home)
    prep = runs.prepare(_spec(tmp, script))
    run_id = runs.new_run_id(prep.spec.name)
    run_dir = runs.run_dir_for(prep.cluster, home, run_id)
    rendered = runs.render(prep, run_id, run_dir, "direct")
    job = runs.write_run_folder(run_dir, rendered, prep.spec)
    run = Run(
        run_id=run_id,
        name=prep.spec.name,
        job_name=rendered.context.job_name,
        spec_path=None,
        spec_json=prep.spec.model_dump_json(),
        cluster=prep.cluster.name,
        partition=prep.partition_name,
        executor="local",
        run_dir=str(run_dir),
        created_at=time.time() - age,
    )
    store.add_run(run)
    return store, run if not script else _started(job, run)


def _started(job: Path, run: Run) -> Run:
    LocalExecutor(time_limit="00:01:00").submit(job, run)  # ... and gh-run died here
    return run


def test_local_intent_is_repaired_from_its_run_folder(gh_home: Path, tmp_path: Path) -> None:
    store, run = _interrupted_local_submit(gh_home, tmp_path, "sleep 1; echo done", age=10)
    assert store.get_run(run.run_id).state == INTENT
    res = run_cli(["wait", run.run_id, "--timeout", "60"], gh_home, timeout=120)
    assert res.rc == 0, res.text
    fixed = store.get_run(run.run_id)
    assert fixed.state == "COMPLETED" and fixed.job_id and fixed.job_id.startswith("local-")
    assert any("repaired: found local job" in (e.detail or "") for e in store.events(run.run_id))


def test_local_intent_that_never_started_ends(gh_home: Path, tmp_path: Path) -> None:
    store, run = _interrupted_local_submit(gh_home, tmp_path, "", age=60)
    res = run_cli(["wait", run.run_id, "--timeout", "60"], gh_home, timeout=120)
    assert res.rc == 1, res.text  # ended, not hanging: never submitted
    assert store.get_run(run.run_id).state == "SUBMIT_FAILED"


def test_cancel_of_an_unconfirmed_intent_does_not_claim_success(
    gh_home: Path, tmp_path: Path
) -> None:
    _store, run = _interrupted_local_submit(gh_home, tmp_path, "", age=0)
    res = run_cli(["cancel", run.run_id], gh_home)
    assert res.rc == 1, res.text
    assert "nothing was cancelled" in res.err and "cancel sent" not in res.out
    assert len(res.err.strip().splitlines()) == 1
