"""The in-job post-processing (nsys_post.sh) with the REAL nsys, run as the local executor runs
it (the whole rendered script, launcher direct, no container): rendered for the version the
site has, every report becomes a non-empty CSV and the export passes gh-run's check for lost
data; rendered for the wrong version, the real `nsys stats` exits 0 but writes no CSV, and the
job fails loudly with the report kept; a capture range that never opens leaves no report, and
the job says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.job import JobSpec
from tests import nsys_crash
from tests.conftest import real_nsys

pytestmark = pytest.mark.nsys_records


def _run(
    tmp_path: Path, declared: str, nsys: Path, **profile: Any
) -> tuple[subprocess.CompletedProcess[str], Path]:
    job = JobSpec.model_validate(
        {
            "name": "post",
            "profile": {
                "tool": "nsys",
                "trace": ["osrt"],
                "sample": "none",  # 2022.4 may hang at the end with sampling (docs/profiling.md)
                "cpuctxsw": "none",
                "reports": ["osrt_sum"],
                "nsys_version": declared,
                "nsys_path": str(nsys),
                **profile,
            },
            "workload": {"command": "python3", "args": ["-c", "import time; time.sleep(0.2)"]},
        }
    )
    cluster = load_cluster("dev")
    pn, part = validate_job(job, cluster)
    for attempt in range(nsys_crash.ATTEMPTS):  # nsys's own crashes: tests/nsys_crash.py
        run_dir = tmp_path / ("run" if attempt == 0 else f"run{attempt + 1}")
        run_dir.mkdir()
        script = render_job(job, cluster, pn, part, "post-test", str(run_dir), "direct").script
        (run_dir / "job.sbatch").write_text(script)
        res = subprocess.run(
            ["bash", str(run_dir / "job.sbatch")],
            capture_output=True,
            text=True,
            timeout=300,
            # the job's python3 is the one with gh-run, as a job submitted from its venv has
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        )
        if not nsys_crash.crashed(res.stderr):
            break
    return res, run_dir / "artifacts"


def test_rendered_for_the_right_version_every_report_is_a_csv(tmp_path: Path) -> None:
    res, art = _run(tmp_path, "2022.4", real_nsys("2022.4"))
    assert res.returncode == 0, res.stderr[-2000:]
    csv = art / "post_osrtsum.csv"  # 2022.4's name for osrt_sum
    assert csv.stat().st_size > 0 and "Time (%)" in csv.read_text()
    assert (art / "post.sqlite").stat().st_size > 0
    assert (art / "post.nsys-rep").stat().st_size > 0
    # gh-run's check of the export ran on the node, and found nothing lost
    assert "no gh-run on this node" not in res.stderr and "lost data" not in res.stderr


def test_a_capture_range_that_never_opens_fails_the_job_saying_so(tmp_path: Path) -> None:
    """nsys 2024.2 writes no report, and exits 0, when the workload never calls
    cudaProfilerStart (measured): the post-processing says which range never opened."""
    res, art = _run(
        tmp_path, "2024.2", real_nsys("2024.2"), capture_range="cudaProfilerApi",
        reports=["osrt_sum"],
    )  # fmt: skip
    assert res.returncode == 1, res.stderr[-2000:]
    assert "the capture range (cudaProfilerApi) never opened" in res.stderr
    assert not (art / "post.nsys-rep").exists()


def test_the_check_run_on_the_node_refuses_a_real_export_that_lost_its_kernels(
    capsys: Any,
) -> None:
    from orchestrator.analysis.readers.capture_health import main

    ddp = Path(__file__).resolve().parents[1] / "data" / "ddp_h200" / "nsys"
    assert main([str(ddp / "nsys.rank1.sqlite")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "this capture lost data" in line and "holds no kernel" in line


def test_rendered_for_the_wrong_version_the_job_fails_and_keeps_the_report(tmp_path: Path) -> None:
    # the site's nsys is 2022.4, the job says 2023.4: the real nsys stats knows no osrt_sum
    res, art = _run(tmp_path, "2023.4", real_nsys("2022.4"))
    assert "Report 'osrt_sum' could not be found" in res.stderr  # nsys's own words, exit 0
    assert res.returncode == 1
    assert "nsys stats wrote no " in res.stderr and "has no report osrt_sum?" in res.stderr
    assert "the tasks succeeded, but post-processing failed" in res.stderr
    assert not (art / "post_osrt_sum.csv").exists()
    assert (art / "post.nsys-rep").stat().st_size > 0  # kept
    assert (art / "post.sqlite").stat().st_size > 0


def test_a_report_kept_unexported_passes_with_the_report_there(tmp_path: Path) -> None:
    """export_sqlite false and no stats reports (the report exported elsewhere later): the
    script checks only that the report is there (it rendered an empty `else` branch, a bash
    syntax error that failed every such job)."""
    res, art = _run(tmp_path, "2024.2", real_nsys("2024.2"), export_sqlite=False, reports=[])
    assert res.returncode == 0, res.stderr[-2000:]
    assert (art / "post.nsys-rep").stat().st_size > 0
    assert not (art / "post.sqlite").exists()
