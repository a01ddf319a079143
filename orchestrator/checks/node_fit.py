"""What a job needs of its partition's nodes beyond counts and limits (fit.fit_partition calls
`problems` after site/cluster.validate_job, so `render`, `check`, `submit` and campaigns refuse
alike, each problem one sentence at its line):

- node-wide collectors (node_wide.py): the local rank that runs them exists on every node and
  is profiled there, and the node is the job's alone (another job on it would run its own
  sampler: two per node);
- the container runtime: the one the partition declares (`container.runtime`), none where it
  declares none;
- the image's architecture, from the SIF file's own header where the image is a SIF file on
  this machine (sif_arch.py), against the partition's nodes and the job's own `container.arch`;
- the partition's GPU binding against the workload: `binding.gpu: single` shows each task one
  GPU, and NeMo's PyTorch Lightning refuses trainer.devices=N where it sees fewer
  (Lightning-AI/pytorch-lightning#16828: "You requested gpu: [0, 1, 2, 3] But your machine
  only has: [0]").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.checks.sif_arch import sif_arch
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.nsys import node_wide
from orchestrator.render import binding
from orchestrator.site.cluster import located

if TYPE_CHECKING:
    from orchestrator.site.cluster import Partition
    from orchestrator.spec import yamlio
    from orchestrator.spec.job import JobSpec


def problems(
    spec: JobSpec, name: str, part: Partition, src: str | yamlio.Located
) -> list[GhRunError]:
    """Each problem as one sentence (fit.fit_partition reports them with the partition's
    limits)."""
    found: list[GhRunError] = []
    for problem in (_collectors, _runtime, _image_arch, _gpu_binding):
        why = problem(spec, name, part, src)
        if why:
            found.append(UserError(why))
    return found


def _where(src: str | yamlio.Located, *path: str) -> str:
    return located(src, *path)


def _collectors(spec: JobSpec, name: str, part: Partition, src: str | yamlio.Located) -> str | None:
    prof, res = spec.profile, spec.resources
    found = node_wide.collectors(prof)
    if not found:
        return None
    what = ", ".join(found)
    local = node_wide.sampler_local_rank(prof)
    if local >= res.tasks_per_node:
        return (
            f"{_where(src, 'profile', 'gpu_metrics')}: profile.gpu_metrics.sampler_local_rank: "
            f"local rank {local} runs the node-wide collectors ({what}) but a node runs only "
            f"{res.tasks_per_node} task(s); set it below {res.tasks_per_node}"
        )
    if prof.ranks is not None and res.tasks_per_node > 1:
        nodes = {r // res.tasks_per_node for r in prof.ranks}
        sampled = {r // res.tasks_per_node for r in prof.ranks if r % res.tasks_per_node == local}
        missing = sorted(nodes - sampled)
        if missing:
            n = missing[0]
            return (
                f"{_where(src, 'profile', 'ranks')}: profile.ranks: node {n} has profiled ranks "
                f"but not rank {n * res.tasks_per_node + local} (its local rank {local}), which "
                f"runs the node's node-wide collectors ({what}); add it, or drop them"
            )
    exclusive = res.exclusive or "--exclusive" in part.sbatch_options
    all_gpus = bool(part.gpus_per_node) and res.gpus_per_node >= part.gpus_per_node
    all_cores = res.tasks_per_node * res.cpus_per_task >= part.cpus_per_node
    # GPU counters belong to whoever holds the GPUs; CPU sampling sees every process of the node
    cpu_side = [c for c in found if not c.startswith("gpu_metrics")]
    needs, held = (
        ("every GPU and core", exclusive or (all_gpus and all_cores))
        if cpu_side
        else ("every GPU", exclusive or all_gpus)
    )
    if not held:
        return (
            f"{_where(src, 'resources')}: resources.exclusive: the node-wide collectors ({what}) "
            f"record the whole node, and another job on a node of partition {name!r} would run "
            f"its own (two samplers per node); set resources.exclusive: true, or ask for "
            f"{needs} of the node"
        )
    return None


def _runtime(spec: JobSpec, name: str, part: Partition, src: str | yamlio.Located) -> str | None:
    offered, asked = part.container.runtime, spec.container.runtime
    if offered is None or asked == "none" or asked == offered:
        return None
    if offered == "none":
        return (
            f"{_where(src, 'container', 'runtime')}: container.runtime: partition {name!r} "
            f"runs no container runtime, so {asked} cannot start the image; set container."
            "runtime: none (and the workload on the node's own software), or pick another "
            "partition"
        )
    return (
        f"{_where(src, 'container', 'runtime')}: container.runtime: partition {name!r} runs "
        f"containers with {offered}, not {asked}; set container.runtime: {offered}"
    )


def _image_arch(spec: JobSpec, name: str, part: Partition, src: str | yamlio.Located) -> str | None:
    image = spec.container.image
    if spec.container.runtime == "none" or not image or not image.startswith("/"):
        return None
    built = sif_arch(Path(image))
    if built is None:
        return None
    where = _where(src, "container", "image")
    if built != part.arch:
        return (
            f"{where}: container.image: {image} was built for {built} (its SIF header says so), "
            f"but partition {name!r} runs {part.arch} nodes; use an {part.arch} build of the "
            "image"
        )
    declared = spec.container.arch
    if declared is not None and declared != built:
        return (
            f"{_where(src, 'container', 'arch')}: container.arch: {declared}, but {image} was "
            f"built for {built} (its SIF header says so); set container.arch: {built}"
        )
    return None


def _gpu_binding(
    spec: JobSpec, name: str, part: Partition, src: str | yamlio.Located
) -> str | None:
    res = spec.resources
    if (
        part.binding is None
        or part.binding.gpu != "single"
        or not binding.applies(spec, part)
        or res.tasks_per_node < 2
        or spec.workload.kind != "nemo"
    ):
        return None
    return (
        f"{_where(src, 'workload', 'kind')}: workload.kind: partition {name!r} shows each task "
        f"only its own GPU (binding.gpu: single), and NeMo's PyTorch Lightning refuses "
        f"trainer.devices={res.tasks_per_node} on a task that sees one; run it on a partition "
        "whose binding.gpu is local_rank (ask the admins, whose cluster file sets it)"
    )
