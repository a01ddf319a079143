"""Task binding (issue 40): a partition's `binding:` (site/binding.py) rendered as sbatch
directives and srun flags (render/binding.py) for jobs of one task per GPU, left out, saying
why, for the others; refused where it cannot work (the launcher binding too, a GPU binding
without GPUs, one GPU per task under NeMo's Lightning)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.checks.fit import fit_partition
from orchestrator.core.errors import UserError
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import Cluster, load_cluster
from orchestrator.spec.job import JobSpec
from orchestrator.spec.yamlio import load_model
from tests.unit.test_golden import extract_files

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "examples" / "gh200-site" / "cluster.yaml"  # fictional


def _sft(partition: str, tasks: int, gpus: int, cpus: int, *extra: str) -> JobSpec:
    over = [
        *extra,
        f"cluster={SITE}",
        f"partition={partition}",
        f"resources.ntasks_per_node={tasks}",
        f"resources.gpus_per_node={gpus}",
        f"resources.cpus_per_task={cpus}",
    ]
    return load_model(REPO / "jobs" / "sft.yaml", JobSpec, over)


def _render(spec: JobSpec, cluster: Cluster | None = None) -> tuple[list[str], str]:
    cluster = cluster or load_cluster(str(SITE))
    name, part = fit_partition(spec, cluster, "job")
    script = render_job(spec, cluster, name, part, "r", "/runs/r").script
    directives = [ln[len("#SBATCH ") :] for ln in script.splitlines() if ln.startswith("#SBATCH")]
    return directives, script


def _site(**binding: object) -> Cluster:
    doc = yaml.safe_load(SITE.read_text())
    doc["partitions"]["quad"]["binding"] = binding
    return Cluster.model_validate(doc)


def test_one_task_per_gpu_each_on_its_socket_and_memory() -> None:
    directives, script = _render(_sft("quad", 4, 4, 72))
    # local_rank: the GPUs as the job asked for them, each task takes GPU LOCAL_RANK
    assert "--gpus-per-node=4" in directives and "--ntasks-per-socket=1" in directives
    assert not any(d.startswith("--gpus-per-task") for d in directives)
    srun = next(ln for ln in script.splitlines() if "task.sh" in ln and "--cpu-bind" in ln)
    assert "--distribution=block:cyclic --cpu-bind=cores --mem-bind=local bash" in srun
    assert "--gpu-bind" not in srun
    assert "#   GPU: each task sees the node's GPUs and uses GPU LOCAL_RANK" in script
    # the post-processing step (one task per node) is not bound as the ranks are
    post = extract_files(script)["nsys_post.sh"]
    assert "--cpu-bind" not in post and "--mem-bind" not in post


def test_single_gpu_per_task() -> None:
    directives, script = _render(_sft("single", 1, 1, 72, "container.runtime=apptainer"))
    assert "--gpus-per-task=1" in directives
    assert not any(d.startswith(("--gpus-per-node", "--gres")) for d in directives)
    assert "--gpu-bind=single:1 --distribution=block:cyclic --cpu-bind=cores" in script
    # a typed gres partition asks for typed GPUs per task
    doc = yaml.safe_load(SITE.read_text())
    doc["partitions"]["single"]["gpu_directive"] = "gres"
    directives, _ = _render(
        _sft("single", 1, 1, 72, "container.runtime=apptainer"), Cluster.model_validate(doc)
    )
    assert "--gpus-per-task=gh200:1" in directives


def test_a_task_driving_several_gpus_is_not_bound() -> None:
    directives, script = _render(_sft("quad", 1, 4, 288))
    assert "--gpus-per-node=4" in directives and "--ntasks-per-socket=1" not in directives
    assert "--mem-bind" not in script and "--cpu-bind" not in script
    assert (
        "#   Not bound: the partition binds one task per GPU, and this job runs 1 task(s) for "
        "4 GPU(s) per node." in script
    )


def test_each_part_can_be_left_to_the_site() -> None:
    _, script = _render(_sft("quad", 4, 4, 72), _site(gpu="none", cpu="none", memory="local"))
    assert "  --mem-bind=local bash" in script
    assert "--cpu-bind" not in script and "--distribution" not in script
    assert "GPU:" not in script


def test_nemo_with_one_visible_gpu_per_task_is_refused() -> None:
    with pytest.raises(UserError) as exc:
        _render(_sft("quad", 4, 4, 72), _site(gpu="single"))
    assert "workload.kind: partition 'quad' shows each task only its own GPU" in exc.value.message
    assert "refuses trainer.devices=4 on a task that sees one" in exc.value.message
    # a command workload takes whatever GPU it sees
    spec = _sft("quad", 4, 4, 72)
    spec = JobSpec.model_validate(
        {**spec.model_dump(exclude_none=True), "workload": {"kind": "command", "command": "app"}}
    )
    directives, _ = _render(spec, _site(gpu="single"))
    assert "--gpus-per-task=1" in directives


def test_the_cluster_file_refuses_a_binding_twice_or_without_gpus() -> None:
    doc = yaml.safe_load(SITE.read_text())
    doc["partitions"]["quad"]["launcher"] = {"options": ["--cpu-bind=sockets"]}
    with pytest.raises(ValueError, match=r"launcher.options --cpu-bind=sockets and binding both"):
        Cluster.model_validate(doc)
    doc = yaml.safe_load(SITE.read_text())
    doc["partitions"]["grace"]["binding"] = {}
    with pytest.raises(ValueError, match=r"binding.gpu: local_rank on a partition without GPUs"):
        Cluster.model_validate(doc)
    doc["partitions"]["grace"]["binding"] = {"gpu": "none"}
    Cluster.model_validate(doc)
