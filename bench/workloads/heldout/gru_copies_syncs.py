"""A held-out planted-cause workload (issue 35, branch cause3), written after the rules it checks
and on purpose unlike bench/workloads/causes/: a GRU sequence model (cuDNN's fused RNN, a
linear head) trained on synthetic sequences, no DataLoader, its own clock.

Two planted causes, each switchable:
- pageable copies: each step's batch (float32 [batch, seq, features]) is a numpy array from a
  pool made once (pageable host memory, no allocation in the step), copied with
  `torch.from_numpy(a).to(device)`; `--pinned` copies the same pool pinned, `non_blocking`;
- syncs: `--checks K` reads K scalars back (`.item()`) in each step: a finiteness check of the
  GRU's output, then gradient norms of K-1 parameters after backward, as a script that guards
  its training might.
Every step ends with `loss.item()` (the loss logged each step: in every phase alike).

Phases (one process, the model shared): warm-up; the capture window (cudaProfilerStart/Stop
around it: `--window` steps, pageable copies and checks on); then outside the capture the same
loop three ways, `--outside` steps each: as in the window (A), with pinned copies (B), without
the checks (C); `--rounds R` runs A, B, C in turn R times (a host whose speed drifts moves the
three alike; each round's means in `truth.rounds`). The truth is the script's own walls: copies
A - B, syncs A - C, mean ms a step (`truth.causes`), with every step's wall. A step's wall:
time.perf_counter from the loop's top to after its closing `loss.item()`.

    python3 gru_copies_syncs.py --output DIR [--device cpu: a dry run, no window, no pinning]
"""

from __future__ import annotations

import argparse
import itertools
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

SEGMENTS = ("copy call", "forward launched", "forward's read", "backward", "reads and optimizer")


class SeqModel(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--features", type=int, default=512)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--pool", type=int, default=4, help="host batches made once, used in turn")
    p.add_argument("--checks", type=int, default=8, help=".item() reads a step (0: none)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--outside", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1, help="A, B, C in turn this many times")
    p.add_argument("--segments", action="store_true", help="each phase's host time mark to mark")
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    pool = [rng.standard_normal((a.batch, a.seq, a.features), dtype=np.float32)
            for _ in range(a.pool)]  # fmt: skip
    pinned = [torch.from_numpy(x).pin_memory() for x in pool] if cuda else []
    model = SeqModel(a.features, a.hidden, a.layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    watched = [q for q in model.parameters() if q.dim() > 1][: max(a.checks - 1, 0)]
    seen: list[float] = []

    # --segments: per phase, each step's host time from mark to mark (SEGMENTS)
    marks: dict[bool, list[list[float]]] = {False: [], True: []}

    def step(i: int, pin: bool, checks: bool) -> float:
        t = time.perf_counter()
        at = [t]
        if pin:
            x = pinned[i % a.pool].to(dev, non_blocking=True)
        else:
            x = torch.from_numpy(pool[i % a.pool]).to(dev)
        at.append(time.perf_counter())
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            y = model(x)
            at.append(time.perf_counter())
            if checks and a.checks:
                seen.append(float(torch.isfinite(y).all().item()))
            at.append(time.perf_counter())
            loss = (y.float() - x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        at.append(time.perf_counter())
        if checks:
            for q in watched:
                assert q.grad is not None
                seen.append(q.grad.norm().item())
        opt.step()
        loss.item()  # the loss logged each step
        at.append(time.perf_counter())
        if a.segments and checks:
            marks[pin].append([1e3 * (b - c) for c, b in itertools.pairwise(at)])
        return at[-1] - t

    walls: dict[str, list[float]] = {"warmup": [], "window": [], "A": [], "B": [], "C": []}
    n = 0
    for _ in range(a.warmup):
        walls["warmup"].append(step(n, False, True))
        n += 1
    if cuda:
        torch.cuda.synchronize()
        profiler(True)
    for _ in range(a.window):
        walls["window"].append(step(n, False, True))
        n += 1
    if cuda:
        torch.cuda.synchronize()
        profiler(False)
    marks[False].clear()  # the segments are the phases' outside the capture (A, B)
    phases = [
        ("A", lambda i: step(i, False, True)),
        *([("B", lambda i: step(i, True, True))] if cuda else []),
        ("C", lambda i: step(i, False, False)),
    ]
    got, rounds, n = timed(phases, a.rounds, a.outside, n)
    walls.update(got)

    def ms(k: str) -> float:
        return 1e3 * statistics.fmean(walls[k]) if walls[k] else 0.0

    causes = {
        "host-device-copies": {"measured_by": "walls: A (pageable) less B (pinned), outside the"
                               " capture", "ms_per_step": ms("A") - ms("B")},
        "sync": {"measured_by": "walls: A (checks) less C (no checks), outside the capture",
                 "ms_per_step": ms("A") - ms("C"), "reads_per_step": a.checks},
    }  # fmt: skip
    out = {
        "workload": "gru_copies_syncs",
        "config": {
            **{k: v for k, v in vars(a).items() if k not in ("output",)},
            "num_workers": 0,
            "precision": "bf16",
            "cuda_profiler_window": [a.warmup, a.warmup + a.window],
        },
        "step_times_s": walls["warmup"] + walls["window"],
        "median_step_time_s": statistics.median(walls["window"]),
        "truth": {
            "causes": causes,
            "window_wall_mean_ms": ms("window"),
            "outside_wall_ms": {
                "A_pageable_checks": ms("A"),
                "B_pinned_checks": ms("B"),
                "C_pageable_no_checks": ms("C"),
            },
            "walls_s": walls,
            "rounds": rounds,
            # median ms from mark to mark, pageable (A) and pinned (B): SEGMENTS
            "segments": {
                ("pinned" if pin else "pageable"): dict(
                    zip(SEGMENTS, np.median(np.array(m), axis=0).round(3).tolist(), strict=True)
                )
                for pin, m in marks.items()
                if m
            },
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
    }
    Path(a.output).mkdir(parents=True, exist_ok=True)
    (Path(a.output) / "metrics.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({"window_ms": ms("window"), **out["truth"]["outside_wall_ms"],
                      "truth": {k: v["ms_per_step"] for k, v in causes.items()}}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
