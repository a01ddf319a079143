"""Shared fixtures: a private gh-run home per test, the CLI as a subprocess, the dev cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def gh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "ghhome"
    monkeypatch.setenv("GH_RUN_HOME", str(home))
    return home


def run_cli(
    args: list[str],
    home: Path,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 300,
) -> CliResult:
    # Jobs inherit the submitting environment (sbatch --export=ALL): put this venv's python
    # first on PATH, as an activated venv would, so `python3` in a job has gh-run's packages.
    full_env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "GH_RUN_HOME": str(home),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliResult(res.returncode, res.stdout, res.stderr)


@pytest.fixture
def cli(gh_home: Path):  # type: ignore[no-untyped-def]
    def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
        return run_cli(list(args), gh_home, env=env, timeout=timeout)

    return _run


@pytest.fixture(scope="session")
def dev_cluster() -> Iterator[None]:
    """The real local SLURM cluster (scripts/devcluster.sh): started, or reused if healthy.

    In CI it must come up; elsewhere a machine that cannot run it skips with the reason.
    """
    from tests import devcluster

    try:
        devcluster.ensure_up()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the dev SLURM cluster did not come up: {exc}")
        pytest.skip(f"the dev SLURM cluster cannot run on this machine: {exc}")
    for key, value in devcluster.slurm_env().items():
        if key.startswith("SLURM"):
            os.environ[key] = value
    yield


def have_shellcheck() -> bool:
    return shutil.which("shellcheck") is not None
