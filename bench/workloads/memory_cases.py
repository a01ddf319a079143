"""Training loops whose memory is planted and measured by themselves, for gh-run's memory analysis
(issue 39): each case plants one cause and writes what it measured (`memory_truth.json`), so that
gh-run's figures from the allocator snapshot can be checked against the workload's own truth.
Plain PyTorch; nothing of gh-run's in it (the memory hook finds it from outside).

    python bench/workloads/memory_cases.py CASE [--device cuda|cpu] [--steps N] [--out DIR]

Cases (sizes for one H200; `--device cpu` runs each tiny, for a dry run of the plumbing):
- `activations`: an MLP of `--layers` residual blocks (Linear H->4H, GELU, Linear 4H->H) over
  `--tokens` tokens, SGD without momentum (no optimizer state): the forward's saved activations
  dominate the peak. `--checkpoint` recomputes each block in backward
  (`torch.utils.checkpoint`, non-reentrant): the peak drops.
- `adam`: square Linear layers over few tokens with Adam (fused on CUDA): parameters P,
  gradients P, Adam's two moments 2P: optimizer state dominates the peak.
- `leak`: the activations model, small, and a planted per-step leak: each step keeps one of its
  forward's hidden states (a list "for debugging", as a user would), `--leak-tokens` x H fp32.
- `fragment`: the activations model over a different number of tokens each step, growing, so
  that the caching allocator's old segments cannot serve the new sizes: reserved memory grows
  far beyond what is allocated.
- `oom`: the adam model under `torch.cuda.set_per_process_memory_fraction` (`--limit-gib` of the
  device), then one step with `--oom-factor` times the tokens: it runs out of memory in the
  forward pass; the case writes what it held and re-raises, so the job fails as a real one does.
- `--torch-profile DIR --profile-steps S:E` (DIR `out`: the `--out` folder): also a Kineto
  trace of steps S..E-1 with the allocator's memory events (`profile_memory=True`),
  `DIR/memory_<case>.pt.trace.json.gz`.
- `churn`: no training: `--events` small allocations and frees, timed, for the cost of each
  recorded allocator event (run it with and without gh-run's memory hook).

What each case measures (truth): parameter, gradient and optimizer-state bytes (numel x element
size of the tensors it made), the bytes autograd saved for backward in each forward (unique
storages through `torch.autograd.graph.saved_tensors_hooks`, parameters left out), the planted
leak per step, allocated and reserved bytes at each phase boundary (`torch.cuda.memory_allocated`
/ `memory_reserved`), `max_memory_allocated`/`max_memory_reserved`, step times (synchronised),
and at the out-of-memory: the message, the size it asked for, what was held.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

KEPT_STATS = (
    "allocated_bytes.all",
    "reserved_bytes.all",
    "inactive_split",
    "active_bytes.all",
    "num_alloc_retries",
    "num_ooms",
)
CASES = ("activations", "adam", "leak", "fragment", "oom", "churn")


class Block(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.fc2(self.act(self.fc1(x)))


class Mlp(nn.Module):
    def __init__(self, layers: int, hidden: int, checkpoint: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(layers))
        self.checkpoint = checkpoint
        self.kept: list[Tensor] = []  # the leak case's "debug" list
        self.leak_tokens = 0

    def forward(self, x: Tensor) -> Tensor:
        for i, block in enumerate(self.blocks):
            if self.checkpoint:
                from torch.utils.checkpoint import checkpoint

                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
            if i == 0 and self.leak_tokens:
                # the planted leak: one hidden state per step, kept "for debugging"
                self.kept.append(x[: self.leak_tokens].detach().clone())
        return x


class Square(nn.Module):
    """Square Linear layers without bias: parameters are exactly layers x H x H."""

    def __init__(self, layers: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(layers))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def tensor_bytes(tensors: Any) -> int:
    return sum(int(t.numel()) * t.element_size() for t in tensors)


def optimizer_state_bytes(opt: torch.optim.Optimizer, device: torch.device) -> dict[str, int]:
    """Bytes of the optimizer's state tensors on the device, by state name."""
    out: dict[str, int] = {}
    for state in opt.state.values():
        for name, value in state.items():
            if isinstance(value, Tensor) and value.device.type == device.type:
                out[name] = out.get(name, 0) + int(value.numel()) * value.element_size()
    return out


