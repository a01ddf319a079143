"""Held-out workload (recorded under torch.profiler): a ResNet-18-shaped network (torch.nn's
conv, batch norm and ReLU, basic residual blocks) trained in fp32 with SGD on synthetic images
made on the GPU. PyTorch's defaults apply: cuDNN may run fp32 convolutions as TF32 on tensor
cores (`torch.backends.cudnn.allow_tf32`, on by default), matrix multiplies stay full fp32. The
cause planted is fp32 training; written after gh-run's fp32 rule and projection and not fitted
to them: it checks what the projection assumes of convolutions that already use tensor cores.

Phases outside the profiler (`--outside` steps each), the truth (P is profiled too, into its
own folder):
  A  as captured: fp32, PyTorch's defaults
  P  bf16 autocast (the knob), channels-last as in A
  T  fp32 with TF32 off for cuDNN too (what the defaults already bought)

    python3 convnet_precision.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import torch
from kineto_phases import parser, run, trained
from torch import nn


def block(cin: int, cout: int, stride: int) -> nn.Module:
    class Basic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                nn.BatchNorm2d(cout),
            )
            self.skip: nn.Module = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.a(x) + self.skip(x))

    return Basic()


def resnet18(classes: int) -> nn.Module:
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [block(cin, cout, stride), block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def main() -> int:
    p = parser(__doc__, outside=30)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = resnet18(a.classes).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.image, a.image, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    step = trained(lambda: nn.functional.cross_entropy(model(x).float(), y), opt, dev)

    def no_tf32() -> None:
        torch.backends.cudnn.allow_tf32 = False
        try:
            step(False)
        finally:
            torch.backends.cudnn.allow_tf32 = True

    def bf16() -> None:
        step(True)

    run(
        "convnet_precision",
        lambda: step(False),
        {
            "A_fp32": (lambda: step(False), 2),
            # new shapes of kernel for cuDNN's benchmark to pick: settle longer
            "P_bf16": (bf16, 5),
            "T_fp32_no_tf32": (no_tf32, 5),
        },
        args=a,
        cuda=cuda,
        config={
            "precision": "fp32",
            "cudnn_allow_tf32": True,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        },
        also={"P_bf16": bf16},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
