"""Cluster files and the check of a job against its partition (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.checks.controller_answer import explain_controller
from orchestrator.core.errors import UserError
from orchestrator.site.cluster import (
    Cluster,
    Partition,
    image_arch,
    load_cluster,
    validate_job,
)
from orchestrator.spec.job import JobSpec


def job(**over: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "workload": {"command": "true"}}
    for key, value in over.items():
        head, _, tail = key.partition("__")
        if tail:
            data.setdefault(head, {})[tail] = value
        else:
            data[head] = value
    return JobSpec.model_validate(data)


@pytest.fixture(scope="module")
def gh200() -> Cluster:
    return load_cluster("gh200")


@pytest.fixture(scope="module")
def dev() -> Cluster:
    return load_cluster("dev")


@pytest.mark.parametrize(
    ("over", "sentence"),
    [
        (
            {"resources__gpus_per_node": 2},
            "spec.yaml: resources.gpus_per_node: 2 GPUs per node asked, but partition 'gh' has 1 "
            "per node; ask for at most 1",
        ),
        (
            {"resources__nodes": 9},
            "spec.yaml: resources.nodes: 9 nodes asked, but partition 'gh' allows at most 8; "
            "ask for fewer nodes",
        ),
        (
            {"resources__time": "2:00:01"},
            "spec.yaml: resources.time: 02:00:01 is over the limit of partition 'gh', 02:00:00; "
            "ask for 02:00:00 or less",
        ),
        (
            {"resources__mem": "481G"},
            "spec.yaml: resources.mem: 481G is more than a node of partition 'gh' has (480G); "
            "ask for 480G or less",
        ),
        (
            {"resources__cpus_per_task": 73},
            "spec.yaml: resources.cpus_per_task: 1 tasks x 73 CPUs is more than the 72 cores of "
            "a node of partition 'gh'; lower cpus_per_task or ntasks_per_node",
        ),
        (
            {"resources__constraint": "nvme,ib"},
            "spec.yaml: resources.constraint: feature ib, nvme is not offered by partition 'gh' "
            "(features: none); drop it or pick another partition",
        ),
        (
            {"container__runtime": "singularity", "container__image": "/img/nemo-24.05-amd64.sif"},
            "spec.yaml: container.image: image '/img/nemo-24.05-amd64.sif' is named as an x86_64 "
            "image, but partition 'gh' runs aarch64 nodes; use an aarch64 build of the image",
        ),
        (
            {"partition": "cpu"},
            "spec.yaml: partition: partition 'cpu' does not exist on cluster 'gh200'; choose one "
            "of: gh",
        ),
    ],
)
def test_each_refusal_is_one_sentence(gh200: Cluster, over: dict[str, Any], sentence: str) -> None:
    with pytest.raises(UserError) as exc:
        validate_job(job(**over), gh200, "spec.yaml")
    assert exc.value.message == sentence


def test_a_fitting_job_passes_at_the_limits(gh200: Cluster) -> None:
    spec = job(
        resources__gpus_per_node=1,
        resources__nodes=8,
        resources__time="02:00:00",
        resources__mem="480G",
        resources__cpus_per_task=72,
        container__runtime="singularity",
        container__image="docker://nvcr.io/nvidia/nemo:24.05-arm64",
    )
    name, part = validate_job(spec, gh200, "spec.yaml")
    assert (name, part.arch) == ("gh", "aarch64")


@pytest.mark.parametrize(
    ("image", "arch"),
    [
        ("nemo-amd64.sif", "x86_64"),
        ("/images/pytorch_x86_64.sif", "x86_64"),
        ("docker://nvcr.io/nvidia/pytorch:24.05-py3-arm64", "aarch64"),
        ("nemo-sbsa.sif", "aarch64"),
        ("nemo-nightly.sif", None),  # the name says nothing: the controller decides
        ("samd64x.sif", None),  # a word inside another word is not a hint
    ],
)
def test_image_arch_from_the_name(image: str, arch: str | None) -> None:
    found = image_arch(job(container__runtime="apptainer", container__image=image))
    assert (found[0] if found else None) == arch


def test_arm_image_on_x86_partition_is_refused_too(dev: Cluster) -> None:
    spec = job(container__runtime="singularity", container__image="nemo-arm64.sif")
    with pytest.raises(UserError, match="runs x86_64 nodes; use an x86_64 build"):
        validate_job(spec, dev, "spec.yaml")


def test_constraint_features_the_partition_offers_pass() -> None:
    part = Partition(features=["nvme", "ib"])
    cl = Cluster(name="c", default_partition="p", partitions={"p": part})
    validate_job(job(resources__constraint="nvme,ib"), cl, "s")
    with pytest.raises(UserError, match="feature gpu is not offered by partition 'p'"):
        validate_job(job(resources__constraint="nvme,gpu"), cl, "s")


def write_cluster(tmp_path: Path, partition_yaml: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(
        "name: site\ndefault_partition: p\npartitions:\n  p:\n"
        + "".join(f"    {line}\n" for line in partition_yaml.strip().splitlines())
    )
    return path


@pytest.mark.parametrize(
    ("partition_yaml", "needle"),
    [
        ("env:\n  1BAD: x", "site.yaml:6: partitions.p.env: "),
        ("env:\n  'A B': x", "environment variable name 'A B' is not valid"),
        ("env:\n  'X;rm': x", "use letters, digits and _"),
        ("default_time: '03:00:00'\nmax_time: '02:00:00'", "default_time 03:00:00 is longer"),
        ("template: ../../etc/passwd", "must be a plain name"),
        ("sbatch_options: ['--comment=a b']", "is not an sbatch option"),
        ("gpus_per_node: -1", "partitions.p.gpus_per_node"),
        ("arch: ppc64le", "partitions.p.arch"),
        ("max_time: soon", "is not a SLURM time"),
    ],
)
def test_bad_cluster_files_are_refused(tmp_path: Path, partition_yaml: str, needle: str) -> None:
    path = write_cluster(tmp_path, partition_yaml)
    with pytest.raises(UserError) as exc:
        load_cluster(str(path))
    assert needle in exc.value.message
    assert str(path.name) in exc.value.message


def test_partition_env_values_are_data_and_reach_the_model(tmp_path: Path) -> None:
    path = write_cluster(tmp_path, 'env:\n  OMP_NUM_THREADS: 8\n  NOTE: "$(rm -rf /)"')
    part = load_cluster(str(path)).partitions["p"]
    assert part.env == {"OMP_NUM_THREADS": "8", "NOTE": "$(rm -rf /)"}


def test_source_is_not_a_yaml_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: c\nsource: /etc\ndefault_partition: p\npartitions:\n  p: {}\n")
    with pytest.raises(UserError, match="source"):
        load_cluster(str(path))
    path.write_text("name: c\ndefault_partition: p\npartitions:\n  p: {}\n")
    assert load_cluster(str(path)).source == str(path.resolve())


def test_default_partition_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ndefault_partition: q\npartitions:\n  p: {}\n")
    with pytest.raises(UserError, match="default_partition 'q' is not among the partitions"):
        load_cluster(str(path))


@pytest.mark.parametrize(
    ("ok", "text", "words"),
    [
        (
            True,
            "Job 7 to start at 2026-01-01T00:00:00 using 2 processors on nodes gh1 in partition gh",
            "it would start at 2026-01-01T00:00:00 on gh1 with 2 CPU cores",
        ),
        (
            False,
            "allocation failure: Requested node configuration is not available",
            "no node of the partition has what one node of this job asks for",
        ),
        (
            False,
            "Requested time limit is invalid (missing or exceeds some limit)",
            "the time limit is over",
        ),
        (False, "something new", "it refused the job"),
    ],
)
def test_controller_verdict_in_plain_words(ok: bool, text: str, words: str) -> None:
    assert explain_controller(ok, text).startswith(words)


def test_shipped_cluster_files_describe_the_seed_site(gh200: Cluster, dev: Cluster) -> None:
    gh = gh200.partitions["gh"]
    assert (gh.arch, gh.gpus_per_node, gh.gpu_mem, gh.cpus_per_node, gh.mem_per_node) == (
        "aarch64",
        1,
        "96G",
        72,
        "480G",
    )
    assert (gh.max_time, gh.os, gh.container.runtime) == (
        "02:00:00",
        "Rocky Linux 9",
        "singularity",
    )
    d = dev.partitions["gh"]
    assert (d.nodes, d.cpus_per_node, d.mem_per_node, d.gpu_type) == (
        ["gh1", "gh2"],
        2,
        "4000M",
        "gh200",
    )


def _site_with_defaults(tmp_path: Path, accounts: str = "[]") -> Cluster:
    f = tmp_path / "site.yaml"
    f.write_text(
        "name: site\n"
        "default_partition: gh\n"
        "defaults:\n"
        "  account: proj1\n"
        "  qos: normal\n"
        "  env: {SITE_WIDE: 'from the site', SHARED: site}\n"
        "  setup: ['module load site-base']\n"
        "partitions:\n"
        "  gh:\n"
        "    max_nodes: 2\n"
        f"    accounts: {accounts}\n"
        "    env: {SHARED: partition}\n"
        "    setup: ['module load cuda']\n"
    )
    return load_cluster(str(f))


def test_cluster_defaults_reach_the_script(tmp_path: Path) -> None:
    from orchestrator.render.scripts import render_job

    site = _site_with_defaults(tmp_path)
    spec = job()
    name, part = validate_job(spec, site, "spec.yaml")
    assert (spec.resources.account, spec.resources.qos) == ("proj1", "normal")
    script = render_job(spec, site, name, part, "t-1", str(tmp_path / "run")).script
    assert "#SBATCH --account=proj1" in script and "#SBATCH --qos=normal" in script
    # The site's env is there; the partition's value of a shared name wins over the site's.
    assert "SITE_WIDE='from the site'" in script
    assert "SHARED=partition" in script and "SHARED=site" not in script
    # Site-wide setup comes first, then the partition's.
    assert script.index("module load site-base") < script.index("module load cuda")


def test_the_jobs_own_account_wins_and_is_checked(tmp_path: Path) -> None:
    site = _site_with_defaults(tmp_path, accounts="[proj1, proj2]")
    spec = job(resources__account="proj2", resources__qos="high")
    validate_job(spec, site, "spec.yaml")
    assert (spec.resources.account, spec.resources.qos) == ("proj2", "high")
    with pytest.raises(UserError, match=r"resources.account: 'other' may not use partition 'gh'"):
        validate_job(job(resources__account="other"), site, "spec.yaml")


def test_a_default_account_the_partition_refuses_is_refused(tmp_path: Path) -> None:
    site = _site_with_defaults(tmp_path, accounts="[proj9]")
    with pytest.raises(UserError, match=r"resources.account: 'proj1' may not use partition 'gh'"):
        validate_job(job(), site, "spec.yaml")


def test_no_defaults_leave_the_job_as_it_is(dev: Cluster) -> None:
    spec = job()
    validate_job(spec, dev, "spec.yaml")
    assert spec.resources.account is None and spec.resources.qos is None
