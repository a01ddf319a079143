"""ContainerSpec → the singularity/apptainer exec line; image checks at submit; arch refusals."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.core.errors import UserError
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.container import ContainerSpec, check_image, exec_prefix, forwarded_env
from orchestrator.spec.job import JobSpec


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
        "--set", "container.runtime=apptainer",
        "--set", f"container.image={tmp_path}/missing.sif",
    )  # fmt: skip
    assert res.rc == 2, res.text
    assert f"jobs/smoke.yaml: container.image: {tmp_path}/missing.sif does not exist" in res.text
    assert not (gh_home / "runs").exists() or not any((gh_home / "runs").iterdir())


def test_render_works_without_the_image() -> None:
    job = JobSpec.model_validate(
        {
            "name": "x",
            "container": {"runtime": "apptainer", "image": "/nowhere/nemo.sif"},
            "workload": {"command": "true"},
        }
    )
    cluster = load_cluster("dev")
    from orchestrator.render.scripts import render_job

    pn, part = validate_job(job, cluster)
    script = render_job(job, cluster, pn, part, "r", "/runs/r").script
    assert "apptainer exec --nv --bind /runs/r:/runs/r /nowhere/nemo.sif" in script.replace(
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


# -- cleanenv / containall: what the tasks need is forwarded under the runtime's prefix --------
REPO = Path(__file__).resolve().parents[2]
NEEDED = [
    "RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_JOB_ID",
    "CUDA_VISIBLE_DEVICES",
    "GH_RUN_ID", "GH_RUN_DIR", "GH_RUN_ARTIFACTS",
]  # fmt: skip


def _forwards(task: str, prefix: str, name: str) -> bool:
    line = f'if [ -n "${{{name}+x}}" ]; then export {prefix}{name}="${{{name}}}"; fi'
    return line in task.splitlines()


def test_sft_cleanenv_two_nodes_forwards_the_rank_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """jobs/sft.yaml --set container.cleanenv=true --set resources.nodes=2: nsys expands
    %q{SLURM_PROCID} and NeMo reads ${oc.env:GH_RUN_ARTIFACTS} inside the container, so both
    (and the rank/rendezvous variables) must reach it through SINGULARITYENV_."""
    from orchestrator.render.scripts import render_job
    from orchestrator.spec.job import load_spec
    from tests.unit.test_render import extract_files

    monkeypatch.setenv("SCRATCH", "/scratch/test")
    job = load_spec(
        REPO / "jobs" / "sft.yaml",
        ["container.cleanenv=true", "resources.nodes=2", "workload.env={HF_HOME: /workspace/hf}"],
    )
    cluster = load_cluster(job.cluster)
    pn, part = validate_job(job, cluster)
    script = render_job(job, cluster, pn, part, "sft-x", "/scratch/runs/sft-x").script
    task = extract_files(script)["task.sh"]
    assert "singularity exec --nv --cleanenv " in task.replace(" \\\n  ", " ")
    assert "%q{SLURM_PROCID}" in task and "${oc.env:GH_RUN_ARTIFACTS}" in task
    for name in [*NEEDED, "HF_HOME"]:
        assert _forwards(task, "SINGULARITYENV_", name), name
    assert "APPTAINERENV_" not in task
    # Forwarded after the rank variables are set, before the exec.
    lines = task.splitlines()
    rank_line = lines.index('export RANK="${SLURM_PROCID:-0}"')
    first_forward = next(i for i, ln in enumerate(lines) if "SINGULARITYENV_" in ln)
    exec_line = next(i for i, ln in enumerate(lines) if ln.startswith("exec "))
    assert rank_line < first_forward < exec_line
    for name, content in (("job.sbatch", script), ("task.sh", task)):
        path = tmp_path / name
        path.write_text(content)
        subprocess.run(["bash", "-n", str(path)], check=True)
        res = subprocess.run(
            ["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True
        )
        assert res.returncode == 0, res.stdout


def test_forwarding_prefix_and_what_is_not_forwarded() -> None:
    env = {"RUN_MODE": "x"}
    apptainer = spec(runtime="apptainer", image="/i.sif", containall=True, env=env)
    fwd = forwarded_env(apptainer, ["GH_RUN_ID", "HF_TOKEN", "RUN_MODE", "PATH", "HOME"])
    assert fwd["APPTAINERENV_RANK"] == "RANK"
    assert fwd["APPTAINERENV_SLURM_PROCID"] == "SLURM_PROCID"
    assert fwd["APPTAINERENV_HF_TOKEN"] == "HF_TOKEN"  # a secret: by name, its value stays out
    assert not any(k.startswith("SINGULARITYENV_") for k in fwd)
    # container.env (--env) sets RUN_MODE itself; the runtime refuses HOME and PATH this way.
    assert not {"APPTAINERENV_RUN_MODE", "APPTAINERENV_PATH", "APPTAINERENV_HOME"} & set(fwd)
    # Nothing to forward when the environment is passed through anyway.
    assert forwarded_env(spec(runtime="singularity", image="/i.sif"), ["GH_RUN_ID"]) == {}
    assert forwarded_env(spec(runtime="none", cleanenv=True), ["GH_RUN_ID"]) == {}


def test_a_secret_reaches_the_container_through_the_launcher_only(tmp_path: Path) -> None:
    from orchestrator.render.scripts import render_job
    from tests.unit.test_render import extract_files

    job = JobSpec.model_validate(
        {
            "name": "x",
            "container": {"runtime": "apptainer", "image": "/i.sif", "cleanenv": True},
            "workload": {"command": "true", "secret_env": ["HF_TOKEN"]},
        }
    )
    cluster = load_cluster("dev")
    pn, part = validate_job(job, cluster)
    task = extract_files(render_job(job, cluster, pn, part, "r", "/runs/r").script)["task.sh"]
    # the value never passes through the task's or the runtime's environment (nsys records
    # them): the launcher inside the container reads it from the job's private file
    assert not _forwards(task, "APPTAINERENV_", "HF_TOKEN")
    assert '/i.sif \\\n  sh \\\n  -c \\\n  \'. "$1" && shift && exec "$@"\'' in task
    assert "/runs/r/.secrets \\\n  true" in task
    assert _forwards(task, "APPTAINERENV_", "GH_RUN_ARTIFACTS")
