"""Issue 42, class 6, the small ones: the controller's ClusterName is text from elsewhere and is
printed with its control characters escaped; `gh-run init` writes all its files or none (a
`.gh-run` that is a file, or any file where a folder is needed, left half a project before)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.executors import cluster_identity
from orchestrator.site.cluster import load_cluster
from orchestrator.transport.local import LOCAL

REPO = Path(__file__).resolve().parents[2]
DEV = (REPO / "clusters" / "dev.yaml").read_text()

NAMES = [
    "\x1b]0;pwned\x07ghdev",  # sets the terminal's title
    "gh\x1b[2Jdev",  # clears the screen
    "ghdev\u202etxt.exe",  # bidi override
    "gh\rdev",
]


@pytest.fixture
def answered(request: pytest.FixtureRequest) -> Iterator[str]:
    """The controller's answer as `scontrol show config` would have it parsed: only the name
    differs (the question itself is the real scontrol's; its parsing is tested apart)."""
    name = request.param
    cluster_identity.forget()
    cluster_identity._ANSWERS[(LOCAL.key, None)] = cluster_identity.ControllerFacts(name, None)
    yield name
    cluster_identity.forget()


@pytest.mark.parametrize("answered", NAMES, indirect=True)
def test_a_controllers_name_is_shown_escaped(answered: str, tmp_path: Path) -> None:
    if not __import__("shutil").which("scontrol"):
        pytest.skip("no SLURM client here")
    cluster = load_cluster(str(REPO / "clusters" / "dev.yaml"))
    with pytest.raises(UserError) as got:
        cluster_identity.confirm(cluster, LOCAL)
    text = got.value.message
    assert not any(c in text for c in "\x1b\x07\r\u202e"), repr(text)
    assert "\\x1b" in text or "\\u202e" in text or "\\x0d" in text


def test_an_error_is_printed_with_control_characters_escaped(tmp_path: Path) -> None:
    bad = tmp_path / "x\x1b[31m\x07.yaml"
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "render", str(bad)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "GH_RUN_HOME": str(tmp_path / "h")},
        timeout=60,
        check=False,
    )
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr and "\\x1b[31m" in res.stderr


# ---- init: all or nothing -------------------------------------------------------------------


def gh_run(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GH_RUN_HOME"}
    env.update({"GH_RUN_SITE_DIR": str(site), "XDG_CONFIG_HOME": str(cwd / ".." / "xdg")})
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site" / "clusters"
    folder.mkdir(parents=True)
    (folder / "dev.yaml").write_text(DEV.replace('runs: "{home}/runs"', f'runs: "{tmp_path}/runs"'))
    return tmp_path / "site"


IN_THE_WAY = {
    ".gh-run is a file": lambda p: (p / ".gh-run").write_text("x"),
    "jobs is a file": lambda p: (p / "jobs").write_text("x"),
    "docs/schema is a file": lambda p: (
        (p / "docs").mkdir(),
        (p / "docs" / "schema").write_text(""),
    ),
    "docs is a dangling link": lambda p: (p / "docs").symlink_to(p / "nowhere"),
}


@pytest.mark.parametrize("case", sorted(IN_THE_WAY))
def test_init_writes_nothing_when_something_is_in_the_way(
    tmp_path: Path, site: Path, case: str
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    IN_THE_WAY[case](proj)
    before = sorted(str(p.relative_to(proj)) for p in proj.rglob("*"))
    res = gh_run(["init"], proj, site)
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "nothing was written" in errors[0], res.stderr
    assert sorted(str(p.relative_to(proj)) for p in proj.rglob("*")) == before
