"""Held-out workload (recorded under torch.profiler): torchvision's ResNet-50, trained in bf16
autocast with SGD on float32 image batches that live in pageable host memory, as a dataset
that hands the loop ready float32 tensors without `pin_memory=True` leaves them: each step copies
its batch with `.to(device, non_blocking=True)` (from pageable memory the call still stages it
through the driver's bounce buffer and returns when it is done). The cause planted is pageable
host-device copies on a GPU-bound step; written after gh-run's pinned-copy projection
(`families/links.py`, `critical_path`'s copies lever) and not fitted to it: its first recording
is the check.

Phases outside the profiler (`--outside` steps each), the truth (P is profiled too, into its
own folder):
  A  as captured: the batches in pageable memory
  P  the same batches in pinned memory (the knob: `pin_memory=True` / `.pin_memory()`)

    python3 resnet_pinned.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import torch
import torchvision
from kineto_phases import parser, run
from torch import nn


def main() -> int:
    p = parser(__doc__, outside=20)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--pool", type=int, default=3, help="distinct host batches, used in turn")
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(num_classes=a.classes).to(dev)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    shape = (a.batch, 3, a.image, a.image)
    pageable = [torch.randn(shape) for _ in range(a.pool)]
    pinned = [x.pin_memory() for x in pageable] if cuda else pageable
    ys = [torch.randint(0, a.classes, (a.batch,), device=dev) for _ in range(a.pool)]
    at = [0]

    def step(pool: list[torch.Tensor]) -> None:
        i = at[0] % a.pool
        at[0] += 1
        x = pool[i].to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            loss = nn.functional.cross_entropy(model(x).float(), ys[i])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loss logged each step

    def with_pinned() -> None:
        step(pinned)

    run(
        "resnet_pinned",
        lambda: step(pageable),
        {"A_pageable": (lambda: step(pageable), 2), "P_pinned": (with_pinned, 2)},
        args=a,
        cuda=cuda,
        config={"batch_bytes": 4 * a.batch * 3 * a.image * a.image, "pin_memory": False},
        also={"P_pinned": with_pinned},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
