"""The reference workload through gh-run on the real dev cluster: 2 CPU steps, its Kineto trace
and metrics.json collected with verified checksums."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from orchestrator.store.db import Store

pytest.importorskip("torch", reason="the reference workload needs torch (make install adds it)")
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.cluster


def test_smoke_train_runs_on_dev_cluster_and_comes_back(dev_cluster, cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "submit",
        str(REPO / "jobs" / "smoke_train.yaml"),
        "--executor",
        "slurm",
        "--wait",
        timeout=400,
    )
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    assert run.state == "COMPLETED" and run.executor == "slurm"
    got = {a.relpath: a for a in Store(gh_home).artifacts(run.run_id)}
    traces = [k for k in got if k.endswith(".pt.trace.json.gz")]
    assert traces, sorted(got)
    assert "artifacts/metrics.json" in got
    root = gh_home / "artifacts" / run.run_id
    metrics = json.loads((root / "artifacts" / "metrics.json").read_text())
    assert metrics["steps"] == 2
    assert len(metrics["losses"]) == 2 and metrics["median_step_time_s"] > 0
    assert metrics["peak_gpu_memory_bytes"] is None  # CPU run
    trace = json.loads(gzip.decompress((root / traces[0]).read_bytes()))
    assert trace["traceEvents"]
