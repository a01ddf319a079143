"""Peak GPU memory of a run, read where it can be read: torch's allocator counters, or RMM's
statistics when RMM's managed pool is torch's allocator (torch refuses its counters then)."""

from __future__ import annotations

from typing import Protocol

import torch

from workloads.config import Config


class PeakMemory(Protocol):
    """`reset()` before the steps; `allocated()`/`reserved()` after them (bytes; None: unknown)."""

    source: str | None

    def reset(self) -> None: ...

    def allocated(self) -> int | None: ...

    def reserved(self) -> int | None: ...


class NoPeakMemory:
    """On the CPU there is no GPU memory to report."""

    source: str | None = None

    def reset(self) -> None:
        pass

    def allocated(self) -> int | None:
        return None

    def reserved(self) -> int | None:
        return None


class TorchPeakMemory:
    """torch's caching allocator: the most bytes held by tensors / reserved from CUDA."""

    source: str | None = "torch.cuda.max_memory_allocated"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def reset(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self.device))

    def reserved(self) -> int | None:
        return int(torch.cuda.max_memory_reserved(self.device))


def peak_memory(cfg: Config, device: torch.device) -> PeakMemory:
    """The reader for this run: RMM's statistics under Unified Memory, torch's on CUDA."""
    if cfg.unified_memory:
        from workloads.um import RmmPeakMemory

        return RmmPeakMemory()
    if device.type == "cuda":
        return TorchPeakMemory(device)
    return NoPeakMemory()