class SavedBytes:
    """Bytes autograd saves for backward in a forward: unique storages, parameters left out."""

    def __init__(self, params: Sequence[Tensor]) -> None:
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.seen: dict[int, int] = {}

    def pack(self, t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self.param_ptrs and t.device.type != "cpu":
            self.seen[ptr] = storage.nbytes()
        return t

    def total(self) -> int:
        return sum(self.seen.values())


class Clock:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def mem(self) -> dict[str, int | None]:
        if self.device.type != "cuda":
            return {"allocated": None, "reserved": None}
        return {
            "allocated": int(torch.cuda.memory_allocated(self.device)),
            "reserved": int(torch.cuda.memory_reserved(self.device)),
        }


def train(
    ns: argparse.Namespace,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    tokens_of: Callable[[int], int],
    truth: dict[str, Any],
) -> None:
    """The loop every training case shares: a fresh batch per step, forward, backward, step;
    the memory at each phase boundary and the bytes saved for backward, measured."""
    device = torch.device(ns.device)
    clock = Clock(device)
    params = [p for p in model.parameters()]
    truth["parameter_bytes"] = tensor_bytes(params)
    steps: list[dict[str, Any]] = []
    hidden = ns.hidden
    prof = kineto(ns)
    for step in range(ns.steps):
        clock.sync()
        t0 = time.perf_counter()
        start_ns = time.time_ns()
        opt.zero_grad(set_to_none=True)
        tokens = tokens_of(step)
        before_batch = clock.mem()
        x = torch.randn(tokens, hidden, device=device)
        before = clock.mem()
        saved = SavedBytes(params)
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            out = model(x)
            loss = out.float().square().mean()
        after_forward = clock.mem()
        loss.backward()
        after_backward = clock.mem()
        grads = tensor_bytes(p.grad for p in params if p.grad is not None)
        opt.step()
        after_step = clock.mem()
        clock.sync()
        steps.append(
            {
                "step": step,
                "tokens": tokens,
                "start_unix_ns": start_ns,
                "time_s": time.perf_counter() - t0,
                "batch_bytes": int(x.numel()) * x.element_size(),
                "output_bytes": int(out.numel()) * out.element_size(),
                "saved_for_backward_bytes": saved.total(),
                "gradient_bytes": grads,
                "memory": {
                    "before_batch": before_batch,
                    "before_forward": before,
                    "after_forward": after_forward,
                    "after_backward": after_backward,
                    "after_step": after_step,
                },
                "loss": float(loss.detach()),
            }
        )
        del out, loss
        if prof is not None:
            prof.step()
    if prof is not None:
        prof.stop()
        trace = Path(ns.torch_profile) / f"memory_{ns.case}.pt.trace.json.gz"
        prof.export_chrome_trace(str(trace))
        truth["kineto_trace"] = trace.name
    truth["steps"] = steps
    truth["gradient_bytes"] = steps[-1]["gradient_bytes"] if steps else 0
    truth["optimizer_state_bytes"] = optimizer_state_bytes(opt, device)
    times = [s["time_s"] for s in steps[1:]] or [s["time_s"] for s in steps]
    truth["median_step_time_s"] = statistics.median(times) if times else None


def kineto(ns: argparse.Namespace) -> Any:
    """torch.profiler with memory events (`profile_memory`) over `--profile-steps`, or None."""
    if not ns.torch_profile:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    start, end = ns.profile_steps
    activities = [ProfilerActivity.CPU]
    if ns.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    prof = profile(
        activities=activities,
        schedule=schedule(wait=start, warmup=0, active=end - start, repeat=1),
        profile_memory=True,
    )
    prof.start()
    return prof


def case_oom(ns: argparse.Namespace, model: nn.Module, opt: torch.optim.Optimizer,
             truth: dict[str, Any]) -> int:  # fmt: skip
    device = torch.device(ns.device)
    if device.type == "cuda":
        # set_per_process_memory_fraction wants an indexed device ("cuda:0"), not "cuda"
        device = torch.device("cuda", torch.cuda.current_device())
        total = torch.cuda.get_device_properties(device).total_memory
        fraction = min(1.0, ns.limit_gib * 2**30 / total)
        torch.cuda.set_per_process_memory_fraction(fraction, device)
        truth["limit_bytes"] = int(fraction * total)
        truth["memory_fraction"] = fraction
        truth["device_total_bytes"] = int(total)
    grow = {ns.steps - 1: ns.oom_factor}
    try:
        train(ns, model, opt, lambda s: ns.tokens * grow.get(s, 1), truth)
    except torch.OutOfMemoryError as exc:
        text = str(exc)
        asked = re.search(r"Tried to allocate ([0-9.]+) (GiB|MiB|KiB|B)", text)
        unit = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
        truth["oom"] = {
            "message": text.splitlines()[0][:2000],
            "tried_to_allocate_bytes": round(float(asked.group(1)) * unit[asked.group(2)])
            if asked
            else None,
            "allocated_at_oom": int(torch.cuda.memory_allocated(device)),
            "reserved_at_oom": int(torch.cuda.memory_reserved(device)),
            "at_step": ns.steps - 1,
            "tokens": ns.tokens * ns.oom_factor,
        }
        truth["parameter_bytes"] = tensor_bytes(model.parameters())
        truth["optimizer_state_bytes"] = optimizer_state_bytes(opt, device)
        finish(ns, truth)
        raise
    finish(ns, truth)
    print("memory_cases: the oom case did not run out of memory", file=sys.stderr)
    return 3


def case_churn(ns: argparse.Namespace, truth: dict[str, Any]) -> None:
    """`--events` allocations and frees of small tensors, timed: what one event costs."""
    device = torch.device(ns.device)
    keep: list[Tensor] = []
    torch.empty(1, device=device)  # CUDA initialised (and the hook's recording started)
    Clock(device).sync()
    t0 = time.perf_counter()
    for i in range(ns.events // 2):
        keep.append(torch.empty(256 + (i % 64) * 512, dtype=torch.uint8, device=device))
        if len(keep) > 64:
            keep.pop(0)
    Clock(device).sync()
    took = time.perf_counter() - t0
    truth["churn"] = {"allocations": ns.events // 2, "seconds": took,
                      "us_per_allocation": took / max(1, ns.events // 2) * 1e6}  # fmt: skip


def finish(ns: argparse.Namespace, truth: dict[str, Any]) -> None:
    device = torch.device(ns.device)
    if device.type == "cuda":
        stats = torch.cuda.memory_stats(device)
        truth["max_memory_allocated"] = int(torch.cuda.max_memory_allocated(device))
        truth["max_memory_reserved"] = int(torch.cuda.max_memory_reserved(device))
        truth["memory_stats"] = {k: int(v) for k, v in stats.items() if k.startswith(KEPT_STATS)}
        truth["device_name"] = torch.cuda.get_device_name(device)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory_truth.json").write_text(json.dumps(truth, indent=1) + "\n")


def window(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    if not sep or not start.isdigit() or not end.isdigit() or int(start) >= int(end):
        raise argparse.ArgumentTypeError(f"expected START:END with START < END, got {text!r}")
    return int(start), int(end)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python bench/workloads/memory_cases.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("case", choices=CASES)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=None, help="training steps")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--tokens", type=int, default=None, help="tokens per step")
    p.add_argument("--checkpoint", action="store_true", help="activations: recompute blocks")
    p.add_argument("--leak-tokens", type=int, default=None, help="leak: rows kept per step")
    p.add_argument("--limit-gib", type=float, default=8.0, help="oom: the process's memory cap")
    p.add_argument("--oom-factor", type=int, default=16, help="oom: tokens x this, last step")
    p.add_argument("--events", type=int, default=200_000, help="churn: allocator events")
    p.add_argument("--out", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    p.add_argument(
        "--torch-profile", default=None, help="a Kineto trace with memory events here (out: --out)"
    )
    p.add_argument("--profile-steps", type=window, default=(1, 3), help="S:E (%(default)s)")
    ns = p.parse_args(argv)
    if ns.torch_profile == "out":
        ns.torch_profile = ns.out
    small = ns.device == "cpu"
    # (layers, hidden, tokens, steps) per case: one H200, or tiny on the CPU
    sizes = {
        "activations": ((12, 2048, 16384, 12), (2, 64, 256, 4)),
        "adam": ((8, 4096, 512, 8), (2, 64, 32, 3)),
        "leak": ((4, 1024, 4096, 16), (2, 64, 64, 5)),
        "fragment": ((4, 2048, 2048, 10), (2, 64, 32, 4)),
        "oom": ((8, 4096, 2048, 4), (2, 64, 32, 3)),
        "churn": ((1, 64, 64, 1), (1, 64, 64, 1)),
    }[ns.case][1 if small else 0]
    for name, value in zip(("layers", "hidden", "tokens", "steps"), sizes, strict=True):
        if getattr(ns, name) is None:
            setattr(ns, name, value)
    if ns.leak_tokens is None:
        ns.leak_tokens = 3000 if not small else 16
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse(argv)
    device = torch.device(ns.device)
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    truth: dict[str, Any] = {
        "format": "gh-run.memory-truth/1",
        "case": ns.case,
        "argv": sys.argv[1:],
        "device": ns.device,
        "torch": torch.__version__,
        "config": {
            k: getattr(ns, k)
            for k in ("layers", "hidden", "tokens", "steps", "checkpoint", "leak_tokens")
        },
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "memory_hook": os.environ.get("GH_RUN_MEMORY", "off"),
    }
    if ns.case == "churn":
        case_churn(ns, truth)
        finish(ns, truth)
        return 0
    fused = {"fused": True} if device.type == "cuda" else {}
    if ns.case in ("adam", "oom"):
        model: nn.Module = Square(ns.layers, ns.hidden).to(device)
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, **fused)
        planted = 2 * tensor_bytes(model.parameters())
        truth["planted"] = {"adam_moments_bytes": planted}
        if ns.case == "oom":
            return case_oom(ns, model, opt, truth)
        train(ns, model, opt, lambda s: ns.tokens, truth)
    else:
        mlp = Mlp(ns.layers, ns.hidden, ns.checkpoint).to(device)
        opt = torch.optim.SGD(mlp.parameters(), lr=1e-4)
        tokens_of: Callable[[int], int] = lambda s: ns.tokens  # noqa: E731
        if ns.case == "leak":
            mlp.leak_tokens = ns.leak_tokens
            truth["planted"] = {"leak_bytes_per_step": ns.leak_tokens * ns.hidden * 4}
        if ns.case == "fragment":
            # a different batch each step, growing: a cached block of an earlier size is too
            # small for every later request
            tokens_of = lambda s: ns.tokens + s * ns.tokens // 2  # noqa: E731
        train(ns, mlp, opt, tokens_of, truth)
        if ns.case == "leak":
            truth["leak_kept_bytes"] = tensor_bytes(mlp.kept)
    finish(ns, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
