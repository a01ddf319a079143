"""Finding the gh-run home as git finds its repository (issue 16): --home / $GH_RUN_HOME, else
the nearest `.gh-run` here or above, else the per-user default. Which home was used is said
where it helps (issue 25): by `status --verbose` and `doctor`, and by the messages that found
nothing in it; not by every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.paths import locate_home, user_home

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """proj/.gh-run, proj/a/b (no home of its own), elsewhere/ (no home anywhere above)."""
    monkeypatch.delenv("GH_RUN_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "proj" / ".gh-run").mkdir(parents=True)
    (tmp_path / "proj" / "a" / "b").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def test_the_nearest_home_here_or_above(tree: Path) -> None:
    here = locate_home(cwd=tree / "proj")
    assert (here.path, here.source) == (tree / "proj" / ".gh-run", "here")
    assert here.describe() == f"gh-run home: {tree / 'proj' / '.gh-run'} (./.gh-run)"
    above = locate_home(cwd=tree / "proj" / "a" / "b")
    assert (above.path, above.source) == (tree / "proj" / ".gh-run", "above")
    assert above.describe() == (
        f"gh-run home: {tree / 'proj' / '.gh-run'} (the nearest .gh-run above this folder)"
    )


def test_a_file_named_gh_run_is_not_a_home(tree: Path) -> None:
    (tree / "proj" / "a" / ".gh-run").write_text("not a folder")
    assert locate_home(cwd=tree / "proj" / "a" / "b").path == tree / "proj" / ".gh-run"


def test_the_per_user_default_and_xdg(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = locate_home(cwd=tree / "elsewhere")
    assert found.path == tree / "user" / ".local" / "share" / "gh-run" == user_home()
    assert found.source == "user" and "per-user default" in found.describe()
    monkeypatch.setenv("XDG_DATA_HOME", str(tree / "xdg"))
    assert locate_home(cwd=tree / "elsewhere").path == tree / "xdg" / "gh-run"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")  # invalid by the XDG spec: ignored
    assert (
        locate_home(cwd=tree / "elsewhere").path
        == user_home()
        == (tree / "user" / ".local" / "share" / "gh-run")
    )


def test_home_option_and_variable_win(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = locate_home(tree / "given", cwd=tree / "proj")
    assert (given.path, given.source) == (tree / "given", "given")
    assert "(given by --home or GH_RUN_HOME)" in given.describe()
    monkeypatch.setenv("GH_RUN_HOME", str(tree / "env"))
    assert locate_home(cwd=tree / "proj").path == tree / "env"
    assert locate_home(tree / "given", cwd=tree / "proj").path == tree / "given"


def gh_run(args: list[str], cwd: Path, home_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_RUN_HOME", "XDG_DATA_HOME")}
    env.update(HOME=str(home_dir), NO_COLOR="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_runs_do_not_vanish_after_cd(tree: Path) -> None:
    user = tree / "user"
    sub = gh_run(["submit", SMOKE, "-x", "local", "--wait"], tree / "proj", user)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    assert "gh-run home" not in sub.stderr  # the current folder's own home: nothing to say
    run_id = sub.stdout.split()[1]
    assert (tree / "proj" / ".gh-run" / "runs" / run_id).is_dir()

    deeper = gh_run(["status"], tree / "proj" / "a" / "b", user)
    assert deeper.returncode == 0 and run_id in deeper.stdout
    assert deeper.stderr == ""  # the home the rule picks: nothing to say on every command
    verbose = gh_run(["status", "--verbose"], tree / "proj" / "a" / "b", user)
    assert f"gh-run home: {tree / 'proj' / '.gh-run'} (the nearest .gh-run above" in (
        verbose.stderr
    )
    assert run_id in verbose.stdout

    away = gh_run(["status"], tree / "elsewhere", user)
    assert away.returncode == 0 and run_id not in away.stdout
    default = user / ".local" / "share" / "gh-run"
    assert "gh-run home" not in away.stderr
    # Finding nothing says where it looked.
    assert f"no runs yet in {default / 'state.db'}" in away.stdout
    missing = gh_run(["logs", run_id], tree / "elsewhere", user)
    assert missing.returncode == 2
    assert f"no run matches {run_id!r} in {default / 'state.db'}" in missing.stderr
    doctor = gh_run(["doctor"], tree / "elsewhere", user)
    assert f"gh-run home: {default} (the per-user default" in doctor.stdout

    named = gh_run(["--home", str(tree / "proj" / ".gh-run"), "status"], tree / "elsewhere", user)
    assert run_id in named.stdout and "gh-run home" not in named.stderr
