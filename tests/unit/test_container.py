"""ContainerSpec → the singularity/apptainer exec line; image checks at submit; arch refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.cluster import load_cluster, validate_job
from orchestrator.container import ContainerSpec, check_image, exec_prefix
from orchestrator.errors import UserError
from orchestrator.spec import JobSpec


def spec(**fields: object) -> ContainerSpec:
    return ContainerSpec.model_validate(fields)


def test_none_runtime_has_no_prefix() -> None:
    assert exec_prefix(spec(), ["/site:/site"], "/runs/r") == []


def test_full_exec_line_in_order() -> None:
    c = spec(
        runtime="apptainer",
        image="/img/nemo.sif",
        binds=["/data:/data:ro", "/scratch/llm:/workspace", "/home/me"],
        env={"A": "1 2", "FLAG": True},
        env_file="/etc/job.env",
        cleanenv=True,
        containall=True,
        pwd="/workspace",
    )
    assert exec_prefix(c, ["/site/lib:/opt/site:ro"], "/runs/r1") == [
        "apptainer", "exec", "--nv", "--cleanenv", "--containall", "--pwd", "/workspace",
        "--bind", "/site/lib:/opt/site:ro",
        "--bind", "/runs/r1:/runs/r1",
        "--bind", "/data:/data:ro",
        "--bind", "/scratch/llm:/workspace",
        "--bind", "/home/me:/home/me",
        "--env", "A=1 2",
        "--env", "FLAG=true",
        "--env-file", "/etc/job.env",
        "/img/nemo.sif",
    ]  # fmt: skip


def test_job_bind_replaces_partition_bind_of_same_destination() -> None:
    c = spec(runtime="singularity", image="/i.sif", nv=False, binds=["/mine:/opt/site"])
    assert exec_prefix(c, ["/site:/opt/site:ro"]) == [
        "singularity", "exec", "--bind", "/mine:/opt/site", "/i.sif",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("bind", "why"),
    [
        ("data:/data", "absolute"),
        ("/a:/b:rx", "ro or rw"),
        ("/a:/b:ro:x", "is not SRC"),
        ("/a/../etc:/b", "'..'"),
        (":/b", "is not SRC"),
    ],
)
def test_bad_binds_are_refused(bind: str, why: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(why)):
        spec(runtime="singularity", image="/i.sif", binds=[bind])


def test_bad_env_and_paths_are_refused() -> None:
    with pytest.raises(ValidationError, match="not valid"):
        spec(env={"1X": "a"})
    with pytest.raises(ValidationError, match="control character"):
        spec(env={"X": "a\nb"})
    with pytest.raises(ValidationError, match="absolute"):
        spec(pwd="work")
    with pytest.raises(ValidationError, match="absolute"):
        spec(env_file="job.env")


def test_image_is_required_for_a_runtime() -> None:
    with pytest.raises(ValidationError, match=r"container.image is required"):
        JobSpec.model_validate(
            {"name": "x", "container": {"runtime": "singularity"}, "workload": {"command": "t"}}
        )


def test_check_image_at_submit(tmp_path: Path) -> None:
    image = tmp_path / "nemo.sif"
    with pytest.raises(UserError, match=r"jobs/x.yaml: container.image: .*nemo.sif does not exist"):
        check_image(spec(runtime="singularity", image=str(image)), "jobs/x.yaml")
    image.write_bytes(b"SIF")
    check_image(spec(runtime="singularity", image=str(image)), "jobs/x.yaml")
    with pytest.raises(UserError, match="relative path"):
        check_image(spec(runtime="singularity", image="nemo.sif"), "jobs/x.yaml")
    # pulled images and runtime none are not files to check
    check_image(spec(runtime="apptainer", image="docker://nvcr.io/nvidia/nemo:24.05"), "j")
    check_image(spec(runtime="none", image="/nope.sif"), "j")


def test_submit_refuses_a_missing_image_before_anything_is_written(
    cli,
    gh_home: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    res = cli(
        "submit", "jobs/smoke.yaml", "--executor", "local",
        "--set", "container.runtime=singularity",
        "--set", f"container.image={tmp_path}/missing.sif",
    )  # fmt: skip
    assert res.rc == 2, res.text
    assert f"jobs/smoke.yaml: container.image: {tmp_path}/missing.sif does not exist" in res.text
    assert not (gh_home / "runs").exists() or not any((gh_home / "runs").iterdir())


def test_render_works_without_the_image() -> None:
    job = JobSpec.model_validate(
        {
            "name": "x",
            "container": {"runtime": "singularity", "image": "/nowhere/nemo.sif"},
            "workload": {"command": "true"},
        }
    )
    cluster = load_cluster("dev")
    from orchestrator.render import render_job

    pn, part = validate_job(job, cluster)
    script = render_job(job, cluster, pn, part, "r", "/runs/r").script
    assert "singularity exec --nv --bind /runs/r:/runs/r /nowhere/nemo.sif" in script.replace(
        " \\\n  ", " "
    )


@pytest.mark.parametrize(
    ("container", "fragments"),
    [
        (
            {"runtime": "singularity", "image": "/img/nemo-24.05-amd64.sif"},
            ["container.image:", "nemo-24.05-amd64.sif", "x86_64", "'gh'", "aarch64"],
        ),
        (
            {"runtime": "singularity", "image": "/img/nemo.sif", "arch": "x86_64"},
            ["container.arch:", "x86_64", "'gh'", "aarch64"],
        ),
    ],
)
def test_arch_mismatch_with_the_partition_is_refused(
    container: dict[str, object], fragments: list[str]
) -> None:
    job = JobSpec.model_validate(
        {
            "name": "x",
            "cluster": "gh200",
            "resources": {"gpus_per_node": 1},
            "container": container,
            "workload": {"command": "true"},
        }
    )
    with pytest.raises(UserError, match="partition") as exc:
        validate_job(job, load_cluster("gh200"), "jobs/x.yaml")
    message = str(exc.value)
    assert message.startswith("jobs/x.yaml: ") and message.count(";") == 1, message
    for fragment in fragments:
        assert fragment in message, message


def test_arm64_image_is_accepted_on_gh() -> None:
    job = JobSpec.model_validate(
        {
            "name": "x",
            "container": {"runtime": "singularity", "image": "/i/nemo-arm64.sif"},
            "workload": {"command": "true"},
        }
    )
    assert validate_job(job, load_cluster("gh200"))[0] == "gh"
