"""The harness of the held-out PyTorch-profiler workloads (gpt_host_batches.py,
convnet_precision.py, metric_syncs.py): a window of steps under torch.profiler as a user sets it up
from PyTorch's recipe (a schedule, `prof.step()` a step, the Chrome trace exported), then phases
outside the profiler, each a variant of the step with one cause changed, timed by the script's own
clock. Those walls are the truth gh-run's findings and projections are checked against
(tests/data/heldout_h200/README.md).

The whole sequence (the captured window, each variant's window, each phase outside) runs `rounds`
times in turn, so that a machine whose speed drifts during the run (a host that slows down, a
tokeniser's growing cache) moves every phase alike: each round's ratio of a variant to the
captured step is kept (`window_ratio_of`, `outside_ratio_of`), and their spread says how well the
truth is known. Only the first round's traces are exported (the trace analysed is round 1's).
Round 1's steps of the captured loop are written in order too (`step_times_s`, `profile_steps`
[S, E): the trace's steps in that indexing), as a script that times its steps writes them, so
that gh-run reads what the profiler cost the loop (`profiler_overhead`) from a recording as from
a user's run (recordings before 2026-11-30's second session do not have them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

Step = Callable[[], None]


def parser(doc: str | None, outside: int) -> argparse.ArgumentParser:
    """A workload's command line: the harness's own arguments (the device, the steps before
    and in the window, the steps of each phase outside it, the rounds, the output folder); the
    workload adds its model's."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--outside", type=int, default=outside)
    p.add_argument(
        "--rounds", type=int, default=3, help="the whole sequence this many times in turn"
    )
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    return p


def trained(
    loss: Callable[[], torch.Tensor], opt: torch.optim.Optimizer, dev: torch.device
) -> Callable[[bool], None]:
    """One training step of `loss` (its forward under bf16 autocast where asked, on a GPU),
    backward and `opt`'s step, the loss read as a loop logs it."""

    def step(bf16: bool) -> None:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16 and dev.type == "cuda"):
            value = loss()
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        value.item()  # the loss logged each step

    return step


def _wall(step: Step, cuda: bool) -> float:
    t = time.perf_counter()
    step()
    if cuda:
        # every variant ends its step with a read of the loss already; this only makes sure a
        # variant without one is timed to the end of its GPU work too
        torch.cuda.synchronize()
    return time.perf_counter() - t


def _profiled(step: Step, window: int, trace: Path | None, cuda: bool) -> list[float]:
    """`window` steps under torch.profiler (one more before them, the profiler's warm-up), the
    trace exported to `trace` (None: not exported); each step's wall, the profiler's warm-up
    step's first, the profiler's own step() left out (the last one exports the trace)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    if trace is not None:
        trace.parent.mkdir(parents=True, exist_ok=True)
    walls: list[float] = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=window, repeat=1),
        on_trace_ready=(lambda p: p.export_chrome_trace(str(trace))) if trace else (lambda p: None),
    ) as prof:
        for _ in range(window + 1):
            t = time.perf_counter()
            step()
            walls.append(time.perf_counter() - t)  # [0]: the warm-up, not in the trace
            prof.step()
    return walls


def _one_round(
    name: str,
    captured: Step,
    phases: dict[str, tuple[Step, int]],
    also: dict[str, Step],
    output: Path | None,
    cuda: bool,
    window: int,
    outside: int,
) -> dict[str, list[float]]:
    """The captured window, each `also` window, each phase outside: their walls, by key."""
    walls: dict[str, list[float]] = {}
    trace = output / f"{name}_rank0.pt.trace.json.gz" if output else None
    got = _profiled(captured, window, trace, cuda)
    walls["profiler_warmup"], walls["window"] = got[:1], got[1:]
    for phase, step in also.items():
        for _ in range(phases[phase][1] if phase in phases else 2):
            step()
        vt = output / phase / f"{name}_rank0.pt.trace.json.gz" if output else None
        walls[f"window_{phase}"] = _profiled(step, window, vt, cuda)[1:]
    for phase, (step, settle) in phases.items():
        for _ in range(settle):
            step()
        walls[phase] = [_wall(step, cuda) for _ in range(outside)]
    return walls


def run(
    name: str,
    captured: Step,
    phases: dict[str, tuple[Step, int]],
    *,
    args: argparse.Namespace,
    cuda: bool,
    config: dict[str, Any],
    also: dict[str, Step] | None = None,
) -> dict[str, Any]:
    """Warm `captured` up, then `rounds` times: profile `window` of its steps (one more as the
    profiler's own warm-up), profile each step of `also` (a phase's, run after its settling) the
    same way, time each phase (its step, the steps it settles for first) `outside` steps outside
    the profiler (`args`: the command line `parser` read). Writes OUTPUT/metrics.json (its
    config: every argument but the output, then `config`), and round 1's traces:
    OUTPUT/<name>_rank0.pt.trace.json.gz and OUTPUT/<phase>/ for each of `also`. The truth's
    top-level walls are round 1's (the trace's); `window_ratio_of` and `outside_ratio_of` hold
    each round's ratio of a variant's mean step to the captured one's (outside: to the first
    phase's)."""
    output, warmup, window = Path(args.output), args.warmup, args.window
    outside, rounds = args.outside, args.rounds
    config = {**{k: v for k, v in vars(args).items() if k != "output"}, **config}
    output.mkdir(parents=True, exist_ok=True)
    warm = [_wall(captured, cuda) for _ in range(warmup)]
    first = next(iter(phases))
    per: list[dict[str, list[float]]] = []
    for r in range(rounds):
        per.append(_one_round(name, captured, phases, also or {}, output if r == 0 else None,
                              cuda, window, outside))  # fmt: skip
    walls: dict[str, Any] = {"warmup": warm, **per[0], "rounds": per}

    def mean_ms(xs: list[float]) -> float:
        return 1e3 * statistics.fmean(xs)

    def ratios(key: str, of: str) -> list[float]:
        return [statistics.fmean(w[key]) / statistics.fmean(w[of]) for w in per]

    windows = [k for k in per[0] if k.startswith("window_")]
    # the captured loop's own steps in order, as a script that times its steps writes them
    # (gh-run's `profiler_overhead` sets the window's against the rest): the warm-up, the
    # window, then the loop as captured outside the profiler (the profiler's warm-up step,
    # under the profiler but not in the trace, is neither, and other phases' steps between
    # are not this loop's: both left out)
    first_walls = per[0]
    sequence = [*warm, *first_walls["window"], *first_walls[first]]
    begin = len(warm)
    out = {
        "workload": name,
        "step_times_s": sequence,
        "profile_steps": [begin, begin + len(first_walls["window"])],
        "config": {**config, "rounds": rounds},
        "truth": {
            "window_wall_mean_ms": mean_ms(per[0]["window"]),
            "window_wall_mean_ms_of": {k[7:]: mean_ms(per[0][k]) for k in windows},
            "outside_wall_ms": {k: mean_ms(per[0][k]) for k in phases},
            "outside_wall_median_ms": {k: 1e3 * statistics.median(per[0][k]) for k in phases},
            "window_ratio_of": {k[7:]: ratios(k, "window") for k in windows},
            "outside_ratio_of": {k: ratios(k, first) for k in phases if k != first},
            "walls_s": walls,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
    }
    (output / "metrics.json").write_text(json.dumps(out, indent=1))
    t = out["truth"]
    print(json.dumps({"workload": name, "window_ms": t["window_wall_mean_ms"],
                      "window_ratio_of": t["window_ratio_of"],
                      "outside_ratio_of": t["outside_ratio_of"]}))  # fmt: skip
    return out
