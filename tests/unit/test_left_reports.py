"""Which files a run leaves on the cluster with `artifacts.reports: leave`
(orchestrator/artifacts/left_reports.py), and which reports `analyze --on-cluster` finds in a
manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.artifacts import left_reports
from orchestrator.core.errors import UserError
from orchestrator.runs import on_cluster
from orchestrator.store.db import Run

FILES = {
    "artifacts/r.0.sqlite": 1,
    "artifacts/r.0.sqlite.gh-run.json": 2,
    "artifacts/r.0.nsys-rep": 3,
    "artifacts/r.1.sqlite": 4,  # no record: gh-run could not analyse it there
    "artifacts/r.1.nsys-rep": 5,
    "artifacts/r.0_osrt_sum.csv": 6,
    "logs/1_0_log.err": 7,
}


def test_leave_keeps_only_what_the_job_analysed() -> None:
    kept, left = left_reports.split(FILES, "leave")
    assert set(left) == {"artifacts/r.0.sqlite", "artifacts/r.0.nsys-rep"}
    assert set(kept) == set(FILES) - set(left)
    assert kept["artifacts/r.1.sqlite"] == 4  # comes back: analysed here


def test_fetch_keeps_nothing_there() -> None:
    assert left_reports.split(FILES, "fetch") == (FILES, {})


def test_mismatches_name_what_changed() -> None:
    left = [left_reports.LeftReport(relpath="a", size=3, sha256="x" * 64, source="/c/a")]
    assert left_reports.mismatches(left, {"a": (3, "x" * 64)}) == []
    assert "changed" in left_reports.mismatches(left, {"a": (4, "y" * 64)})[0]
    assert "not brought back" in left_reports.mismatches(left, {})[0]


def _run(executor: str = "slurm") -> Run:
    return Run(
        run_id="r1",
        name="r",
        job_name="ghr-r1",
        spec_path=None,
        spec_json="{}",
        cluster="dev",
        partition="gh",
        executor=executor,
        run_dir="/scratch/runs/r1",
    )


def test_on_cluster_reports_come_from_the_manifest(tmp_path: Path) -> None:
    store = tmp_path / "artifacts" / "r1"
    store.mkdir(parents=True)
    (store / "manifest.json").write_text(
        json.dumps(
            {
                "files": [{"relpath": "artifacts/k.pt.trace.json.gz"}, {"relpath": "logs/x"}],
                "left": [
                    {"relpath": "artifacts/r.0.sqlite"},
                    {"relpath": "artifacts/r.0.nsys-rep"},
                ],
            }
        )
    )
    got = [r.there for r in on_cluster.reports_of(tmp_path, _run())]
    assert got == [
        "/scratch/runs/r1/artifacts/k.pt.trace.json.gz",
        "/scratch/runs/r1/artifacts/r.0.sqlite",
    ]


def test_on_cluster_refuses_a_local_run_and_one_never_collected(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="ran on this machine"):
        on_cluster.reports_of(tmp_path, _run("local"))
    with pytest.raises(UserError, match="gh-run fetch r1"):
        on_cluster.reports_of(tmp_path, _run())


def test_the_jobs_digest_stands_only_for_a_report_of_its_size() -> None:
    rec = json.dumps({"report": {"name": "r.sqlite", "size": 10, "sha256": "a" * 64}}).encode()
    assert left_reports.digest_in_record(rec, 10) == "a" * 64
    assert left_reports.digest_in_record(rec, 11) is None  # changed since: hashed again
    assert left_reports.digest_in_record(b"not json", 10) is None
    assert left_reports.digest_in_record(b'{"report": {"size": 10, "sha256": "x"}}', 10) is None
