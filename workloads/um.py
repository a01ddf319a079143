"""Unified Memory: RMM's managed-memory pool as PyTorch's CUDA allocator, the peak-memory reading
that works under it, and the host snapshot that makes pages move.

The seed (NeMo on a GH200) runs, before any other import:

    rmm.reinitialize(pool_allocator=True, managed_memory=True)
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)

`enable_unified_memory` does the same, before torch is imported (`sft.main` calls it first), on
the process's own GPU (LOCAL_RANK), with one addition: an RMM statistics adaptor over the pool.
Under RMM's allocator (a `CUDAPluggableAllocator`) torch refuses its memory statistics
(`max_memory_allocated`, `reset_peak_memory_stats`, `memory_stats` raise), so `RmmPeakMemory`
reads the adaptor's counters instead. `max_pool_fraction` caps the pool at that fraction of the
GPU's free memory; without it the pool grows as RMM's default does (on a GH200 past the GPU's
memory, which is the point of the seed's experiment; on a lent PCIe GPU, where asking for more
managed memory than is free can hang the card, pass a cap).

Pages of managed memory move (and nsys records page faults and UM copies) only when touched
where they do not live: first touch, oversubscription, CPU access. On a GPU where the model fits,
a steady-state step moves nothing. `host_snapshot` copies the first N bytes of the trainable
parameters (all weights for full SFT, the adapters for LoRA) to host memory by reading their
managed addresses from the CPU, as a host-side checkpointer on a GH200 would: the pages migrate
to the host (CPU page faults), and the next optimizer step faults them back to the GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Any

POOL_ALIGNMENT = 256  # RMM pool sizes are multiples of 256 bytes
PEAK_SOURCE = "rmm.statistics (StatisticsResourceAdaptor over the managed pool)"


def pool_sizes(free_bytes: int, max_fraction: float) -> dict[str, int]:
    """RMM pool sizes for a cap of `max_fraction` of free GPU memory: the initial pool is RMM's
    default (half of free memory) or the cap when that is smaller; both 256-byte aligned."""
    if not 0 < max_fraction <= 1:
        raise ValueError(f"max_fraction must be in (0, 1], got {max_fraction}")
    cap = int(free_bytes * max_fraction) // POOL_ALIGNMENT * POOL_ALIGNMENT
    initial = min(free_bytes // 2, cap) // POOL_ALIGNMENT * POOL_ALIGNMENT
    return {"initial_pool_size": initial, "maximum_pool_size": cap}


def _cuda_check(result: tuple[Any, ...]) -> tuple[Any, ...]:
    err = result[0]
    if int(err) != 0:
        raise RuntimeError(f"CUDA runtime error {err}")
    return result[1:]


def enable_unified_memory(device_index: int, max_pool_fraction: float | None = None) -> None:
    """Make RMM's managed-memory pool (with statistics) torch's CUDA allocator on one GPU.

    Call before torch allocates anything on the GPU (best: before torch is imported)."""
    import rmm  # first: RMM must own CUDA memory before anything allocates
    import rmm.mr
    import rmm.statistics
    from cuda.bindings import runtime as cudart
    from rmm.allocators.torch import rmm_torch_allocator

    # the pool, its statistics adaptor and torch's allocations all live on this device
    _cuda_check(cudart.cudaSetDevice(device_index))
    sizes: dict[str, int] = {}
    if max_pool_fraction is not None:
        free, _total = rmm.mr.available_device_memory()
        sizes = pool_sizes(int(free), max_pool_fraction)
    rmm.reinitialize(pool_allocator=True, managed_memory=True, devices=device_index, **sizes)
    rmm.statistics.enable_statistics()

    import torch

    if rmm_torch_allocator is None:
        raise RuntimeError(
            "rmm.allocators.torch has no allocator (torch sees no CUDA device); "
            "--unified-memory needs a GPU"
        )
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)


class RmmPeakMemory:
    """Peak GPU memory from RMM's statistics adaptor (torch's own counters refuse to work under
    RMM's allocator). `allocated()` is the most bytes torch held at once since `reset()`, like
    `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`; `reserved()` is the size of
    RMM's pool (managed memory RMM took, touched or not)."""

    source: str | None = PEAK_SOURCE

    def __init__(self) -> None:
        import rmm.statistics

        if rmm.statistics.get_statistics() is None:
            raise RuntimeError("RMM statistics are off; call enable_unified_memory() first")
        self._base = 0

    def reset(self) -> None:
        import rmm.statistics

        # counters restart at zero on a new frame; what is held now is the base of the peak
        before = rmm.statistics.push_statistics()
        self._base = int(before.current_bytes) if before is not None else 0

    def allocated(self) -> int | None:
        import rmm.statistics

        stats = rmm.statistics.get_statistics()
        return None if stats is None else self._base + int(stats.peak_bytes)

    def reserved(self) -> int | None:
        import rmm.mr

        mr: Any = rmm.mr.get_current_device_resource()
        while mr is not None:
            if hasattr(mr, "pool_size"):
                return int(mr.pool_size())
            mr = mr.get_upstream() if hasattr(mr, "get_upstream") else None
        return None


def host_snapshot(tensors: Iterable[Any], limit_bytes: int, managed: bool) -> bytearray:
    """Copy the first `limit_bytes` of `tensors` (in order) into host memory by reading their
    addresses from the CPU; returns the copy. CUDA tensors must be in managed memory
    (`managed=True`): the CPU cannot read a plain device address."""
    import torch

    items = list(tensors)
    if any(t.is_cuda for t in items):
        if not managed:
            raise ValueError("a host snapshot of CUDA tensors needs Unified (managed) memory")
        torch.cuda.synchronize()  # the CPU reads what the GPU last wrote
    total = sum(t.numel() * t.element_size() for t in items)
    snapshot = bytearray(min(limit_bytes, total))
    taken = 0
    for t in items:
        n = min(t.numel() * t.element_size(), len(snapshot) - taken)
        if n <= 0:
            continue
        ctypes.memmove((ctypes.c_char * n).from_buffer(snapshot, taken), t.data_ptr(), n)
        taken += n
    return snapshot
