"""The workload's configuration: one frozen dataclass, filled from the command line by `sft.py`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

Precision = Literal["bf16", "fp16", "fp32"]
Peft = Literal["lora", "none"]
DeviceKind = Literal["cpu", "cuda"]


@dataclass(frozen=True)
class Config:
    """Everything one run of the reference fine-tuning workload depends on."""

    # model (a Llama-style decoder; tiny by default so a CPU smoke run takes seconds)
    layers: int = 2
    hidden: int = 128
    heads: int = 4
    vocab: int = 4096
    # data
    seq_len: int = 128
    batch_size: int = 4
    num_workers: int = 0
    item_cost: int = 0
    # a planted data-loading cost: each sample takes at least this many ms of CPU work in all
    item_ms: float = 0.0
    # time a fixed CPU work beside each step (workloads/cpu_reference.py)
    cpu_reference: bool = False
    # the seed experiments' knobs
    offload_activations: bool = False
    activation_checkpointing: bool = False
    peft: Peft = "none"
    lora_rank: int = 8
    lora_alpha: float = 16.0
    precision: Precision = "bf16"
    fused_adam: bool = False
    lr: float = 1e-4
    # Unified Memory: RMM's managed-memory pool as torch's CUDA allocator (CUDA only)
    unified_memory: bool = False
    um_max_pool_fraction: float | None = None
    um_host_touch_mb: int = 0
    # data parallel: DDP over torch.distributed (NCCL on CUDA, gloo on CPU), one process a device
    ddp: bool = False
    straggle_rank: int | None = None
    straggle_ms: float = 0.0
    # run
    steps: int = 10
    device: DeviceKind = "cpu"
    seed: int = 0
    output: str = "."
    # profiling
    # the workload's own ranges (NVTX and record_function); False: a script nobody annotated
    annotate: bool = True
    torch_profile: str | None = None
    profile_steps: tuple[int, int] = (1, 3)
    profile_memory: bool = False
    cuda_profiler_window: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The config as plain JSON values (tuples become lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out
