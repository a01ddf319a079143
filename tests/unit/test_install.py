"""What `make demo` and `make test` install (issue 16): the demo gets gh-run and its runtime
dependencies only (no torch, no test tools); torch comes where it is used (`make workload`,
`make test`). Checked as dry runs: make's own plan for a venv that does not exist yet, and pip's
resolution (`pip install --dry-run --report`) of what the demo installs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEV_ONLY = {"pytest", "ruff", "mypy", "hypothesis", "holistictraceanalysis", "jsonschema"}


def make_plan(target: str, tmp_path: Path) -> list[list[str]]:
    """The commands `make TARGET` would run on a fresh machine (a venv that does not exist)."""
    res = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    text = res.stdout.replace("\\\n", " ")  # a recipe line continued with a backslash
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def pip_installs(plan: list[list[str]]) -> list[list[str]]:
    return [argv[argv.index("install") + 1 :] for argv in plan if "pip" in argv[0]]


def test_make_demo_installs_gh_run_alone(tmp_path: Path) -> None:
    installs = pip_installs(make_plan("demo", tmp_path))
    assert installs == [["-q", "-e", "."]], installs  # no extras, no torch, no pip upgrade
    plan = make_plan("demo", tmp_path)
    first_run = next(a[1:3] for a in plan if a[0].endswith("gh-run"))
    assert first_run == ["submit", "jobs/smoke.yaml"]


def test_make_test_and_workload_install_torch_where_it_is_used(tmp_path: Path) -> None:
    test = [" ".join(a) for a in pip_installs(make_plan("test", tmp_path))]
    assert any(re.search(r"\btorch==", a) for a in test), test
    assert any("-e .[dev,workload]" in a for a in test), test
    work = [" ".join(a) for a in pip_installs(make_plan("workload", tmp_path))]
    assert any(re.search(r"\btorch==", a) for a in work) and "-q -e .[workload]" in work, work


def test_the_demos_dependencies_resolve_without_torch(tmp_path: Path) -> None:
    """pip's own resolution of gh-run's runtime dependencies (what `pip install -e .` adds)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    res = subprocess.run(
        [*pip, "--report", str(report), *project["dependencies"]],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert {"pydantic", "jinja2", "typer", "submitit", "numpy"} <= names, names
    assert "torch" not in names and not any(n.startswith("nvidia-") for n in names), names
    assert not names & DEV_ONLY, names & DEV_ONLY
    assert set(project["optional-dependencies"]["workload"]) == {"torch>=2.4"}


def test_the_workload_says_how_to_get_torch_when_it_is_missing() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"  # as in a venv made by `make demo`
        "from workloads.sft import main\n"
        "sys.exit(main(['--device', 'cpu', '--steps', '1']))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2, res.stderr
    assert "torch is not installed" in res.stderr and "make workload" in res.stderr
