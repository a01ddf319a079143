"""Issue 26, class 3: other users' files are not the admin's or yours. Cluster files, template
folders, settings and homes owned by another user, or writable by every user, are refused with
one sentence and the fix (as git refuses a repository someone else owns); the compiled-template
cache is a private folder of the user's own. A second real user of this machine (fixture
`other_user`, made with useradd) owns the planted files; a control case with the same files
owned by root shows each plant would have worked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.spec.job import load_spec
from orchestrator.store.db import Run, Store

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "jobs" / "smoke.yaml"
DEV = (REPO / "clusters" / "dev.yaml").read_text()


def gh_run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "GH_RUN_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env={**base, "NO_COLOR": "1", "COLUMNS": "250", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def error_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def chown(uid: int, *paths: Path) -> None:
    for p in paths:
        os.chown(p, uid, uid)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """An admin's site folder (root's) holding the dev cluster, its runs under tmp_path."""
    folder = tmp_path / "site" / "clusters"
    folder.mkdir(parents=True)
    text = DEV.replace('runs: "{home}/runs"', f'runs: "{tmp_path / "runs"}"')
    (folder / "dev.yaml").write_text(text)
    return tmp_path / "site"


def test_another_users_clusters_folder_never_stands_in_for_the_admins(
    tmp_path: Path, site: Path, other_user: int
) -> None:
    """The issue's case: clusters/dev.yaml in the working folder, written by another user,
    whose setup line runs in the job. Without the project's word it is not even looked at; named
    as a path, or by a project folder, it is refused; the same file of root's is used."""
    work = tmp_path / "shared"
    (work / "clusters").mkdir(parents=True)
    marker = tmp_path / "planted-setup-ran"
    planted = work / "clusters" / "dev.yaml"
    planted.write_text(
        DEV.replace('runs: "{home}/runs"', f'runs: "{tmp_path / "runs"}"').replace(
            "    setup:\n", f"    setup:\n      - touch {marker}\n"
        )
    )
    chown(other_user, planted)
    env = {"GH_RUN_SITE_DIR": str(site), "GH_RUN_HOME": str(tmp_path / "home")}
    res = gh_run(["submit", str(SMOKE), "-x", "local", "--wait"], work, env)
    assert res.returncode == 0 and "not a site file" not in res.stderr, res.stderr
    assert not marker.exists()
    line = error_line(gh_run(["render", str(SMOKE), "--cluster", "clusters/dev.yaml"], work, env))
    assert f"clusters/dev.yaml: owned by user ghrun-other (uid {other_user}), not by root" in line
    assert "does not use a cluster file that another user owns or can change" in line
    assert "copy what you trust to a file you own" in line
    # A project that names the folder, with no site file of that name: refused all the same.
    (work / ".gh-run").mkdir()
    (work / ".gh-run" / "config.yaml").write_text("cluster_dirs: [clusters]\n")
    env["GH_RUN_SITE_DIR"] = str(tmp_path / "empty-site")
    line = error_line(gh_run(["submit", str(SMOKE), "-x", "local", "--wait"], work, env))
    assert str(planted) in line and "ghrun-other" in line
    assert not marker.exists()
    # Control: root's file in the same place is the project's, and its setup line runs.
    chown(0, planted)
    res = gh_run(["submit", str(SMOKE), "-x", "local", "--wait"], work, env)
    assert res.returncode == 0, res.stderr
    assert "is the project's" in res.stderr and "not a site file" in res.stderr
    assert marker.exists()


def test_files_and_folders_every_user_can_write_are_refused(tmp_path: Path, site: Path) -> None:
    env = {"GH_RUN_SITE_DIR": str(site), "GH_RUN_HOME": str(tmp_path / "home")}
    (site / "clusters" / "dev.yaml").chmod(0o666)
    line = error_line(gh_run(["render", str(SMOKE)], tmp_path, env))
    assert "dev.yaml: writable by every user (mode 0666)" in line
    assert f"chmod o-w {site / 'clusters' / 'dev.yaml'}" in line
    (site / "clusters" / "dev.yaml").chmod(0o644)
    # A folder searched by name: anyone could add a file to it, sticky bit or not.
    (site / "clusters").chmod(0o1777)
    line = error_line(gh_run(["render", str(SMOKE)], tmp_path, env))
    assert f"{site / 'clusters'}: writable by every user (mode 1777)" in line
    assert "does not look for cluster files in a folder" in line
    (site / "clusters").chmod(0o755)
    assert gh_run(["render", str(SMOKE)], tmp_path, env).returncode == 0


