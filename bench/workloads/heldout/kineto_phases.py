"""The harness of the held-out PyTorch-profiler workloads (gpt_host_batches.py,
convnet_precision.py, metric_syncs.py): a window of steps under torch.profiler as a user sets it up
from PyTorch's recipe (a schedule, `prof.step()` a step, the Chrome trace exported), then phases
outside the profiler, each a variant of the step with one cause changed, timed by the script's own
clock. Those walls are the truth gh-run's findings and projections are checked against
(tests/data/heldout_h200/README.md).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

Step = Callable[[], None]


def _wall(step: Step, cuda: bool) -> float:
    t = time.perf_counter()
    step()
    if cuda:
        # every variant ends its step with a read of the loss already; this only makes sure a
        # variant without one is timed to the end of its GPU work too
        torch.cuda.synchronize()
    return time.perf_counter() - t


def _profiled(step: Step, window: int, trace: Path, cuda: bool) -> list[float]:
    """`window` steps under torch.profiler (one more before them, the profiler's warm-up), the
    trace exported to `trace`; each step's wall, the profiler's own step() left out (the last
    one exports the trace)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    trace.parent.mkdir(parents=True, exist_ok=True)
    walls: list[float] = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=window, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(trace)),
    ) as prof:
        for i in range(window + 1):
            t = time.perf_counter()
            step()
            if i:  # the profiler's warm-up step is not in the trace's window
                walls.append(time.perf_counter() - t)
            prof.step()
    return walls


def run(
    name: str,
    captured: Step,
    phases: dict[str, tuple[Step, int]],
    *,
    output: Path,
    cuda: bool,
    warmup: int,
    window: int,
    outside: int,
    config: dict[str, Any],
    also: dict[str, Step] | None = None,
) -> dict[str, Any]:
    """Warm `captured` up, profile `window` of its steps (one more as the profiler's own warm-up),
    then time each phase (its step, the steps it settles for first) `outside` steps outside the
    profiler. Writes OUTPUT/metrics.json and OUTPUT/<name>_rank0.pt.trace.json.gz. Each step of
    `also` (a phase's, run after its settling) is profiled the same way into OUTPUT/<phase>/, its
    window's walls under `window_<phase>`: the truth as the profiler slows it too."""
    output.mkdir(parents=True, exist_ok=True)
    walls: dict[str, list[float]] = {"warmup": [], "window": []}
    for _ in range(warmup):
        walls["warmup"].append(_wall(captured, cuda))
    walls["window"] = _profiled(captured, window, output / f"{name}_rank0.pt.trace.json.gz", cuda)
    for phase, step in (also or {}).items():
        for _ in range(phases[phase][1] if phase in phases else 2):
            step()
        trace = output / phase / f"{name}_rank0.pt.trace.json.gz"
        walls[f"window_{phase}"] = _profiled(step, window, trace, cuda)
    for phase, (step, settle) in phases.items():
        for _ in range(settle):
            step()
        walls[phase] = [_wall(step, cuda) for _ in range(outside)]

    def ms(k: str) -> float:
        return 1e3 * statistics.fmean(walls[k])

    out = {
        "workload": name,
        "config": config,
        "truth": {
            "window_wall_mean_ms": ms("window"),
            "window_wall_mean_ms_of": {k[7:]: ms(k) for k in walls if k.startswith("window_")},
            "outside_wall_ms": {k: ms(k) for k in phases},
            "outside_wall_median_ms": {k: 1e3 * statistics.median(walls[k]) for k in phases},
            "walls_s": walls,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "torch": torch.__version__,
        },
    }
    (output / "metrics.json").write_text(json.dumps(out, indent=1))
    print(
        json.dumps({"workload": name, "window_ms": ms("window"), **out["truth"]["outside_wall_ms"]})
    )
    return out
