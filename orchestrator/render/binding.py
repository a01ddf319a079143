"""A partition's task binding (site/binding.py) as one job's sbatch directives and srun flags.

Each part is rendered only where it fits the job: one task per GPU (`resources.ntasks_per_node`
equal to `resources.gpus_per_node`). A job whose one task drives several GPUs would be cut down
to one GPU and one socket by it, so it is rendered without, and its script says so. The lines
and why each is there: docs/templates.md, "GH200 binding".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.site.cluster import Partition
    from orchestrator.spec.job import JobSpec


@dataclass(frozen=True)
class Binding:
    """What a job's script gets of its partition's binding."""

    gpu_request: str | None = None  # the GPU directive in place of --gpus-per-node / --gres
    directives: list[str] = field(default_factory=list)  # further #SBATCH lines
    srun: list[str] = field(default_factory=list)  # flags of the tasks' srun
    why: list[str] = field(default_factory=list)  # the script's comment, one line each


def applies(spec: JobSpec, part: Partition) -> bool:
    """Whether the partition's binding is rendered for this job: one task per GPU."""
    res = spec.resources
    return (
        part.binding is not None
        and res.gpus_per_node > 0
        and (res.tasks_per_node == res.gpus_per_node)
    )


def bind(spec: JobSpec, part: Partition) -> Binding:
    b, res = part.binding, spec.resources
    if b is None:
        return Binding()
    if not applies(spec, part):
        return Binding(
            why=[
                "Not bound: the partition binds one task per GPU, and this job runs "
                f"{res.tasks_per_node} task(s) for {res.gpus_per_node} GPU(s) per node."
            ]
        )
    gpu_request, directives, srun, why = None, [], [], []
    if b.gpu == "single":
        typed = f"{part.gpu_type}:" if part.gpu_directive == "gres" and part.gpu_type else ""
        gpu_request = f"--gpus-per-task={typed}1"
        srun.append("--gpu-bind=single:1")
        why.append(
            "GPU: each task sees one, the one attached to its socket (--gpus-per-task=1, "
            "--gpu-bind=single:1)."
        )
    elif b.gpu == "local_rank":
        why.append(
            "GPU: each task sees the node's GPUs and uses GPU LOCAL_RANK, its socket's (no "
            "--gpus-per-task: hiding the others breaks frameworks that count them and NCCL's "
            "CUDA IPC)."
        )
    if b.cpu == "socket":
        directives.append("--ntasks-per-socket=1")
        srun += ["--distribution=block:cyclic", "--cpu-bind=cores"]
        why.append(
            "CPU: task i of a node on cores of socket i (--ntasks-per-socket=1, "
            "--distribution=block:cyclic: ranks in blocks per node, cores cyclic over "
            "sockets), bound to them (--cpu-bind=cores)."
        )
    if b.memory == "local":
        srun.append("--mem-bind=local")
        why.append(
            "Memory: on the NUMA node of the task's cores, its socket's LPDDR5X (--mem-bind=local)."
        )
    return Binding(gpu_request, directives, srun, why)
