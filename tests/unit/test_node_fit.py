"""GH200 nodes (issue 40): node-wide collectors once per node, the container runtime and the
image's architecture against the partition, and a script whose size does not grow with the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checks.fit import fit_partition
from orchestrator.checks.sif_arch import sif_arch
from orchestrator.core.errors import UserError
from orchestrator.nsys import node_wide
from orchestrator.nsys.profile import ProfileSpec
from orchestrator.render.node_post import rank_ranges
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster
from orchestrator.spec.job import JobSpec
from tests.unit.test_golden import extract_files

REPO = Path(__file__).resolve().parents[2]
QUAD = REPO / "examples" / "gh200-site" / "cluster.yaml"  # fictional: partition quad
X86_SIF = Path("/opt/gh-run/images/gh-run-test.sif")  # the real test image (build-test-image.sh)


def _job(**over: object) -> JobSpec:
    data: dict[str, object] = {
        "name": "t",
        "resources": {"nodes": 2, "ntasks_per_node": 4, "gpus_per_node": 4, "cpus_per_task": 72},
        "container": {"runtime": "singularity", "image": "/scratch/i.sif"},
        "profile": {"tool": "nsys", "event_sample": "system-wide", "sample": "system-wide"},
        "workload": {"command": "app"},
    }
    data.update(over)
    return JobSpec.model_validate(data)


def _refusal(job: JobSpec) -> str:
    with pytest.raises(UserError) as exc:
        fit_partition(job, load_cluster(str(QUAD)), "job")
    return exc.value.message


def test_every_profile_field_is_classified() -> None:
    # a new ProfileSpec field must say whether it records the node (node_wide.py)
    fields = set(ProfileSpec.model_fields)
    assert fields == node_wide.PER_PROCESS | node_wide.NODE_WIDE_FIELDS


def test_one_rank_per_node_runs_the_node_wide_collectors() -> None:
    cluster = load_cluster(str(QUAD))
    job = _job()
    pn, part = fit_partition(job, cluster, "job")
    r = render_job(job, cluster, pn, part, "r", "/runs/r")
    assert r.context.node_wide == ["sample=system-wide", "event_sample=system-wide"]
    sampler, other = r.context.sampler_argv, r.context.argv
    assert sampler is not None
    assert "--event-sample=system-wide" in sampler and "--sample=system-wide" in sampler
    assert "--event-sample=none" in other and "--sample=process-tree" in other
    task = extract_files(r.script)["task.sh"]
    # by SLURM's own variable: set whether or not the rank variables are exported
    assert 'if [ "${SLURM_LOCALID:-0}" = 0 ]; then' in task


def test_two_samplers_per_node_are_refused() -> None:
    # half a node: another job's sampler could share it
    job = _job(resources={"nodes": 1, "ntasks_per_node": 2, "gpus_per_node": 2, "cpus_per_task": 8})
    assert "resources.exclusive: the node-wide collectors" in _refusal(job)
    assert "two samplers per node" in _refusal(job)
    job = _job(
        resources={
            "nodes": 1, "ntasks_per_node": 2, "gpus_per_node": 2, "cpus_per_task": 8,
            "exclusive": True,
        }
    )  # fmt: skip
    fit_partition(job, load_cluster(str(QUAD)), "job")
    # the sampler's rank not profiled on a node
    job = _job(profile={"tool": "nsys", "sample": "system-wide", "ranks": [1, 2]})
    assert "profile.ranks: node 0 has profiled ranks but not rank 0" in _refusal(job)


def test_a_wrong_runtime_is_refused() -> None:
    job = _job(container={"runtime": "apptainer", "image": "/scratch/i.sif"})
    assert "runs containers with singularity, not apptainer" in _refusal(job)


def test_an_x86_64_sif_is_refused_on_an_aarch64_partition() -> None:
    if not X86_SIF.is_file():
        pytest.skip(f"no test image {X86_SIF} (make deps builds it)")
    assert sif_arch(X86_SIF) == "x86_64"
    job = _job(container={"runtime": "singularity", "image": str(X86_SIF)})
    why = _refusal(job)
    assert f"{X86_SIF} was built for x86_64 (its SIF header says so)" in why
    assert "partition 'quad' runs aarch64 nodes" in why


def test_sif_arch_of_what_is_no_sif(tmp_path: Path) -> None:
    f = tmp_path / "x.sif"
    f.write_bytes(b"#!/usr/bin/env run-singularity\n\x00NOT_MAGIC" + bytes(200))
    assert sif_arch(f) is None
    assert sif_arch(tmp_path / "missing.sif") is None


def test_rank_ranges() -> None:
    assert rank_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert rank_ranges(list(range(2048))) == "0-2047"


@pytest.mark.parametrize("nodes", [1, 8, 512])
def test_the_script_does_not_grow_with_the_job(nodes: int) -> None:
    cluster = load_cluster(str(QUAD))
    sizes = []
    for n in (1, nodes):
        job = _job(resources={"nodes": n, "ntasks_per_node": 4, "gpus_per_node": 4,
                              "cpus_per_task": 72})  # fmt: skip
        pn, part = fit_partition(job, cluster, "job")
        sizes.append(len(render_job(job, cluster, pn, part, "r", "/runs/r").script))
    # only the digits of the node and rank counts differ (a few numbers, a few bytes each)
    assert sizes[1] - sizes[0] < 64


def test_cpu_metrics_are_sampled_by_one_rank_per_node() -> None:
    """nsys 2026.3+'s --cpu-metrics reads the cores' and sockets' counters: node-wide, so local
    rank 0 of each node asks for them and the other ranks do not."""
    cluster = load_cluster(str(QUAD))
    job = _job(
        profile={"tool": "nsys", "nsys_version": "2026.4", "cpu_metrics": ["cycles", "llc-misses"]}
    )
    pn, part = fit_partition(job, cluster, "job")
    r = render_job(job, cluster, pn, part, "r", "/runs/r")
    assert r.context.node_wide == ["cpu_metrics=cycles,llc-misses"]
    assert r.context.sampler_argv is not None
    assert "--cpu-metrics=cycles,llc-misses" in r.context.sampler_argv
    assert not any(a.startswith("--cpu-metrics") for a in r.context.argv)
