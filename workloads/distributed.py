"""Data parallelism: one process per device, DDP over torch.distributed, and a straggler on purpose.

`--ddp` joins the process group (NCCL on CUDA, gloo on CPU) with the rank and world size the
launcher exported (torchrun's RANK/WORLD_SIZE/LOCAL_RANK, or SLURM_PROCID/SLURM_NTASKS/
SLURM_LOCALID under srun; MASTER_ADDR/MASTER_PORT from the launcher or gh-run's job script),
wraps the model in DistributedDataParallel (gradients averaged across ranks in backward) and
gives each rank its own shard of the data. Without `--ddp` each rank trains alone, as before.

`--straggle-rank R --straggle-ms MS` makes rank R do MS ms of extra host work in every step's
`data` phase (a slow input pipeline on one node): the other ranks then wait for it inside the
gradient all-reduce, which is what a straggler looks like in their traces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset, DistributedSampler


@dataclass
class DataParallel:
    """This process's place in the job: rank, world size, and the process group when DDP."""

    rank: int
    world_size: int
    device: torch.device
    enabled: bool = False

    @property
    def backend(self) -> str | None:
        return dist.get_backend() if self.enabled else None

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module to run forward/backward through: DDP over `model`, or `model` itself."""
        if not self.enabled:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def sampler(self, dataset: Dataset[Any]) -> DistributedSampler[Any] | None:
        """This rank's shard (in order, equal sizes), or None to read everything."""
        if not self.enabled:
            return None
        return DistributedSampler(
            dataset, num_replicas=self.world_size, rank=self.rank, shuffle=False, drop_last=True
        )

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()
            self.enabled = False


def setup(enabled: bool, rank: int, world_size: int, device: torch.device) -> DataParallel:
    """Join the default process group when `enabled` (env:// rendezvous through MASTER_ADDR and
    MASTER_PORT); NCCL on CUDA devices, gloo on CPU."""
    if not enabled:
        return DataParallel(rank=rank, world_size=world_size, device=device)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    cuda = device.type == "cuda"
    dist.init_process_group(
        backend="nccl" if cuda else "gloo",
        init_method="env://",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(minutes=5),
        device_id=device if cuda else None,
    )
    return DataParallel(rank=rank, world_size=world_size, device=device, enabled=True)


def host_work(ms: float) -> None:
    """Keep this thread busy on the CPU for `ms` milliseconds (not asleep: a busy host)."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass
