"""Issue 42, class 6: the right cluster for every job gh-run submits. `analyze --on-cluster`
submits a map array and a reduce job: it now confirms, as `submit` does, that the controller
reached is the cluster the run's cluster file names and the one the run went to, before
anything is written or sent. On the real dev cluster (ClusterName ghdev); a cluster file naming
another cluster, and a run recorded as sent elsewhere, stand in for a site with several."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from orchestrator.artifacts import collect as artifacts
from orchestrator.spec.job import load_spec
from orchestrator.store.db import Run, Store
from tests.conftest import REPO
from tests.integration.test_cluster_identity import dev_copy

pytestmark = pytest.mark.cluster


def _recorded_run(home: Path, tmp_path: Path, cluster_file: Path, slurm_cluster: str) -> str:
    """An ended SLURM run of this user's, with one report its manifest lists."""
    run_id = f"oc-{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / "runs" / run_id
    (run_dir / "artifacts").mkdir(parents=True)
    spec = load_spec(REPO / "jobs" / "smoke.yaml")
    spec.cluster = str(cluster_file)
    Store(home).add_run(
        Run(
            run_id=run_id,
            name="smoke",
            job_name=f"ghr-{run_id}",
            spec_path=None,
            spec_json=spec.model_dump_json(),
            cluster="dev",
            partition="gh",
            executor="slurm",
            run_dir=str(run_dir),
            state="COMPLETED",
            job_id="1",
            slurm_cluster=slurm_cluster,
        )
    )
    folder = artifacts.store_dir(home, run_id)
    folder.mkdir(parents=True)
    entry = {"relpath": "artifacts/r.sqlite", "size": 1, "sha256": "0" * 64, "source": "x"}
    (folder / "manifest.json").write_text(json.dumps({"files": [entry], "left": []}))
    return run_id


@pytest.mark.parametrize(
    ("file_names", "recorded", "words"),
    [
        ("otherdev", "ghdev", "this file describes SLURM cluster 'otherdev'"),
        ("ghdev", "elsewhere", "was submitted to SLURM cluster 'elsewhere'"),
    ],
    ids=["the cluster file's", "the run's"],
)
def test_analyze_on_cluster_sends_nothing_to_another_cluster(  # type: ignore[no-untyped-def]
    dev_cluster: None,
    cli,
    gh_home: Path,
    tmp_path: Path,
    file_names: str,
    recorded: str,
    words: str,
) -> None:
    cluster_file = dev_copy(tmp_path, "dev", cluster_name=file_names)
    run_id = _recorded_run(gh_home, tmp_path, cluster_file, recorded)
    res = cli("analyze", "--on-cluster", run_id)
    assert res.rc == 2, res.text
    assert words in res.err and "'ghdev'" in res.err, res.err
    # the map script is written there before its sbatch: nothing was written, nothing sent
    assert not (tmp_path / "runs" / ".gh-run-analysis").exists()
