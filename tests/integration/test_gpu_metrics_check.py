"""A job that samples GPU metrics (issue 29 item 3) meets the real dev controller: `gh-run
check` sends its script to `sbatch --test-only`, and says that the counters may be closed
(this machine has no NVIDIA driver to ask)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster

SET = ["--set", "profile.gpu_metrics.frequency=1000"]


def test_check_of_a_sampling_job(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("check", "jobs/smoke_profiled.yaml", *SET)
    assert res.rc == 0, res.text
    assert "the SLURM controller accepts smoke-profiled on partition gh" in res.out
    assert "GPU counters" in res.text and "ERR_NVGPUCTRPERM" in res.text
    script = cli("render", "jobs/smoke_profiled.yaml", *SET)
    assert script.rc == 0, script.text
    # two nodes, one rank each: each node's rank samples, and the post step checks both
    assert script.out.count("--gpu-metrics-device=all") == 1
    assert script.out.count("    ghr_samples ") == 2
