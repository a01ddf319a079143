"""Issue 42, class 5 on the REAL dev cluster: a job with secrets cancelled by `scancel` (through
`gh-run cancel`) or killed at its SLURM time limit still cleans its run folder (the batch
script's EXIT trap, within the controller's KillWait), and no file of the run folder, the
artifact store or the gh-run home holds the value in any of its encodings. Before, the scrub
was a post step that neither end reached, and the value went into the artifact store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import secret_scrub as S
from orchestrator.store.db import Store

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
VALUE = "sl0rm-v4lue 'q' \"d\" é/x"
LEAK = (
    'printf \'%s\' "$GHT_SECRET" > "$GH_RUN_ARTIFACTS/leak.txt"; echo "token=$GHT_SECRET";'
    " python3 -c 'import json,os; print(json.dumps(os.environ[\"GHT_SECRET\"]))' >&2;"
    " sleep 300"
)


def _anywhere(root: Path) -> list[str]:
    forms = S.encodings(VALUE)
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != S.SECRETS_FILE
        and any(f in p.read_bytes() for f in forms)
    ]  # fmt: skip


def _submit(cli, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "submit",
        SMOKE,
        "-x",
        "slurm",
        "--set",
        f"workload.args={json.dumps(['-c', LEAK])}",
        "--set",
        "workload.secret_env=[GHT_SECRET]",
        "--set",
        "artifacts.include=['*.txt']",
        *extra,
        env={"GHT_SECRET": VALUE},
        timeout=300,
    )


def _check(gh_home: Path, state: str) -> None:
    run = Store(gh_home).find_run("last")
    assert run.state == state
    folder = Path(run.run_dir)
    assert (folder / S.ATTESTATION).is_file(), sorted(p.name for p in folder.iterdir())
    assert not (folder / S.SECRETS_FILE).exists()
    assert _anywhere(gh_home) == []
    stored = gh_home / "artifacts" / run.run_id / "artifacts" / "leak.txt"
    assert stored.read_bytes() == b"*" * len(VALUE.encode())


def test_a_cancelled_job_cleans_its_secrets(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = _submit(cli)
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    leak = Path(run.run_dir) / "artifacts" / "leak.txt"
    for _ in range(600):
        if leak.exists() and leak.stat().st_size:
            break
        time.sleep(0.1)
    assert cli("cancel", run.run_id).rc == 0
    done = cli("wait", run.run_id, env={"GHT_SECRET": VALUE}, timeout=180)
    assert "CANCELLED" in done.out, done.text
    _check(gh_home, "CANCELLED")


def test_a_job_at_its_time_limit_cleans_its_secrets(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    """SLURM enforces limits at minute granularity: this one takes 1-2 minutes."""
    res = _submit(cli, "--wait", "--set", "resources.time=00:01:00")
    assert res.rc == 1 and "TIMEOUT" in res.out, res.text
    _check(gh_home, "TIMEOUT")
