"""A third held-out workload for the projections (issue 41), written after the replay's rules
and unlike the pairs they were checked on: a small Transformer encoder (torch.nn's own layers)
classifying synthetic token sequences, fed by a DataLoader whose dataset builds each sample on
the host (a numpy "tokeniser": hashing and sorting, a few ms a sample), fp32, AdamW, its own
clock.

Phases (one process, the model shared): warm-up; the capture window (cudaProfilerStart/Stop
around it: `--window` steps, fp32, `num_workers=0`); then outside the capture, `--outside` steps
each: as in the window (A), with `--workers` DataLoader workers (W), and with bf16 autocast at
`num_workers=0` (P). Every step ends with `loss.item()`. The truth is the script's own walls:
A, W and P, mean ms a step.

    python3 encoder_loader_precision.py --output DIR [--device cpu: a dry run, no window]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from cuda_profiler import profiler
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Synthetic samples built on the host: words drawn, hashed into a vocabulary, sorted by a
    key and cut to length, as a text pipeline's host work might be."""

    def __init__(self, n: int, seq: int, vocab: int, work: int) -> None:
        self.n, self.seq, self.vocab, self.work = n, seq, vocab, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(i)
        words = rng.integers(0, 2**31, size=self.work, dtype=np.int64)
        for _ in range(4):
            words = np.sort((words * 2654435761 + 12345) % (2**31 - 1))
        ids = (words[: self.seq] % self.vocab).astype(np.int64)
        return torch.from_numpy(ids), torch.tensor(int(words[0] % 10))


class Encoder(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x)).mean(dim=1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--work", type=int, default=20000, help="host words hashed a sample")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--outside", type=int, default=20)
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    data = Tokens(10**6, a.seq, a.vocab, a.work)
    model = Encoder(a.vocab, a.width, a.layers, a.heads).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def batches(workers: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=workers,
                               persistent_workers=False))  # fmt: skip

    def run(it: Iterator[tuple[torch.Tensor, torch.Tensor]], bf16: bool) -> float:
        t = time.perf_counter()
        x, y = next(it)
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16 and cuda):
            loss = nn.functional.cross_entropy(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loss logged each step
        return time.perf_counter() - t

    walls: dict[str, list[float]] = {"warmup": [], "window": [], "A": [], "W": [], "P": []}
    it = batches(0)
    for _ in range(a.warmup):
        walls["warmup"].append(run(it, False))
    if cuda:
        torch.cuda.synchronize()
        profiler(True)
    for _ in range(a.window):
        walls["window"].append(run(it, False))
    if cuda:
        torch.cuda.synchronize()
        profiler(False)
    for phase, workers, bf16 in (("A", 0, False), ("W", a.workers, False), ("P", 0, True)):
        it = batches(workers)
        # the workers' first batches were prefetched while nothing ran: settle past them
        for _ in itertools.repeat(None, 2 * max(workers, 1)):
            run(it, bf16)
        for _ in range(a.outside):
            walls[phase].append(run(it, bf16))

    def ms(k: str) -> float:
        return 1e3 * statistics.fmean(walls[k]) if walls[k] else 0.0

    out = {
        "workload": "encoder_loader_precision",
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
                "A_fp32_workers0": ms("A"),
                "W_fp32_workers": ms("W"),
                "P_bf16_workers0": ms("P"),
            },
            "walls_s": walls,
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
