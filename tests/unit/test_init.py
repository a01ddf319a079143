"""`gh-run init` (issue 31): a project of one's own, outside gh-run's repository. Starter jobs
for the site's default cluster with the schema line editors use, the schemas themselves, a
.gh-run home that every command finds from the project's folders; nothing overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
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


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder holding the dev cluster (its runs under tmp_path), as the only cluster."""
    folder = tmp_path / "site" / "clusters"
    folder.mkdir(parents=True)
    (folder / "dev.yaml").write_text(DEV.replace('runs: "{home}/runs"', f'runs: "{tmp_path}/runs"'))
    monkeypatch.setenv("GH_RUN_SITE_DIR", str(tmp_path / "site"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return folder


WRITTEN = [
    "jobs/smoke.yaml",
    "jobs/sft.yaml",
    *(
        f"docs/schema/{k}.schema.json"
        for k in ("job", "job-overlay", "cluster", "campaign", "campaign-overlay", "settings")
    ),
    ".gh-run/config.yaml",
    ".gh-run/.gitignore",
]


def test_init_writes_a_project_that_works_from_its_folders(tmp_path: Path, site: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    res = gh_run(["init"], proj)
    assert res.returncode == 0, res.stderr
    assert "starter jobs for cluster dev (the only cluster file found" in res.stderr
    assert [ln.removeprefix("wrote ") for ln in res.stdout.splitlines()[:-1]] == WRITTEN
    assert sorted(str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file()) == sorted(
        WRITTEN
    )
    assert (proj / ".gh-run").stat().st_mode & 0o777 == 0o700
    assert "needs editing" not in res.stderr  # both starter jobs fit partition gh
    settings = yaml.safe_load((proj / ".gh-run" / "config.yaml").read_text())
    assert settings == {"default_cluster": "dev"}
    for name in ("smoke", "sft"):
        path = proj / "jobs" / f"{name}.yaml"
        first = path.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../docs/schema/job.schema.json"
        schema = json.loads((path.parent / "../docs/schema/job.schema.json").read_text())
        doc = yaml.safe_load(path.read_text())
        assert doc["cluster"] == "dev" and doc["partition"] == "gh"
        import jsonschema  # here: its import costs each xdist worker 1.6 s of CPU (test_schema.py)

        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    sft = yaml.safe_load((proj / "jobs" / "sft.yaml").read_text())
    # Fitted to the partition (2 cores, 1 GPU, 2 h), the rest as the seed ran it.
    assert sft["resources"] == {
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_task": 2,
        "time": "02:00:00",
    }
    assert sft["profile"]["delay"] == 360 and sft["workload"]["peft_scheme"] == "lora"
    assert sft["container"]["runtime"] == "apptainer"
    # Runs, from the project's root and from below it, land in the project's home.
    sub = gh_run(["submit", "jobs/smoke.yaml", "-x", "local", "--wait"], proj)
    assert sub.returncode == 0, sub.stderr
    assert "not a site file" not in sub.stderr and "gh-run home" not in sub.stderr
    deeper = proj / "jobs" / "variants"
    deeper.mkdir()
    sub = gh_run(["submit", "../smoke.yaml", "-x", "local", "--wait"], deeper)
    assert sub.returncode == 0, sub.stderr
    status = gh_run(["status", "--json", "--verbose"], deeper)
    assert f"gh-run home: {proj / '.gh-run'} (the nearest .gh-run above" in status.stderr
    runs = json.loads(status.stdout)
    assert len(runs) == 2 and {r["run"]["state"] for r in runs} == {"COMPLETED"}
    assert gh_run(["partitions", "list"], deeper).stdout.startswith("cluster dev (")
    # The home's .gitignore keeps runs and state out of git, the settings in.
    ignore = (proj / ".gh-run" / ".gitignore").read_text().splitlines()
    assert "*" in ignore and "!config.yaml" in ignore


def test_init_overwrites_nothing(tmp_path: Path, site: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "jobs").mkdir(parents=True)
    (proj / "jobs" / "sft.yaml").write_text("mine\n")
    (proj / "notes.txt").write_text("a project that already has files\n")
    res = gh_run(["init"], proj)
    assert res.returncode == 2, res.stderr
    assert "jobs/sft.yaml already exist; gh-run init overwrites nothing" in res.stderr
    assert sorted(p.name for p in proj.rglob("*")) == ["jobs", "notes.txt", "sft.yaml"]
    (proj / "jobs" / "sft.yaml").unlink()
    assert gh_run(["init"], proj).returncode == 0
    before = {p: p.read_bytes() for p in proj.rglob("*") if p.is_file()}
    again = gh_run(["init"], proj)
    assert again.returncode == 2 and "already exist" in again.stderr
    assert {p: p.read_bytes() for p in proj.rglob("*") if p.is_file()} == before


def test_init_picks_the_cluster_or_asks(tmp_path: Path, site: Path) -> None:
    small = DEV.replace("name: dev", "name: small").replace("gpus_per_node: 1", "gpus_per_node: 0")
    (site / "small.yaml").write_text(small)
    res = gh_run(["init", "a"], tmp_path)
    assert res.returncode == 2
    assert "2 clusters found (dev, small) and none is the default" in res.stderr
    assert not (tmp_path / "a").exists()
    res = gh_run(["init", "a", "--cluster", "small"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "next: cd " + str(tmp_path / "a") in res.stdout
    sft = yaml.safe_load((tmp_path / "a" / "jobs" / "sft.yaml").read_text())
    assert sft["cluster"] == "small" and sft["resources"]["gpus_per_node"] == 0
    # The site's default, from its config.yaml.
    (tmp_path / "site" / "config.yaml").write_text("default_cluster: small\n")
    res = gh_run(["init", "b"], tmp_path)
    assert res.returncode == 0 and "cluster small (default_cluster in" in res.stderr
    # A cluster file given by path is written as its absolute path.
    mine = tmp_path / "mine.yaml"
    mine.write_text(DEV)
    assert gh_run(["init", "c", "--cluster", "mine.yaml"], tmp_path).returncode == 0
    assert yaml.safe_load((tmp_path / "c" / "jobs" / "smoke.yaml").read_text())["cluster"] == str(
        mine
    )
    res = gh_run(["init", "d", "--partition", "nope"], tmp_path)
    assert res.returncode == 2 and "partition 'nope' does not exist" in res.stderr


def test_without_any_cluster_file_the_built_in_local_cluster_answers(
    tmp_path: Path, site: Path
) -> None:
    """Issue 36: with the wheel installed and no site, user or project file, `gh-run init`
    said "no cluster file found": the first command of a laptop user failed. gh-run's built-in
    cluster `local` (this machine, the local executor) answers, and the first week's commands
    work with nothing else: init, submit --wait (auto: no scheduler, so this machine), analyze
    of the trace the starter job writes, report."""
    (site / "dev.yaml").unlink()
    proj = tmp_path / "proj"
    proj.mkdir()
    res = gh_run(["init"], proj)
    assert res.returncode == 0, res.stderr
    assert "gh-run's built-in cluster" in res.stderr and "no site, user or project" in res.stderr
    smoke = yaml.safe_load((proj / "jobs" / "smoke.yaml").read_text())
    assert (smoke["cluster"], smoke["partition"]) == ("local", "local")
    assert yaml.safe_load((proj / ".gh-run" / "config.yaml").read_text()) == {
        "default_cluster": "local"
    }
    sub = gh_run(["submit", "jobs/smoke.yaml", "--wait"], proj)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    assert "as local job" in sub.stdout and "COMPLETED" in sub.stdout
    assert "warning" not in sub.stderr and "not a site file" not in sub.stderr, sub.stderr
    ana = gh_run(["analyze", "last", "--json"], proj)
    assert ana.returncode == 0, ana.stderr
    doc = json.loads(ana.stdout)
    assert doc["ranks"][0]["steps"]["count"] == 8
    rep = gh_run(["report", "last", "--out", "rep"], proj)
    assert rep.returncode == 0, rep.stderr
    assert (proj / "rep" / "report.html").is_file()
    # the built-in cluster is what doctor and partitions say it is
    parts = gh_run(["partitions", "list", "--json"], proj)
    assert parts.returncode == 0, parts.stderr
    listed = json.loads(parts.stdout)
    assert listed["cluster"] == "local" and listed["found"] == "builtin"
    assert listed["partitions"]["local"]["cpus_per_node"] >= 1
    doctor = gh_run(["doctor", "--json"], proj)
    clusters = json.loads(doctor.stdout)["setup"]["clusters"]
    assert [(c["name"], c["found_by"].startswith("gh-run's built-in")) for c in clusters] == [
        ("local", True)
    ]
    # no scheduler: --executor slurm is refused in one sentence
    bad = gh_run(["render", "jobs/smoke.yaml", "--executor", "slurm"], proj)
    assert bad.returncode == 2 and "has no scheduler (scheduler: none" in bad.stderr


def test_a_site_file_named_local_replaces_the_built_in(tmp_path: Path, site: Path) -> None:
    (site / "local.yaml").write_text(DEV.replace("name: dev", "name: local"))
    res = gh_run(["partitions", "list", "--json", "--cluster", "local"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["found"] == "site"


def test_a_cluster_file_given_by_path_is_noted_once_not_on_every_command(
    tmp_path: Path, site: Path
) -> None:
    """Issue 36: `init --cluster PATH` wrote the path into the jobs, and every later command
    then printed that the file is not the site's. It is said where it is decided (init) and at
    the first command of the project's home, then not again: the run records keep it."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(DEV.replace("name: dev", "name: mine"))
    proj = tmp_path / "p"
    res = gh_run(["init", str(proj), "--cluster", str(mine)], tmp_path)
    assert res.returncode == 0, res.stderr
    said = [
        gh_run(["render", "jobs/smoke.yaml", "-x", "local"], proj).stderr.count("not a site file")
        for _ in range(3)
    ]
    assert said == [1, 0, 0], said
    sub = gh_run(["submit", "jobs/smoke.yaml", "-x", "local", "--wait"], proj)
    assert sub.returncode == 0 and "not a site file" not in sub.stderr, sub.stderr
    status = gh_run(["status", "last", "--json"], proj)
    assert "not a site file" in status.stdout  # the run's record keeps it
