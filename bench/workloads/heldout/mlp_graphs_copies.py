"""A second held-out workload for the projections (issue 41), written after the replay's rules
for CUDA graphs and pinned copies (links.py, critical_path's GPU-side waits) and unlike the
pairs they were checked on: a residual MLP of many narrow blocks (Linear, LayerNorm, GELU: a
few µs a kernel, launch-bound when eager) trained with SGD on synthetic features, each step's
batch a pageable numpy array copied with `torch.from_numpy(a).to(device)`, no DataLoader, its
own clock.

Phases (one process, the model shared): warm-up; the capture window (cudaProfilerStart/Stop
around it: `--window` eager steps, pageable copies); then outside the capture, `--outside` steps
each: eager with pageable copies as in the window (A), eager with the same batches pinned and
copied `non_blocking` (B), and the whole step (forward, backward, SGD) captured once as one CUDA
graph and replayed, its batch copied pageable into the graph's static input (G); `--rounds R`
runs A and B in turn R times before G (a host whose speed drifts moves both alike; each round's
means in `truth.rounds`). Every step
ends with `loss.item()` (the loss logged). The truth is the script's own walls: A, B and G, mean
ms a step; the projections are checked as window x B/A (pinned copies) and window x G/A (one
graph a step).

    python3 mlp_graphs_copies.py --output DIR [--device cpu: a dry run, no window, no graph]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from cuda_profiler import profiler
from outside_rounds import timed
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.gelu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self, features: int, width: int, blocks: int) -> None:
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(blocks)))
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.inp(x)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--features", type=int, default=16384)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--blocks", type=int, default=48)
    p.add_argument("--pool", type=int, default=4, help="host batches made once, used in turn")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--outside", type=int, default=40)
    p.add_argument("--rounds", type=int, default=1, help="A and B in turn this many times")
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    pool = [rng.standard_normal((a.batch, a.features), dtype=np.float32) for _ in range(a.pool)]
    targets = [rng.standard_normal((a.batch, 1), dtype=np.float32) for _ in range(a.pool)]
    pinned = [torch.from_numpy(x).pin_memory() for x in pool] if cuda else []
    model = Net(a.features, a.width, a.blocks).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    ys = [torch.from_numpy(t).to(dev) for t in targets]

    def eager(i: int, pin: bool) -> float:
        t = time.perf_counter()
        if pin:
            x = pinned[i % a.pool].to(dev, non_blocking=True)
        else:
            x = torch.from_numpy(pool[i % a.pool]).to(dev)
        loss = (model(x) - ys[i % a.pool]).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loss logged each step
        return time.perf_counter() - t

    walls: dict[str, list[float]] = {"warmup": [], "window": [], "A": [], "B": [], "G": []}
    n = 0
    for _ in range(a.warmup):
        walls["warmup"].append(eager(n, False))
        n += 1
    if cuda:
        torch.cuda.synchronize()
        profiler(True)
    for _ in range(a.window):
        walls["window"].append(eager(n, False))
        n += 1
    if cuda:
        torch.cuda.synchronize()
        profiler(False)
    phases = [
        ("A", lambda i: eager(i, False)),
        *([("B", lambda i: eager(i, True))] if cuda else []),
    ]
    got, rounds, n = timed(phases, a.rounds, a.outside, n)
    walls.update(got)
    if cuda:  # PyTorch's whole-network capture recipe (torch.cuda.graphs docs)
        static_x = torch.empty((a.batch, a.features), device=dev)
        static_y = torch.empty((a.batch, 1), device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                (model(static_x) - static_y).pow(2).mean().backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = (model(static_x) - static_y).pow(2).mean()
            static_loss.backward()
            opt.step()

        def graphed(i: int) -> float:
            t = time.perf_counter()
            static_x.copy_(torch.from_numpy(pool[i % a.pool]).to(dev))
            static_y.copy_(ys[i % a.pool])
            graph.replay()
            static_loss.item()
            return time.perf_counter() - t

        graphed(n)
        n += 1
        for _ in range(a.outside):
            walls["G"].append(graphed(n))
            n += 1

    def ms(k: str) -> float:
        return 1e3 * statistics.fmean(walls[k]) if walls[k] else 0.0

    out = {
        "workload": "mlp_graphs_copies",
        "config": {
            **{k: v for k, v in vars(a).items() if k not in ("output",)},
            "num_workers": 0,
            "precision": "fp32",
            "cuda_profiler_window": [a.warmup, a.warmup + a.window],
        },
        "step_times_s": walls["warmup"] + walls["window"],
        "median_step_time_s": statistics.median(walls["window"]),
        "truth": {
            "window_wall_mean_ms": ms("window"),
            "outside_wall_ms": {
                "A_eager_pageable": ms("A"),
                "B_eager_pinned": ms("B"),
                "G_graph_pageable": ms("G"),
            },
            "walls_s": walls,
            "rounds": rounds,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
    }
    Path(a.output).mkdir(parents=True, exist_ok=True)
    (Path(a.output) / "metrics.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({"window_ms": ms("window"), **out["truth"]["outside_wall_ms"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
