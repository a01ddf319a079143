"""LoRA adapters on the attention projections; everything else frozen."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


class LoRALinear(nn.Module):
    """`base(x) + (alpha / rank) * B(A(x))` with `base` frozen; B starts at zero."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        self.base = base
        self.base.weight.requires_grad_(False)
        w = base.weight
        self.lora_a = nn.Parameter(
            torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype)
        )
        self.lora_b = nn.Parameter(
            torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype)
        )
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.scaling = alpha / rank

    def forward(self, x: Tensor) -> Tensor:
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scaling  # type: ignore[no-any-return]


def apply_lora(
    model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] = DEFAULT_TARGETS
) -> int:
    """Wrap every `nn.Linear` named in `targets` in a LoRALinear, then freeze all but adapters.

    Returns the number of adapters added.
    """
    wrapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(parent, name, LoRALinear(child, rank, alpha))
                wrapped += 1
    if wrapped == 0:
        raise ValueError(f"no nn.Linear named {targets} found; nothing to adapt")
    for pname, param in model.named_parameters():
        param.requires_grad_(is_adapter_param(pname))
    return wrapped


def is_adapter_param(name: str) -> bool:
    """Whether a parameter name belongs to a LoRA adapter."""
    leaf = name.rsplit(".", 1)[-1]
    return leaf in ("lora_a", "lora_b")
