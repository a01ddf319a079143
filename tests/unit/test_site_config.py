"""Where cluster files and template overrides come from (issue 31; site_config.py): a path,
$GH_RUN_CLUSTERS, the user's ~/.config/gh-run, the site's /etc/gh-run ($GH_RUN_SITE_DIR), the
project's own folders only when its .gh-run/config.yaml names them; which one answered is said
by `partitions list`, `doctor`, and, when it is not the site's, by render, submit and the run
record. Real folders and files, no cluster needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.site import config as site_config
from orchestrator.site.cluster import load_cluster

REPO = Path(__file__).resolve().parents[2]
DEV = (REPO / "clusters" / "dev.yaml").read_text()


def cluster_text(description: str, runs: Path | None = None) -> str:
    first = next(ln for ln in DEV.splitlines() if ln.startswith("description: "))
    text = DEV.replace(first, f"description: {description}")
    assert description in text
    if runs is not None:
        text = text.replace('runs: "{home}/runs"', f'runs: "{runs}"')
    return text


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Four folders, one per kind of place, none holding a file yet; the working folder is a
    project (proj/.gh-run) with a subfolder."""
    p = {
        "env": tmp_path / "env",
        "user": tmp_path / "xdg" / "gh-run" / "clusters",
        "site": tmp_path / "site" / "clusters",
        "project": tmp_path / "proj" / "clusters",
    }
    for d in p.values():
        d.mkdir(parents=True)
    (tmp_path / "proj" / ".gh-run").mkdir()
    (tmp_path / "proj" / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.setenv("GH_RUN_CLUSTERS", str(p["env"]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GH_RUN_SITE_DIR", str(tmp_path / "site"))
    monkeypatch.delenv("GH_RUN_HOME", raising=False)
    monkeypatch.chdir(tmp_path / "proj")
    return p


def opt_in(tmp_path: Path, text: str = "cluster_dirs: [clusters]\n") -> None:
    (tmp_path / "proj" / ".gh-run" / "config.yaml").write_text(text)


def test_the_first_place_that_has_the_file_answers(places: dict[str, Path], tmp_path: Path) -> None:
    opt_in(tmp_path)
    for kind, folder in places.items():
        (folder / "c.yaml").write_text(cluster_text(f"from {kind}"))
    for kind in ("env", "user", "site", "project"):
        cl = load_cluster("c")
        assert cl.description == f"from {kind}"
        assert cl.origin is not None and cl.origin.origin == kind
        assert cl.source == str(places[kind] / "c.yaml")
        (places[kind] / "c.yaml").unlink()
    with pytest.raises(UserError) as exc:
        load_cluster("c")
    message = str(exc.value)
    assert all(str(folder) in message for folder in places.values()), message
    assert "gh-run doctor" in message


def test_the_project_folder_only_when_the_project_names_it(
    places: dict[str, Path], tmp_path: Path
) -> None:
    """A clusters/ folder where gh-run runs is anyone's: without the project's word it is not
    looked at, even with nothing else to find (issue 26, class 3)."""
    (places["project"] / "c.yaml").write_text(cluster_text("the project's"))
    with pytest.raises(UserError) as exc:
        load_cluster("c")
    assert "; add `cluster_dirs: [clusters]` to .gh-run/config.yaml to use clusters/c.yaml" in (
        str(exc.value)
    )
    (tmp_path / "proj" / ".gh-run" / "config.yaml").write_text("default_cluster: c\n")
    with pytest.raises(UserError, match="not found"):
        load_cluster("c")
    opt_in(tmp_path)
    assert load_cluster("c").description == "the project's"
    # From a subfolder: the nearest .gh-run above is the project; its folders are relative to
    # the project's root, not to the working folder.
    os.chdir(tmp_path / "proj" / "sub" / "deeper")
    found = site_config.find_cluster("c")
    assert (found.path, found.origin) == (places["project"] / "c.yaml", "project")
    assert found.named_by == str(tmp_path / "proj" / ".gh-run" / "config.yaml") + ": cluster_dirs"
    # The site's file of the same name comes first: a project never replaces the admin's.
    (places["site"] / "c.yaml").write_text(cluster_text("the admin's"))
    assert load_cluster("c").description == "the admin's"


def test_a_path_is_the_users_own_unless_it_is_in_the_site_folder(
    places: dict[str, Path], tmp_path: Path
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(cluster_text("mine"))
    found = site_config.find_cluster(str(mine))
    assert (found.origin, found.is_site) == ("path", False)
    note = site_config.origin_note(found, "dev")
    assert note is not None and "is given as a path, not a site file" in note
    assert "limits, templates and setup lines are not the admin's" in note
    (places["site"] / "dev.yaml").write_text(cluster_text("site"))
    by_path = site_config.find_cluster(str(places["site"] / "dev.yaml"))
    assert by_path.is_site and site_config.origin_note(by_path, "dev") is None
    assert site_config.find_cluster("dev").is_site
    with pytest.raises(UserError, match="does not exist; check the path"):
        site_config.find_cluster(str(tmp_path / "nope.yaml"))


def test_the_default_cluster(places: dict[str, Path], tmp_path: Path) -> None:
    # no file anywhere: gh-run's built-in cluster (this machine), saying why (issue 36)
    name, why = site_config.default_cluster()
    assert name == "local" and "no site, user or project cluster file found" in why
    assert site_config.find_cluster("local").origin == "builtin"
    (places["site"] / "a.yaml").write_text(cluster_text("a"))
    assert site_config.default_cluster()[0] == "a"
    assert "the only cluster file found" in site_config.default_cluster()[1]
    (places["user"] / "b.yaml").write_text(cluster_text("b"))
    with pytest.raises(UserError) as exc:
        site_config.default_cluster()
    assert "2 clusters found (b, a)" in str(exc.value) and "--cluster" in str(exc.value)
    (tmp_path / "site" / "config.yaml").write_text("default_cluster: a\n")
    assert site_config.default_cluster() == ("a", f"default_cluster in {tmp_path}/site/config.yaml")
    (tmp_path / "xdg" / "gh-run" / "config.yaml").write_text("default_cluster: b\n")
    assert site_config.default_cluster()[0] == "b"
    opt_in(tmp_path, "default_cluster: a\n")
    assert site_config.default_cluster() == ("a", "default_cluster in .gh-run/config.yaml")
    opt_in(tmp_path, "default_cluster: a b\n")
    with pytest.raises(UserError, match=r"config.yaml.*default_cluster.*not a cluster name"):
        site_config.default_cluster()
    opt_in(tmp_path, "cluster_dir: [clusters]\n")  # a typo is refused, never ignored
    with pytest.raises(UserError, match="cluster_dir"):
        site_config.default_cluster()


def gh_run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "250", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_partitions_list_and_doctor_say_which_file_answered(
    places: dict[str, Path], tmp_path: Path
) -> None:
    opt_in(tmp_path)
    (places["site"] / "dev.yaml").write_text(cluster_text("site"))
    (places["project"] / "dev.yaml").write_text(cluster_text("project"))
    (places["project"] / "local.yaml").write_text(cluster_text("project's own"))
    res = gh_run(["partitions", "list", "--cluster", "dev", "--json"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["found"], doc["source"]) == ("site", str(places["site"] / "dev.yaml"))
    res = gh_run(["partitions", "list", "--cluster", "local"])
    assert res.returncode == 0, res.stderr
    title = res.stdout.splitlines()[0]
    assert title == (
        "cluster dev (clusters/local.yaml, the project's (.gh-run/config.yaml: cluster_dirs))"
    )
    res = gh_run(["doctor", "--json"])
    setup = json.loads(res.stdout)["setup"]
    assert [p["named_by"] for p in setup["cluster_places"]] == [
        "$GH_RUN_CLUSTERS",
        "$XDG_CONFIG_HOME/gh-run/clusters",
        "$GH_RUN_SITE_DIR/clusters",
        ".gh-run/config.yaml: cluster_dirs",
    ]
    answers = {c["name"]: c for c in setup["clusters"]}
    assert answers["dev"]["file"] == str(places["site"] / "dev.yaml")
    assert answers["dev"]["hidden"] == [str(places["project"] / "dev.yaml")]
    assert answers["local"]["found_by"].startswith("the project's")
    assert setup["home"] == str(tmp_path / "proj" / ".gh-run")
    assert {p["name"] for p in setup["native"]} == {"_kineto_scan", "_sqlite_pages"}
    text = gh_run(["doctor"]).stdout
    assert "which file answers" in text and "hides " + str(places["project"] / "dev.yaml") in text


def test_render_submit_and_the_run_record_say_when_the_file_is_not_the_sites(
    places: dict[str, Path], tmp_path: Path
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(cluster_text("mine", runs=tmp_path / "runs"))
    job = str(REPO / "jobs" / "smoke.yaml")
    env = {
        "GH_RUN_HOME": str(tmp_path / "home"),
        "PATH": f"{Path(sys.executable).parent}:" + os.environ["PATH"],
    }
    for how in (["--cluster", str(mine)], ["--set", f"cluster={mine}"]):
        res = gh_run(["render", job, "-x", "local", *how], env)
        assert res.returncode == 0, res.stderr
        assert f"cluster dev: {mine} is given as a path, not a site file" in res.stderr
    res = gh_run(["submit", job, "-x", "local", "--wait", "--cluster", str(mine)], env)
    assert res.returncode == 0, res.stderr
    assert "is given as a path, not a site file" in res.stderr
    status = gh_run(["status", "last"], env)
    assert f"{mine} is given as a path, not a site file" in status.stdout, status.stdout
    # The site's own file: nothing to say.
    (places["site"] / "dev.yaml").write_text(cluster_text("site", runs=tmp_path / "runs"))
    res = gh_run(["submit", job, "-x", "local", "--wait"], env)
    assert res.returncode == 0 and "not a site file" not in res.stderr, res.stderr
    assert "not a site file" not in gh_run(["status", "last"], env).stdout


def test_a_campaign_says_so_once_and_in_each_runs_record(
    places: dict[str, Path], tmp_path: Path
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(cluster_text("mine", runs=tmp_path / "runs"))
    job = tmp_path / "job.yaml"
    job.write_text(
        (REPO / "jobs" / "smoke.yaml").read_text().replace("cluster: dev", f"cluster: {mine}")
    )
    camp = tmp_path / "camp.yaml"
    camp.write_text(f"name: c\njob: {job}\ninclude: [{{name: a}}, {{name: b}}]\n")
    env = {
        "GH_RUN_HOME": str(tmp_path / "home"),
        "PATH": f"{Path(sys.executable).parent}:" + os.environ["PATH"],
    }
    res = gh_run(["campaign", "run", str(camp), "--executor", "local", "--wait"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stderr.count(f"cluster dev: {mine} is given as a path, not a site file") == 1
    runs = json.loads(gh_run(["status", "--json"], env).stdout)
    assert len(runs) == 2
    for r in runs:
        events = gh_run(["status", r["run"]["run_id"]], env).stdout
        assert "is given as a path, not a site file" in events, events
