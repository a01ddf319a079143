"""How a partition binds each task to its node's parts (cluster file:
`partitions.<name>.binding`): the admin's word on the node's shape, for jobs that run one task
per GPU.

A GH200 node is one or more superchips, each a Grace CPU socket with its own LPDDR5X (a NUMA
node) and its H100 (whose HBM is a further, CPU-less NUMA node). A task that runs on one GPU
belongs on the cores of that GPU's socket, with its host memory on that socket's NUMA node:
elsewhere every host-device copy and every CPU-side allocation crosses the socket link
(NVLink-C2C between superchips) instead of staying on the superchip. SLURM can do all three;
which of them a partition's nodes support (gres.conf's `Cores=` affinity of each GPU, the
task/affinity plugin) only the admin knows, so each is a key here, and render/binding.py turns
them into srun's and sbatch's flags for the jobs they fit.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.core.base import Strict

# Flags of the launcher that binding decides; a partition's launcher.options may not set them too
BINDING_FLAGS = ("--cpu-bind", "--mem-bind", "--gpu-bind", "--distribution", "-m")


class TaskBinding(Strict):
    """One task per GPU, each on its GPU's socket and memory (docs/templates.md, "GH200
    binding"). Applied to jobs with as many tasks per node as GPUs per node; other jobs (one
    task driving several GPUs) are rendered without it and the script says why. Task i of a
    node goes with GPU i and socket i: on GH200 nodes the GPUs' order (PCI bus) is their
    sockets' (the gh200 template logs `nvidia-smi topo -m` to show it)."""

    gpu: Literal["local_rank", "single", "none"] = Field(
        "local_rank",
        description="local_rank: every task sees the node's GPUs and uses GPU LOCAL_RANK, the "
        "one of its socket (as PyTorch, torchrun and Lightning do; NCCL keeps CUDA IPC between "
        "the GPUs); single: each task sees only the GPU attached to its socket "
        "(--gpus-per-task=1, --gpu-bind=single:1; needs gres.conf's Cores= of each GPU, which "
        "AutoDetect=nvml fills in; for programs that take the first GPU they see); none: "
        "nothing said about GPUs.",
    )
    cpu: Literal["socket", "none"] = Field(
        "socket",
        description="socket: each task on cores of one socket, task i of a node on socket i "
        "(--ntasks-per-socket=1, --distribution=block:cyclic, --cpu-bind=cores; the nodes have "
        "one socket per GPU, as GH200 nodes do); none: the site's own default.",
    )
    memory: Literal["local", "none"] = Field(
        "local",
        description="local: each task's memory on the NUMA node of its cores, its socket's "
        "LPDDR5X (--mem-bind=local; needs TaskPlugin task/affinity); none: no memory binding.",
    )
