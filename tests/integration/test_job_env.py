"""A profiler must not change what it profiles (issue 35 item 5): the environment a
single-process job's workload sees is the one it would see without gh-run, apart from gh-run's
own documented variables (GH_RUN_*), the spec's `env` and what the cluster file sets. Rendezvous
variables (RANK, LOCAL_RANK, NODE_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, MASTER_NODE) only
where the job runs more than one task, or where the spec asks (`workload.distributed_env`):
Hugging Face accelerate starts an NCCL process group for one GPU when it finds them.

Real runs through the local executor (the very script SLURM would run, under bash).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from orchestrator.store.db import Store

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
DUMP = (
    "import json, os; "
    "json.dump(dict(os.environ), open(os.environ['GH_RUN_ARTIFACTS'] + '/env.txt', 'w'))"
)
RENDEZVOUS = {"RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "MASTER_NODE"}  # fmt: skip
# what bash itself sets in any script it runs, with or without gh-run
SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}
# gh-run's own variables (docs/templates.md), the smoke spec's env, the dev partition's PATH
DOCUMENTED = {"GH_RUN_ID", "GH_RUN_NAME", "GH_RUN_DIR", "GH_RUN_ARTIFACTS", "GH_RUN_CLUSTER",
              "GH_RUN_PARTITION", "GH_RUN_EXECUTOR", "GREETING", "PATH"}  # fmt: skip


def _job_env(cli, gh_home: Path, tmp_path: Path, *sets: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    args = json.dumps(["-c", DUMP])
    res = cli(
        "submit", SMOKE, "--executor", "local", "--wait",
        "--set", f"workload.command={sys.executable}", "--set", f"workload.args={args}",
        *sets,
        env={"SLURM_CONF": str(tmp_path / "no-such-slurm.conf")},
    )  # fmt: skip
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    found = gh_home / "artifacts" / run.run_id / "artifacts" / "env.txt"
    env: dict[str, str] = json.loads(found.read_text())
    return env


def test_a_single_process_job_sees_the_environment_it_would_see_without_gh_run(  # type: ignore[no-untyped-def]
    cli, gh_home: Path, tmp_path: Path
) -> None:
    env = _job_env(cli, gh_home, tmp_path)
    assert not RENDEZVOUS & set(env), sorted(RENDEZVOUS & set(env))
    # the submitting environment (as the cli fixture passes it) reaches the workload unchanged
    submitted = {
        **os.environ,
        "GH_RUN_HOME": str(gh_home),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "SLURM_CONF": str(tmp_path / "no-such-slurm.conf"),
    }
    changed = {k for k in set(env) | set(submitted) if env.get(k) != submitted.get(k)}
    assert changed - SHELL_OWN - DOCUMENTED == set(), sorted(changed - SHELL_OWN - DOCUMENTED)
    assert env["GREETING"] == "hello, world" and env["GH_RUN_NAME"] == "smoke"


@pytest.mark.parametrize(("ask", "present"), [("true", True), ("false", False)])
def test_the_spec_decides_where_it_says(  # type: ignore[no-untyped-def]
    cli, gh_home: Path, tmp_path: Path, ask: str, present: bool
) -> None:
    env = _job_env(cli, gh_home, tmp_path, "--set", f"workload.distributed_env={ask}")
    if present:
        assert {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} <= set(env)
        assert env["RANK"] == "0" and env["WORLD_SIZE"] == "1"
    else:
        assert not RENDEZVOUS & set(env)
