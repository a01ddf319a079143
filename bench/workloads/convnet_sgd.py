"""A plain PyTorch training script, written the way most are: an image classifier (a ResNet-style
network of bottleneck blocks), SGD with Nesterov momentum, a `DataLoader`, a loop that logs the
loss of every step. No NVTX ranges, no `record_function`, nothing of gh-run's: it is profiled as
a stranger's script would be (issue 28), so a trace of it holds only what torch, cuDNN, cuBLAS
and the DataLoader mark on their own. It is deliberately unlike `workloads.sft` (a decoder,
fused AdamW, bf16 autocast): convolutions through cuDNN, fp32 (cuDNN's TF32), batch norm,
`foreach` SGD (multi-tensor kernels), `cudnn.benchmark` autotuning in the first step.

    python bench/workloads/convnet_sgd.py --help

For the tests' truth it also:
- plants a data-loading cost known in advance: each image takes at least `--item-ms` ms of CPU
  work in `__getitem__` (synthesising the picture, then crop/flip/normalise passes in numpy
  until that deadline), so at `--num-workers 0` the loop (and the GPU) waits
  `--batch-size x --item-ms` ms per step, and at 4 the workers prepare batches while the GPU
  computes;
- writes its own timings to `--output`/metrics.json: per step the wall time, the wait for the
  batch, the start (Unix ns), the loss; the profiled windows and the planted cost.

Profiling hooks, as a user adds them when asked to: `--cuda-profiler-window S:E`
(cudaProfilerStart/Stop around steps S..E-1, for `nsys --capture-range=cudaProfilerApi`) and
`--torch-profile DIR --profile-steps S:E` (torch.profiler with a schedule and `prof.step()` per
step: a gzipped Kineto trace `DIR/convnet_rank0.pt.trace.json.gz`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class SyntheticImages(Dataset[tuple[Tensor, Tensor]]):
    """`length` uint8 images (3 x size x size) with labels, generated from their index; each
    costs at least `item_ms` ms of wall time in CPU work."""

    def __init__(self, length: int, size: int, classes: int, item_ms: float, seed: int = 0):
        self.length, self.size, self.classes = length, size, classes
        self.item_ms, self.seed = item_ms, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        start = time.perf_counter()
        rng = np.random.default_rng(self.seed * 1_000_003 + index)
        label = int(rng.integers(self.classes))
        # a cheap picture (a per-class shade and a noisy square), so that nearly all of the
        # item's time is the planted work below, on any CPU
        image = np.full((3, self.size, self.size), label * 37 % 256, dtype=np.uint8)
        image[:, :16, :16] = rng.integers(0, 256, (3, 16, 16), dtype=np.uint8)
        deadline = start + self.item_ms / 1e3
        # the "decode and augment" pipeline: real work on patches of the picture until the
        # deadline, in steps of a few µs so that the cost lands close to it
        edge = max(1, self.size - 16)
        while time.perf_counter() < deadline:
            y, x = rng.integers(0, edge, 2)
            patch = image[:, y : y + 16, x : x + 16][:, :, ::-1].astype(np.float32)
            _ = (patch / 255.0 - 0.5).std()
        return torch.from_numpy(image), torch.tensor(label, dtype=torch.long)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ConvNet(nn.Module):
    """ResNet-50's layout by default (blocks 3,4,6,3, widths 64..512 x 4)."""

    def __init__(self, blocks: Sequence[int], width: int, classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        cin = width
        for stage, count in enumerate(blocks):
            w = width * 2**stage
            for i in range(count):
                layers.append(Bottleneck(cin, w, 2 if i == 0 and stage > 0 else 1))
                cin = w * 4
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x).mean((2, 3)))


