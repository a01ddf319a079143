"""A job that samples GPU metrics (issue 29 item 3) meets the real dev controller: `gh-run
check` sends its script to `sbatch --test-only`, and says that the counters may be closed
(this machine has no NVIDIA driver to ask)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster

# exclusive: GPU metrics sample every GPU of a node, so a job sharing its nodes would meet
# another job's sampler there (issue 40: check refuses it; tests/unit/test_node_fit.py)
SET = ["--set", "profile.gpu_metrics.frequency=1000", "--set", "resources.exclusive=true"]


def test_check_of_a_sampling_job(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("check", "jobs/smoke_profiled.yaml", *SET)
    assert res.rc == 0, res.text
    assert "the SLURM controller accepts smoke-profiled on partition gh" in res.out
    assert "GPU counters" in res.text and "ERR_NVGPUCTRPERM" in res.text
    script = cli("render", "jobs/smoke_profiled.yaml", *SET)
    assert script.rc == 0, script.text
    # two nodes, one rank each: each node's rank samples, and the post step checks each
    # export of a sampling rank (local rank 0 of every node: all of them here)
    assert script.out.count("--gpu-metrics-device=all") == 1
    assert "\nghr_sampler=0\n" in script.out and "\nghr_tasks_per_node=1\n" in script.out
    assert script.out.count('        ghr_samples "$src"') == 1


def test_check_refuses_a_sampler_on_shared_nodes(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("check", "jobs/smoke_profiled.yaml", "--set", "profile.gpu_metrics.frequency=1000")
    assert res.rc == 2, res.text
    assert "the node-wide collectors (gpu_metrics) record the whole node" in res.err, res.text
    assert "set resources.exclusive: true" in res.err, res.text
