"""A residual MLP built from many small layers, with two causes planted on switches (issue 35
item 7): launch-bound steps (microsecond kernels, one launch each) and host syncs while the GPU
has nothing queued (`.item()` inside the forward pass).

Each block: LayerNorm, Linear(W, W), GELU, Linear(W, W), residual add. The batch is generated on
the GPU (no data is loaded). Adam with `capturable=True` (its state stays on the GPU, so the same
step can be captured as a CUDA graph), `loss.item()` at the end of every step.

Planted:
- launch-bound: with `--width 64 --layers 96` (the defaults) every kernel runs a few µs while
  launching it costs more: the GPU idles between kernels. `--cuda-graphs` captures the whole step
  (forward, backward, optimizer) once and replays it: the pair's other side. Measured (eager
  runs, after the window): the same step as a CUDA graph (`graph_step_ms`, the median of 20
  replays), so the launch cost of a captured step is its wall minus that (`launch`).
- syncs: `--item-syncs K` reads a scalar (`.item()`) after every L/K-th block in the steps where
  `step % --sync-every == 1`: the host waits for the GPU to drain, then launches the next block
  into an empty queue. Measured: those steps' walls minus the mean wall of the window's steps
  without syncs (`sync`).

    python bench/workloads/causes/many_layers.py --help
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


class Block(nn.Module):
    def __init__(self, w: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(w)
        self.a = nn.Linear(w, w)
        self.b = nn.Linear(w, w)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.b(nn.functional.gelu(self.a(self.norm(x))))


class Net(nn.Module):
    def __init__(self, w: int, layers: int, syncs: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(w) for _ in range(layers))
        self.head = nn.Linear(w, 1)
        self.every = max(1, layers // syncs) if syncs else 0
        self.sync_now = False
        self.seen: list[float] = []

    def forward(self, x: Tensor) -> Tensor:
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if self.sync_now and self.every and (i + 1) % self.every == 0:
                # a check a script might make: read a statistic of the activations
                self.seen.append(x.detach().abs().mean().item())
        return self.head(x).float().pow(2).mean()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    harness.common_args(p, steps=16, win="8:14")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=96)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--cuda-graphs", action="store_true", help="capture the step, replay it")
    p.add_argument("--item-syncs", type=int, default=0)
    p.add_argument("--sync-every", type=int, default=2)
    p.add_argument(
        "--graph-truth",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="eager runs: time the same step as a CUDA graph after the window",
    )
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    model = Net(a.width, a.layers, a.item_syncs).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=cuda, foreach=True)
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    static_x = torch.randn(a.batch_size, a.width, device=dev)

    def step_body() -> Tensor:
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(static_x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    graph = None
    static_loss: Tensor | None = None
    if a.cuda_graphs and cuda:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm up outside the graph (allocator, autotuning)
                step_body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step_body()
    clock = harness.Clock(dev, a.cuda_profiler_window)
    for step in range(a.steps):
        clock.begin(step)
        static_x.normal_()  # the next batch, made on the GPU
        if graph is not None:
            graph.replay()
            assert static_loss is not None
            static_loss.item()
        else:
            model.sync_now = a.item_syncs > 0 and step % a.sync_every == 1
            step_body().item()
        clock.end(step)
    extra: dict[str, object] = {}
    planted: dict[str, str] = {}
    win = [i for i in range(a.steps) if clock.in_window(i)]
    if a.item_syncs and graph is None:
        with_s = [i for i in win if i % a.sync_every == 1]
        plain = [clock.walls[i] for i in win if i % a.sync_every != 1]
        base = statistics.fmean(plain) if plain else 0.0
        for i in with_s:
            clock.add("sync", i, max(0.0, (clock.walls[i] - base) * 1e3))
        planted["sync"] = "sync"
        extra["sync_baseline_ms"] = base * 1e3
    if graph is None and a.graph_truth and cuda and not a.item_syncs:
        # the same step as one graph: what the step costs without launches
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step_body()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            loss_g = step_body()
        times = []
        for _ in range(20):
            t = time.perf_counter()
            static_x.normal_()
            g.replay()
            loss_g.item()
            times.append(time.perf_counter() - t)
        graph_ms = statistics.median(times) * 1e3
        for i in win:
            clock.add("launch", i, max(0.0, clock.walls[i] * 1e3 - graph_ms))
        planted["launch-bound"] = "launch"
        extra["graph_step_ms"] = graph_ms
    cfg = {k: v for k, v in vars(a).items() if k not in ("output", "device")}
    harness.write(clock, a.output, "many_layers", cfg, planted, extra)
    print(f"median step {1e3 * sorted(clock.walls)[len(clock.walls) // 2]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
