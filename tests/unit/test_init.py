"""`gh-run init` (issue 31): a project of one's own, outside gh-run's repository. Starter jobs
for the site's default cluster with the schema line editors use, the schemas themselves, a
.gh-run home that every command finds from the project's folders; nothing overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
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


def test_init_without_any_cluster_file_says_what_to_do(tmp_path: Path, site: Path) -> None:
    (site / "dev.yaml").unlink()
    res = gh_run(["init"], tmp_path)
    assert res.returncode == 2, res.stderr
    assert "no cluster file found" in res.stderr and "partitions import --install" in res.stderr
    assert list(tmp_path.glob("jobs")) == []
