"""An image classifier fed by a custom Dataset, with two causes planted on switches (issue 35
item 7): a slow `__getitem__` (input wait) and pageable host-to-device copies.

A small convolutional network (four strided conv/BN/ReLU stages, global pooling, a linear head),
bf16 autocast, SGD with momentum (PyTorch's `foreach` multi-tensor kernels), `loss.item()` at the
end of every step, as a plain loop logs its loss. The batches come from a `Dataset` of synthetic
pictures through a `DataLoader`.

Planted:
- `--item-sleep-ms X`: each item sleeps X ms in `__getitem__` (a storage or decode latency): at
  `--num-workers 0` the loop, and the GPU, wait `batch x X` ms a step for the batch; with workers
  the wait hides behind the GPU's work. Measured: the time the loop waits in `next()` (`data`).
- `--host-float32`: items are float32 (4 bytes a pixel, normalised in the Dataset) instead of
  uint8, and `--pin-memory` on or off: the batch's copy to the GPU is pageable (staged through a
  driver buffer, host-synchronous) or pinned. Measured: the copy's GPU time (`copy`, CUDA events
  around it).

    python bench/workloads/causes/images.py --help
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


class Pictures(Dataset[tuple[Tensor, Tensor]]):
    """Synthetic pictures from a pool made once (so an item costs a copy, not a generation),
    each after `sleep_ms` of sleep."""

    def __init__(self, n: int, size: int, classes: int, sleep_ms: float, f32: bool, seed: int):
        rng = np.random.default_rng(seed)
        self.pool = rng.integers(0, 256, (16, 3, size, size), dtype=np.uint8)
        self.labels = rng.integers(0, classes, n)
        self.n, self.sleep_ms, self.f32 = n, sleep_ms, f32

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if self.sleep_ms > 0:
            time.sleep(self.sleep_ms / 1e3)
        img = self.pool[i % len(self.pool)]
        x = torch.from_numpy(img.astype(np.float32) / 255.0) if self.f32 else torch.from_numpy(img)
        return x, torch.tensor(int(self.labels[i]))


def convnet(classes: int, width: int) -> nn.Module:
    layers: list[nn.Module] = []
    cin = 3
    for cout in (width, 2 * width, 4 * width, 4 * width):
        layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
                   nn.ReLU(inplace=True)]  # fmt: skip
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    harness.common_args(p, steps=14, win="6:12")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--item-sleep-ms", type=float, default=0.0)
    p.add_argument("--host-float32", action="store_true")
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    data = Pictures(a.batch_size * (a.steps + 4), a.image_size, a.classes, a.item_sleep_ms,
                    a.host_float32, a.seed)  # fmt: skip
    loader = DataLoader(
        data,
        batch_size=a.batch_size,
        shuffle=False,
        num_workers=a.num_workers,
        pin_memory=a.pin_memory and cuda,
        persistent_workers=a.num_workers > 0,
        prefetch_factor=2 if a.num_workers > 0 else None,
        drop_last=True,
    )
    model = convnet(a.classes, a.width).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=True)
    loss_fn = nn.CrossEntropyLoss()
    clock = harness.Clock(dev, a.cuda_profiler_window)
    it = iter(loader)
    for step in range(a.steps):
        clock.begin(step)
        with clock.host("data", step):
            x, y = next(it)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if cuda else []
        if ev:
            ev[0].record()
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        if ev:
            ev[1].record()
        if x.dtype == torch.uint8:
            x = x.float().div_(255.0)
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # the loop logs its loss: the step ends here
        if ev:
            clock.add("copy", step, ev[0].elapsed_time(ev[1]))
        clock.end(step)
    cfg = {k: v for k, v in vars(a).items() if k not in ("output", "device")}
    cfg["precision"] = "bf16"
    planted = {}
    if a.item_sleep_ms > 0:
        planted["input"] = "data"
    if a.host_float32:
        planted["host-device-copies"] = "copy"
    harness.write(clock, a.output, "images", cfg, planted)
    print(f"median step {1e3 * sorted(clock.walls)[len(clock.walls) // 2]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
