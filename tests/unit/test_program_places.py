"""Issue 42, class 1: a program is run here only from the places the docs say. `check` and
`doctor SPEC` ask the job's nsys for its version by running it on this machine: the program
must be on the PATH's absolute folders, in the tools prefix, or named by the site's or the
user's own cluster file, never one a job file (a project's) points at, nor one a relative PATH
entry finds in the working folder. What is run is said before it runs. A fake nsys that leaves
a marker (a stand-in that answers like nsys 2023.4) is planted in each hostile place; the same
program in the tools prefix is the control."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = (REPO / "jobs" / "smoke.yaml").read_text()


def fake_nsys(path: Path, marker: Path) -> Path:
    """A stand-in nsys: says it is 2023.4 and leaves `marker` when it runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!/bin/sh\ntouch {marker}\necho 'NVIDIA Nsight Systems version 2023.4.4.54-1'\n"
    )
    path.chmod(0o755)
    return path


def job(project: Path, nsys_path: str | None) -> Path:
    extra = f"  nsys_path: {nsys_path}\n" if nsys_path else ""
    text = SMOKE.replace(
        "workload:",
        "profile:\n  tool: nsys\n  nsys_placement: host\n  trace: [osrt]\n" + extra + "workload:",
    )
    spec = project / "jobs" / "x.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(text)
    return spec


def gh_run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "GH_RUN_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env={**base, "NO_COLOR": "1", "GH_RUN_HOME": str(cwd / "home"), **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _hostile(tmp_path: Path, how: str, marker: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "cloned"
    project.mkdir()
    env = {"GH_RUN_TOOLS": str(tmp_path / "no-tools")}
    if how == "a path into the project":
        prog = fake_nsys(project / "tools" / "nsys", marker)
        job(project, str(prog))
    elif how == "a path elsewhere":
        prog = fake_nsys(tmp_path / "anywhere" / "bin" / "nsys", marker)
        job(project, str(prog))
    elif how == "a relative PATH entry":
        fake_nsys(project / "nsys", marker)
        job(project, None)
        env["PATH"] = f".:{os.environ['PATH']}".replace("/opt/gh-run/bin", "/nonexistent")
    elif how == "a link in the tools prefix's parent":
        prog = fake_nsys(project / "evil" / "nsys", marker)
        (tmp_path / "no-tools").mkdir()
        (tmp_path / "no-tools" / "nsys-link").symlink_to(prog)
        job(project, str(tmp_path / "no-tools" / "nsys-link"))
    else:
        raise AssertionError(how)
    return project, env


HOW = [
    "a path into the project",
    "a path elsewhere",
    "a relative PATH entry",
    "a link in the tools prefix's parent",
]


@pytest.mark.parametrize("command", ["check", "doctor"])
@pytest.mark.parametrize("how", HOW)
def test_a_job_files_nsys_is_never_run_here(tmp_path: Path, how: str, command: str) -> None:
    marker = tmp_path / "program-ran"
    project, env = _hostile(tmp_path, how, marker)
    if how == "a relative PATH entry" and Path("/usr/bin/nsys").exists():
        pytest.skip("an nsys on the system PATH would answer first")
    res = gh_run([command, "jobs/x.yaml"], project, **env)
    assert not marker.exists(), f"{how}: {command} ran the job's nsys\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr
    text = res.stdout + res.stderr
    assert "nsys" in text and "running `" not in text, text


def test_control_the_same_program_in_the_tools_prefix_is_run_and_said_first(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    project = tmp_path / "p"
    project.mkdir()
    prefix = tmp_path / "tools"
    prog = fake_nsys(prefix / "bin" / "nsys-fake", marker)
    job(project, str(prog))
    res = gh_run(["check", "jobs/x.yaml"], project, GH_RUN_TOOLS=str(prefix))
    assert marker.exists(), res.stdout + res.stderr
    said = [ln for ln in res.stderr.splitlines() if "running `" in ln]
    assert said and f"running `{prog} --version` to ask it" in said[0], res.stderr