def test_another_users_templates_are_refused(tmp_path: Path, site: Path, other_user: int) -> None:
    tpl = tmp_path / "site" / "tpl" / "partitions"
    tpl.mkdir(parents=True)
    (tpl / "gh.sbatch.j2").write_text('{% extends "sbatch/base.sbatch.j2" %}\n')
    cluster = site / "clusters" / "dev.yaml"
    cluster.write_text(cluster.read_text() + "template_dirs: [../tpl]\n")
    env = {"GH_RUN_SITE_DIR": str(site), "GH_RUN_HOME": str(tmp_path / "home")}
    assert gh_run(["render", str(SMOKE)], tmp_path, env).returncode == 0  # control: root's
    chown(other_user, tpl / "gh.sbatch.j2")
    line = error_line(gh_run(["render", str(SMOKE)], tmp_path, env))
    assert f"{tpl / 'gh.sbatch.j2'}: owned by user ghrun-other" in line
    assert "does not use a template that another user owns" in line
    chown(0, tpl / "gh.sbatch.j2")
    # An override folder of $GH_RUN_TEMPLATES owned by another user: refused before use.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    chown(other_user, theirs)
    env["GH_RUN_TEMPLATES"] = str(theirs)
    line = error_line(gh_run(["render", str(SMOKE)], tmp_path, env))
    assert f"{theirs}: owned by user ghrun-other" in line and "templates" in line


def plant_run(home: Path, victim: int, run_dir: Path) -> None:
    """A run row naming a process (a session leader, as gh-run's local supervisor is) as the
    local job of a running run."""
    run_dir.mkdir(parents=True)
    store = Store(home)
    store.add_run(
        Run(
            run_id="planted-1",
            name="smoke",
            job_name="ghr-planted-1",
            spec_path=None,
            spec_json=load_spec(SMOKE).model_dump_json(),
            cluster="dev",
            partition="gh",
            executor="local",
            run_dir=str(run_dir),
            job_id=f"local-{victim}",
            state="RUNNING",
        )
    )
    store.close()


def test_a_home_planted_above_by_another_user_is_never_used(
    tmp_path: Path, other_user: int
) -> None:
    """A world-writable .gh-run of another user's in a parent folder: its run row must not make
    `gh-run cancel` signal the process it names. Control: the same home of root's does."""
    shared = tmp_path / "shared"
    (shared / "proj").mkdir(parents=True)
    home = shared / ".gh-run"
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        plant_run(home, victim.pid, tmp_path / "planted-run")
        chown(other_user, home, home / "state.db")
        home.chmod(0o777)
        res = gh_run(["cancel", "planted-1"], shared / "proj")
        line = error_line(res)
        assert f"{home}: the gh-run home found above this folder is owned by user ghrun-other" in (
            line
        )
        assert "will neither read the runs recorded there nor write yours" in line
        assert "mkdir .gh-run" in line
        assert victim.poll() is None, "a planted run row made gh-run signal a process"
        for args in (["status"], ["submit", str(SMOKE), "-x", "local"]):
            assert "ghrun-other" in error_line(gh_run(args, shared / "proj"))
        # Root's own home, only open to all: refused too (anyone could plant state.db-wal).
        chown(0, home, home / "state.db")
        line = error_line(gh_run(["cancel", "planted-1"], shared / "proj"))
        assert "writable by every user (mode 0777)" in line and f"chmod o-w {home}" in line
        assert victim.poll() is None
        # A home of one's own deeper down is found first.
        (shared / "proj" / ".gh-run").mkdir()
        assert gh_run(["status"], shared / "proj").returncode == 0
        shutil.rmtree(shared / "proj" / ".gh-run")
        # Control: the same row in a home of root's, open to nobody else, is acted on.
        home.chmod(0o755)
        res = gh_run(["cancel", "planted-1"], shared / "proj")
        assert res.returncode == 0, res.stderr
        assert victim.wait(timeout=30) is not None
    finally:
        victim.kill()
        victim.wait()


def test_a_given_home_of_another_user_is_refused(tmp_path: Path, other_user: int) -> None:
    home = tmp_path / "theirs"
    home.mkdir()
    chown(other_user, home)
    line = error_line(gh_run(["status"], tmp_path, {"GH_RUN_HOME": str(home)}))
    assert f"{home}: the gh-run home given (--home or $GH_RUN_HOME) is owned by user" in line
    line = error_line(gh_run(["--home", str(home), "status"], tmp_path))
    assert "ghrun-other" in line


def test_the_template_cache_is_a_private_folder_of_ones_own(
    tmp_path: Path, other_user: int
) -> None:
    """Jinja's default cache, /tmp/_jinja2-cache-<uid>, is a name another user can take
    first; gh-run's is under the user's own cache folder, 0700, checked, or not used."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "GH_RUN_HOME": str(tmp_path / "home")}
    res = gh_run(["render", str(SMOKE)], tmp_path, env)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    folder = tmp_path / "cache" / "gh-run" / "jinja-sandboxed"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert any(f.name.startswith("__jinja2_") for f in folder.iterdir())
    # Taken by another user first: rendering still works, without the cache, and says so.
    taken = tmp_path / "taken"
    (taken / "gh-run" / "jinja-sandboxed").mkdir(parents=True, mode=0o777)
    chown(other_user, taken / "gh-run" / "jinja-sandboxed")
    res = gh_run(["render", str(SMOKE)], tmp_path, {**env, "XDG_CACHE_HOME": str(taken)})
    assert res.returncode == 0, res.stderr
    assert f"{taken / 'gh-run' / 'jinja-sandboxed'} is owned by user ghrun-other" in res.stderr
    assert "compiled afresh" in res.stderr
    assert list((taken / "gh-run" / "jinja-sandboxed").iterdir()) == []
    assert res.stdout.startswith("#!/bin/bash")
