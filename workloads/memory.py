"""Where the forward pass keeps its saved activations: on the device (default) or on the CPU."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor


class OffloadActivations(torch.autograd.graph.save_on_cpu):
    """`torch.autograd.graph.save_on_cpu` that also counts what it moved.

    Every tensor autograd saves inside the context goes through save_on_cpu's pack hook (a copy
    to host memory, pinned and asynchronous when `pin_memory`); `packed_tensors`/`packed_bytes`
    count them since the last `reset()`, and `packed_devices` names where they came from.
    """

    def __init__(self, pin_memory: bool) -> None:
        super().__init__(pin_memory=pin_memory)
        self.pin_memory = pin_memory
        self.packed_tensors = 0
        self.packed_bytes = 0
        self.packed_devices: set[str] = set()
        inner_pack = self.pack_hook

        def counting_pack(tensor: Tensor) -> Any:
            self.packed_tensors += 1
            self.packed_bytes += tensor.numel() * tensor.element_size()
            self.packed_devices.add(tensor.device.type)
            return inner_pack(tensor)

        self.pack_hook = counting_pack

    def reset(self) -> None:
        self.packed_tensors = 0
        self.packed_bytes = 0
        self.packed_devices = set()


def activation_context(
    offload: bool, device: torch.device
) -> OffloadActivations | contextlib.nullcontext[None]:
    """The context the forward pass runs in: offloading (pinned when on CUDA) or nothing."""
    if not offload:
        return contextlib.nullcontext()
    return OffloadActivations(pin_memory=device.type == "cuda")
