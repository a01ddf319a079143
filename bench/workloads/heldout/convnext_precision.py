"""Held-out workload (recorded under torch.profiler): a ConvNeXt-shaped image network built from
torch.nn (a 4x4 patchify convolution, blocks of a 7x7 depthwise convolution, LayerNorm over
channels, a Linear-GELU-Linear MLP and a residual, downsampling between stages), trained in fp32
with AdamW on synthetic images made on the GPU. PyTorch's defaults apply: cuDNN may run the
convolutions as TF32 on tensor cores, the Linear layers' matrix multiplies stay fp32 on CUDA
cores. The cause planted is fp32 training in a network that mixes both; written after gh-run's
per-class bf16 projection and not fitted to it.

Phases outside the profiler (`--outside` steps each), the truth (P is profiled too, into its
own folder):
  A  as captured: fp32, PyTorch's defaults
  P  bf16 autocast (the knob)

    python3 convnext_precision.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import torch
from kineto_phases import parser, run, trained
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)  # N H W C for the norm and the MLP
        y = self.down(nn.functional.gelu(self.up(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


def convnext(dims: tuple[int, ...], depths: tuple[int, ...], classes: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, 4)]
    for i, (d, n) in enumerate(zip(dims, depths, strict=True)):
        if i:
            layers.append(nn.Conv2d(dims[i - 1], d, 2, 2))
        layers += [Block(d) for _ in range(n)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]),
               nn.Linear(dims[-1], classes)]  # fmt: skip
    return nn.Sequential(*layers)


def main() -> int:
    p = parser(__doc__, outside=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = convnext((96, 192, 384, 768), (3, 3, 9, 3), a.classes).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=cuda)
    x = torch.randn(a.batch, 3, a.image, a.image, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    step = trained(lambda: nn.functional.cross_entropy(model(x).float(), y), opt, dev)

    def bf16() -> None:
        step(True)

    run(
        "convnext_precision",
        lambda: step(False),
        # new shapes of kernel for cuDNN's benchmark to pick: settle longer
        {"A_fp32": (lambda: step(False), 2), "P_bf16": (bf16, 5)},
        args=a,
        cuda=cuda,
        config={
            "precision": "fp32",
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        },
        also={"P_bf16": bf16},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
