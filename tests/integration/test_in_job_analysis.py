"""Analysis where the reports are, on the REAL dev cluster (real SLURM, Apptainer and nsys
2023.4, nothing mocked): the profiled smoke job (jobs/smoke_profiled.yaml, two ranks on two
nodes) ends with its analysis step (templates/sbatch/analysis_post.sh.j2: one srun task per
report); with `artifacts.reports: leave` the reports stay in the run folder, listed in the
manifest with the size and sha256 computed there, and only the records, CSVs and logs come
back. `analyze` reads the records; after `fetch --reports` (verified) a re-read of the reports
here gives the same output byte for byte. Directly and through the SSH login node; and a job
whose nodes cannot run gh-run says so and is analysed here from its fetched reports.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import __version__
from orchestrator.core.errors import RuntimeFailure
from orchestrator.store.db import Store
from tests import nsys_crash
from tests.integration import test_profiled
from tests.integration.test_profiled import JOB, _at
from tests.laptop import Laptop, cluster_file
from tests.laptop import run_id_of as _run_id

# These jobs record with the real nsys, so they take turns on the machine's recording slot as
# test_profiled.py's do: two nsys sessions at once have come back with no report at all.
pytestmark = [pytest.mark.cluster, pytest.mark.nsys_records]

REPORTS = (".sqlite", ".nsys-rep")


@pytest.fixture(scope="module")
def prefix() -> Path:
    """The tools prefix with nsys, Apptainer and the test image (test_profiled.py's)."""
    return test_profiled.tools_ready()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _submit(cli, prefix: Path, *sets: str, cluster: str | None = None):  # type: ignore[no-untyped-def]
    args = [JOB, "--executor", "slurm", "--wait", "--timeout", "280", *_at(prefix)]
    if cluster:
        args += ["--cluster", cluster]
    for s in sets:
        args += ["--set", s]
    res = cli("submit", *args, timeout=360)
    if res.rc != 0 and nsys_crash.once_more(res.text):  # nsys's own crash: once more
        res = cli("submit", *args, timeout=360)
    assert res.rc == 0, res.text
    return res


def _outputs(cli, run_id: str, *extra: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    js = cli("analyze", run_id, "--json", *extra)
    assert js.rc == 0, js.text
    text = cli("analyze", run_id, *extra)
    assert text.rc == 0, text.text
    return js.out, text.out


def _left_then_fetched(cli, store_root: Path, run_id: str, run_dir: Path | None) -> None:  # type: ignore[no-untyped-def]
    """The run's reports were left and analysed there; the records give the analysis; fetch
    --reports brings the reports, and a re-read here gives the same output."""
    manifest = json.loads((store_root / "manifest.json").read_text())
    left = {x["relpath"]: x for x in manifest["left"]}
    assert set(left) == {f"artifacts/smoke-profiled.{r}{s}" for r in (0, 1) for s in REPORTS}, left
    if run_dir is not None:  # seen by the test: the sizes and sha256 are the cluster side's
        for rel, x in left.items():
            there = run_dir / rel
            assert (x["size"], x["sha256"]) == (there.stat().st_size, _sha(there))
    collected = {f["relpath"] for f in manifest["files"]}
    assert not [c for c in collected if c.endswith(REPORTS)], collected
    assert {f"artifacts/smoke-profiled.{r}.sqlite.gh-run.json" for r in (0, 1)} <= collected
    assert any(c.endswith(".csv") for c in collected) and any(
        c.startswith("logs/") for c in collected
    )
    from_records = _outputs(cli, run_id)
    doc = json.loads(from_records[0])
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert all(r["steps"]["count"] == 6 for r in doc["ranks"])
    # analysed again where they lie: a job array and a reduce job, the same temporal split
    res = cli("analyze", "--on-cluster", run_id, "--json")
    assert res.rc == 0, res.text
    assert "map: job array" in res.err and "reduce COMPLETED" in res.err, res.text
    folder = re.search(r"; in (\S+)", res.err)
    assert folder, res.err

    # the map tasks and the reduce are runs of the store: status, logs (and cancel) see them
    def analysis_runs() -> list[dict[str, Any]]:
        listed = json.loads(cli("status", "--json").out)
        return [r["run"] for r in listed if r["run"]["name"] == "gh-run-analysis"]

    # the reduce ran after the maps ended, but SLURM's accounting may take a few seconds to
    # record a finished array task: `status` says what the controller says now
    end = time.monotonic() + 60
    analysis = analysis_runs()
    while {r["state"] for r in analysis} != {"COMPLETED"} and time.monotonic() < end:
        time.sleep(2)
        analysis = analysis_runs()
    assert sorted(r["variant"] for r in analysis) == ["map 0", "map 1", "reduce"], analysis
    assert {r["state"] for r in analysis} == {"COMPLETED"}, analysis
    [reduce] = [r for r in analysis if r["variant"] == "reduce"]
    assert reduce["run_id"] in res.err and reduce["job_id"] in res.err
    logs = cli("logs", reduce["run_id"], "--err")
    assert logs.rc == 0, logs.text
    maps = [r for r in analysis if r["variant"].startswith("map")]
    assert all("_" in r["job_id"] for r in maps)  # array tasks: ARRAY_N
    assert cli("logs", maps[0]["run_id"], "--err").rc == 0
    # its scripts and logs stay beside the run folders (the test removes them: shared scratch)
    shutil.rmtree(folder.group(1), ignore_errors=True)
    again = json.loads(res.out)
    assert [r["temporal"] for r in again["ranks"]] == [r["temporal"] for r in doc["ranks"]]
    assert again["cross_rank"] == doc["cross_rank"]
    assert _outputs(cli, run_id) == from_records  # its records, read here
    # the reports are not here: a re-read says how to bring them
    res = cli("analyze", run_id, "--reread")
    assert res.rc == 2 and "fetch RUN --reports" in res.err, res.text

    res = cli("fetch", run_id, "--reports")
    assert res.rc == 0, res.text
    manifest = json.loads((store_root / "manifest.json").read_text())
    assert manifest["left"] == []
    files = {f["relpath"]: f for f in manifest["files"]}
    for rel, x in left.items():
        here = store_root / rel
        assert (files[rel]["size"], files[rel]["sha256"]) == (x["size"], x["sha256"])
        assert _sha(here) == x["sha256"]
    assert _outputs(cli, run_id, "--reread") == from_records


def test_reports_left_and_analysed_on_the_nodes(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    res = _submit(cli, prefix, "artifacts.reports=leave")
    assert "left 4 reports" in res.out, res.text
    run = Store(gh_home).find_run("last")
    run_dir = Path(run.run_dir)
    log = "".join(p.read_text() for p in run_dir.glob("*_log.err"))
    # each node analyses the report its rank left there (one rank per node here): the image's
    # gh-run first (the test image has none: passed over, and why), then the Python that
    # submitted, which answers with this gh-run's version
    assert "in-job analysis: passed over apptainer exec" in log and "gh-run-test.sif gh-run:" in log
    assert (
        log.count(f"with gh-run {__version__} ({sys.executable} -m orchestrator)") == 2
        and log.count("in-job analysis: 1 report(s) on ") == 2
    ), log
    for r in (0, 1):
        assert (run_dir / "artifacts" / f"smoke-profiled.{r}.sqlite.gh-run.json").is_file()
    _left_then_fetched(cli, gh_home / "artifacts" / run.run_id, run.run_id, run_dir)


def test_no_gh_run_on_the_nodes_falls_back_to_this_machine(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path, tmp_path: Path
) -> None:
    """analysis.gh_run names a command the nodes do not have: the job says so in its log, ends
    well, and leaves nothing behind: every report comes back and is analysed here."""
    doc = yaml.safe_load((Path(JOB).parents[1] / "clusters" / "dev.yaml").read_text())
    doc["name"] = "dev-no-gh-run"
    doc["analysis"] = {"gh_run": [str(tmp_path / "no-such-gh-run")]}
    cluster = tmp_path / "dev-no-gh-run.yaml"
    cluster.write_text(yaml.safe_dump(doc))
    res = _submit(cli, prefix, "artifacts.reports=leave", cluster=str(cluster))
    run = Store(gh_home).find_run("last")
    log = "".join(p.read_text() for p in Path(run.run_dir).glob("*_log.err"))
    assert f"in-job analysis: no gh-run answers as gh-run {__version__} on" in log, log
    assert "no-such-gh-run" in log and "analysis.gh_run" in log, log
    assert not list((Path(run.run_dir) / "artifacts").glob("*.gh-run.json"))
    manifest = json.loads((gh_home / "artifacts" / run.run_id / "manifest.json").read_text())
    assert manifest["left"] == [] and "left" not in res.out
    collected = {f["relpath"] for f in manifest["files"]}
    assert {f"artifacts/smoke-profiled.{r}.sqlite" for r in (0, 1)} <= collected
    doc = json.loads(_outputs(cli, run.run_id)[0])
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]


def test_the_images_own_gh_run_is_the_first_choice(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path, tmp_path: Path
) -> None:
    """Issue 36: the container's own gh-run as the default of analysis.gh_run. A STAND-IN for
    an image with gh-run installed: the test image with a `gh-run` on its PATH (a two-line
    script bound at /usr/local/bin that runs this checkout's gh-run with the image's own
    python3.11, the checkout bound at its path). The job's analysis step takes it before the
    Python that submitted, and its records are this gh-run's."""
    shim = tmp_path / "image-bin"
    shim.mkdir()
    (shim / "gh-run").write_text(f'#!/bin/sh\nexec {sys.executable} -m orchestrator "$@"\n')
    (shim / "gh-run").chmod(0o755)
    repo = Path(JOB).resolve().parents[1]
    binds = ["/opt/gh-run:/opt/gh-run:ro", f"{shim}:/usr/local/bin:ro", f"{repo}:{repo}:ro"]
    res = _submit(cli, prefix, f"container.binds={json.dumps(binds)}")
    run = Store(gh_home).find_run("last")
    log = "".join(p.read_text() for p in Path(run.run_dir).glob("*_log.err"))
    assert "passed over" not in log, log
    # each node analyses its own report (one rank per node), with the image's gh-run
    assert log.count(f"with gh-run {__version__} (apptainer exec") == 2, log
    assert log.count("in-job analysis: 1 report(s) on ") == 2, log
    for r in (0, 1):
        assert (
            Path(run.run_dir) / "artifacts" / f"smoke-profiled.{r}.sqlite.gh-run.json"
        ).is_file()
    assert res.rc == 0


def test_reports_left_over_ssh(laptop: Laptop, tmp_path: Path, prefix: Path) -> None:
    """The same through the login node: the sizes and sha256 of the left reports are computed
    on the cluster side, the reports never cross the wire until fetch --reports."""
    cluster = cluster_file(
        tmp_path,
        "dev-ssh-onjob",
        analysis={"gh_run": [sys.executable, "-m", "orchestrator"]},
    )
    doc = yaml.safe_load(cluster.read_text())
    part = doc["partitions"]["gh"]
    part["container"] = {"runtime": "apptainer"}
    part["setup"] = ['export PATH="${GH_RUN_TOOLS:-/opt/gh-run}/bin:$PATH"']
    cluster.write_text(yaml.safe_dump(doc, sort_keys=False))

    def cli(*args: str, timeout: float = 300):  # type: ignore[no-untyped-def]
        return laptop.cli(*args, timeout=timeout)

    res = _submit(cli, prefix, "artifacts.reports=leave", cluster=str(cluster))
    assert "left 4 reports" in res.out, res.text
    run_id = _run_id(res)
    assert not [p for p in laptop.home.rglob("*") if p.name.endswith(REPORTS)]
    _left_then_fetched(cli, laptop.home / "artifacts" / run_id, run_id, None)


def test_an_on_cluster_analysis_is_cancelled_as_any_run(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    """Issue 36: the map and reduce jobs of `analyze --on-cluster` were not runs (`cancel`
    could not see them). The reduce, waiting on the map array, is cancelled by its run id."""
    from orchestrator.runs import on_cluster

    _submit(cli, prefix, "artifacts.reports=leave")
    store = Store(gh_home)
    run = store.find_run("last")
    sub, _ = on_cluster.submit(store, gh_home, [run])
    try:
        res = cli("cancel", sub.reduce_run.run_id)
        assert res.rc == 0, res.text
        states = on_cluster.wait(store, sub, interval=0.5)
        assert states[sub.reduce_run.run_id] == "CANCELLED", states
        events = [e.detail or "" for e in store.events(sub.reduce_run.run_id)]
        assert any("intent" in e for e in events) and any("submitted as" in e for e in events)
        with pytest.raises(RuntimeFailure, match=f"gh-run logs {sub.reduce_run.run_id}"):
            on_cluster.results(gh_home, sub, states)
    finally:
        shutil.rmtree(sub.folder, ignore_errors=True)
