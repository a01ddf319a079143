"""Which process this is: rank, local rank and world size from the launcher's variables.

Torch-free on purpose: the Unified-Memory bootstrap needs the local rank (the GPU) before torch
is imported.
"""

from __future__ import annotations

import os


def rank_from_env() -> tuple[int, int, int]:
    """(rank, local rank, world size) from torchrun's or SLURM's variables; (0, 0, 1) alone."""

    def first(*names: str, default: int) -> int:
        for name in names:
            value = os.environ.get(name)
            if value is not None and value.strip().isdigit():
                return int(value)
        return default

    rank = first("RANK", "SLURM_PROCID", default=0)
    local = first("LOCAL_RANK", "SLURM_LOCALID", default=0)
    world = first("WORLD_SIZE", "SLURM_NTASKS", default=1)
    return rank, local, world
