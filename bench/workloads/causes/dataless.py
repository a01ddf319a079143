"""A token MLP that loads no data (no Dataset, no DataLoader), with three causes planted on
switches (issue 35 item 7): host compute on the main thread every N steps, host work in a
backward hook (the main thread waits on autograd's thread meanwhile), and fp32 GEMMs.

An embedding, `--layers` blocks of Linear(W, 4W), ReLU, Linear(4W, W) with a residual add, and a
tied output projection; fused AdamW; `loss.item()` at the end of every step. Each step's token
ids are drawn on the host (`torch.randint`, a few µs) and copied to the GPU: the GPU's first work
after a host pause is that small copy whatever the pause was.

Planted:
- `--host-every N --host-ms X`: after the optimizer step of every N-th step (`step % N == 0`,
  so that with the default window 6:12 steps 6 and 9 do it, both inside the GPU span: the last
  window step's work would come after its last kernel) the loop computes statistics of a host
  array in numpy (sort, percentiles) for X ms, as metric logging does: a periodic slow step.
  Measured: that work's wall (`host`).
- `--backward-host-ms Y`: a hook on the middle block's activation gradient runs Y ms of numpy
  work on autograd's thread while the main thread waits in `backward()`. Measured: the hook's
  wall (`backward_hook`).
- `--precision fp32` (no autocast; TF32 off, torch's default for matmuls) against `bf16`
  (autocast): GEMMs on CUDA cores against tensor cores. Measured: the forward and backward's GPU
  time (CUDA events, `fwd_bwd`): the GEMMs are nearly all of it by construction (ReLU, adds and
  the embedding are memory-bound and small beside 4W x W GEMMs).

    python bench/workloads/causes/dataless.py --help
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


class Net(nn.Module):
    def __init__(self, vocab: int, w: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, w)
        self.up = nn.ModuleList(nn.Linear(w, 4 * w) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(4 * w, w) for _ in range(layers))
        self.hook = None

    def forward(self, ids: Tensor) -> Tensor:
        h = self.emb(ids)
        for i, (u, d) in enumerate(zip(self.up, self.down, strict=True)):
            h = h + d(torch.relu(u(h)))
            if self.hook is not None and i == len(self.up) // 2 and h.requires_grad:
                h.register_hook(self.hook)
        logits = h @ self.emb.weight.t()
        return nn.functional.cross_entropy(logits.float(), ids)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    harness.common_args(p, steps=15, win="6:12")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    p.add_argument("--host-every", type=int, default=0)
    p.add_argument("--host-ms", type=float, default=0.0)
    p.add_argument("--backward-host-ms", type=float, default=0.0)
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    model = Net(a.vocab, a.width, a.layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    clock = harness.Clock(dev, a.cuda_profiler_window)
    rng = np.random.default_rng(a.seed)
    stats = rng.standard_normal(1 << 20).astype(np.float32)  # what the "logging" summarises
    current = [0]

    def logging_work() -> None:
        o = int(rng.integers(0, stats.size - (1 << 16)))
        part = np.sort(stats[o : o + (1 << 16)])
        np.percentile(part, [5, 50, 95])

    def hook(grad: Tensor) -> Tensor:
        with clock.host("backward_hook", current[0]):
            harness.spend(a.backward_host_ms, logging_work)
        return grad

    if a.backward_host_ms > 0:
        model.hook = hook
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    for step in range(a.steps):
        current[0] = step
        clock.begin(step)
        ids = torch.randint(0, a.vocab, (a.tokens,)).to(dev, non_blocking=False)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if cuda else []
        if ev:
            ev[0].record()
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(ids)
        loss.backward()
        if ev:
            ev[1].record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        if a.host_every and step % a.host_every == 0:
            with clock.host("host", step):
                harness.spend(a.host_ms, logging_work)
        if ev:
            clock.add("fwd_bwd", step, ev[0].elapsed_time(ev[1]))
        clock.end(step)
    cfg = {k: v for k, v in vars(a).items() if k not in ("output", "device")}
    planted = {}
    if a.host_every and a.host_ms > 0:
        planted["host-compute"] = "host"
    if a.backward_host_ms > 0:
        planted["host-compute (backward)"] = "backward_hook"
    if a.precision == "fp32":
        planted["fp32-kernels"] = "fwd_bwd"
    harness.write(clock, a.output, "dataless", cfg, planted)
    print(f"median step {1e3 * sorted(clock.walls)[len(clock.walls) // 2]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