def window(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    if not sep or not start.isdigit() or not end.isdigit() or int(start) >= int(end):
        raise argparse.ArgumentTypeError(f"expected START:END with START < END, got {text!r}")
    return int(start), int(end)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python bench/workloads/convnet_sgd.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--steps", type=int, default=12, help="training steps (%(default)s)")
    p.add_argument("--batch-size", type=int, default=96, help="images per step (%(default)s)")
    p.add_argument("--image-size", type=int, default=192, help="pixels a side (%(default)s)")
    p.add_argument("--classes", type=int, default=100, help="%(default)s")
    p.add_argument("--blocks", default="3,4,6,3", help="bottleneck blocks per stage")
    p.add_argument("--width", type=int, default=64, help="first stage's width (%(default)s)")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader workers (%(default)s)")
    p.add_argument(
        "--item-ms",
        type=float,
        default=0.4,
        help="planted CPU work per image, ms (%(default)s: 38.4 ms per batch of 96)",
    )
    p.add_argument("--lr", type=float, default=0.1, help="%(default)s")
    p.add_argument("--momentum", type=float, default=0.9, help="%(default)s")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    p.add_argument("--cuda-profiler-window", type=window, default=None, metavar="S:E")
    p.add_argument("--torch-profile", default=None, metavar="DIR")
    p.add_argument("--profile-steps", type=window, default=(1, 3), metavar="S:E")
    ns = p.parse_args(argv)
    for flag, w in (
        ("--cuda-profiler-window", ns.cuda_profiler_window),
        ("--profile-steps", ns.profile_steps if ns.torch_profile else None),
    ):
        if w is not None and w[1] > ns.steps:
            p.error(f"{flag} {w[0]}:{w[1]}: END must be <= --steps ({ns.steps})")
    if ns.item_ms < 0 or ns.batch_size < 1 or ns.steps < 1 or ns.num_workers < 0:
        p.error("--item-ms, --num-workers must be >= 0; --batch-size, --steps >= 1")
    return ns


def make_profiler(ns: argparse.Namespace, cuda: bool, path: Path) -> Any:
    from torch.profiler import ProfilerActivity, profile, schedule

    start, end = ns.profile_steps
    warmup = 1 if start >= 1 else 0
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    return profile(
        activities=activities,
        schedule=schedule(wait=start - warmup, warmup=warmup, active=end - start, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse(argv)
    device = torch.device(ns.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    torch.manual_seed(ns.seed)
    torch.backends.cudnn.benchmark = True
    blocks = [int(b) for b in ns.blocks.split(",")]
    model = ConvNet(blocks, ns.width, ns.classes).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=ns.lr, momentum=ns.momentum, nesterov=True, weight_decay=5e-5
    )
    criterion = nn.CrossEntropyLoss()
    data = SyntheticImages(ns.steps * ns.batch_size, ns.image_size, ns.classes, ns.item_ms)
    loader = DataLoader(
        data,
        batch_size=ns.batch_size,
        shuffle=False,
        num_workers=ns.num_workers,
        pin_memory=cuda,
        drop_last=True,
    )
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1) * 255
    out = Path(ns.output)
    out.mkdir(parents=True, exist_ok=True)
    trace_path = None
    prof = None
    if ns.torch_profile:
        Path(ns.torch_profile).mkdir(parents=True, exist_ok=True)
        trace_path = Path(ns.torch_profile) / "convnet_rank0.pt.trace.json.gz"
        prof = make_profiler(ns, cuda, trace_path)
        prof.__enter__()

    starts: list[int] = []
    step_times: list[float] = []
    data_times: list[float] = []
    losses: list[float] = []
    model.train()
    batches = iter(loader)
    for step in range(ns.steps):
        if cuda and ns.cuda_profiler_window and step == ns.cuda_profiler_window[0]:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
        starts.append(time.time_ns())
        t0 = time.perf_counter()
        images, labels = next(batches)
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        t_data = time.perf_counter()
        x = (images.float() - mean) / std
        loss = criterion(model(x), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        losses.append(loss.item())  # the usual per-step logging: waits for the GPU
        t_end = time.perf_counter()
        step_times.append(t_end - t0)
        data_times.append(t_data - t0)
        print(
            f"step {step} loss {losses[-1]:.4f} step {1e3 * (t_end - t0):.1f} ms "
            f"data {1e3 * (t_data - t0):.1f} ms",
            flush=True,
        )
        if cuda and ns.cuda_profiler_window and step == ns.cuda_profiler_window[1] - 1:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
        if prof is not None:
            prof.step()
    if prof is not None:
        prof.__exit__(None, None, None)

    after_first = step_times[1:] if len(step_times) >= 3 else step_times
    median_step = statistics.median(after_first)
    metrics = {
        "schema_version": 1,
        "workload": "convnet_sgd",
        "rank": 0,
        "world_size": 1,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch_version": torch.__version__,
        "steps": ns.steps,
        "annotated": False,
        "median_step_time_s": median_step,
        "median_data_time_s": statistics.median(
            data_times[1:] if len(data_times) >= 3 else data_times
        ),
        "images_per_s": ns.batch_size / median_step,
        "planted_item_ms": ns.item_ms,
        "planted_data_ms_per_step": round(ns.item_ms * ns.batch_size, 6),
        "cuda_profiler_window": list(ns.cuda_profiler_window or []) or None,
        "profile_steps": list(ns.profile_steps) if ns.torch_profile else None,
        "step_times_s": step_times,
        "data_times_s": data_times,
        "step_start_unix_ns": starts,
        "losses": losses,
        "final_loss": losses[-1],
        "peak_gpu_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "parameters": sum(p.numel() for p in model.parameters()),
        "trace_file": trace_path.name if trace_path else None,
        "config": {k: v if not isinstance(v, tuple) else list(v) for k, v in vars(ns).items()},
    }
    path = out / "metrics.json"
    path.write_text(json.dumps(metrics, indent=2) + "\n")
    print(
        f"median step {median_step * 1e3:.1f} ms, data {metrics['median_data_time_s'] * 1e3:.1f}"
        f" ms (planted {metrics['planted_data_ms_per_step']:.1f}); wrote {path}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
