"""What the planted-cause workloads (issue 35 item 7) share: the capture window, the per-step
clock and the truth file. Nothing here trains; each script in this folder has its own model, data
and loop.

The truth each run writes (`--output`/metrics.json, in the fields gh-run reads from a workload's
metrics.json, plus `truth`):
- `step_times_s`: every step's wall (loop top to the end of the step's own work, the step's
  logging included), `step_start_unix_ns`, `cuda_profiler_window` [S, E] (steps S..E-1 were
  captured), `median_step_time_s`, `config` (the switches, with `num_workers` and `precision`
  where the script has them);
- `truth`: per planted cause, what the script measured of it in each step (`per_step`, ms, by
  step index) and its mean over the captured steps (`window_ms_per_step`), the steps it made
  slow (`slow_steps`), and the walls inside and outside the window (`window_wall_ms`,
  `outside_wall_ms`: the profiler's own cost shows between them).

The clocks are the script's own (`time.perf_counter`, CUDA events), read after each step's
closing synchronisation, so a figure never waits on the GPU it measures.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


def window(text: str) -> tuple[int, int]:
    """`S:E` -> (S, E), E > S >= 0."""
    s, e = (int(x) for x in text.split(":", 1))
    if not 0 <= s < e:
        raise argparse.ArgumentTypeError(f"{text!r}: want S:E with 0 <= S < E")
    return s, e


def common_args(p: argparse.ArgumentParser, steps: int, win: str) -> None:
    p.add_argument("--device", default="cuda", help="cuda or cpu (a dry run: no window)")
    p.add_argument("--steps", type=int, default=steps, help="steps in all")
    p.add_argument(
        "--cuda-profiler-window",
        type=window,
        default=window(win),
        metavar="S:E",
        help="cudaProfilerStart before step S, cudaProfilerStop after step E-1",
    )
    p.add_argument("--output", default=os.environ.get("GH_RUN_ARTIFACTS", "."))
    p.add_argument("--seed", type=int, default=0)


def _cudart() -> Any:
    """The CUDA runtime torch loaded (cudaProfilerStart/Stop), or None without CUDA."""
    try:
        return torch.cuda.cudart()
    except Exception:
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return None


@dataclass
class Clock:
    """Per-step walls and measured parts, the window's start and stop."""

    device: torch.device
    win: tuple[int, int]
    walls: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    parts: dict[str, dict[int, float]] = field(default_factory=dict)
    _t0: float = 0.0

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def begin(self, step: int) -> None:
        if step == self.win[0] and self.device.type == "cuda":
            self.sync()
            _cudart().cudaProfilerStart()
        self.starts.append(time.time_ns())
        self._t0 = time.perf_counter()

    def end(self, step: int) -> None:
        """The step's wall: from `begin` to here (the caller has synchronised already)."""
        self.walls.append(time.perf_counter() - self._t0)
        if step == self.win[1] - 1 and self.device.type == "cuda":
            self.sync()
            _cudart().cudaProfilerStop()

    def add(self, name: str, step: int, ms: float) -> None:
        d = self.parts.setdefault(name, {})
        d[step] = d.get(step, 0.0) + ms

    @contextmanager
    def host(self, name: str, step: int) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, step, (time.perf_counter() - t) * 1e3)

    def in_window(self, step: int) -> bool:
        return self.win[0] <= step < self.win[1]


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def write(
    clock: Clock,
    out: str,
    name: str,
    config: dict[str, Any],
    planted: dict[str, str],
    extra: dict[str, Any] | None = None,
) -> Path:
    """metrics.json: walls, window, config and the truth (module docstring). `planted`: cause
    -> the part (`Clock.parts` key) that measures it."""
    s, e = clock.win
    win_steps = [i for i in range(len(clock.walls)) if s <= i < e]
    outside = [i for i in range(len(clock.walls)) if i >= 2 and not s <= i < e]
    wall_ms = [w * 1e3 for w in clock.walls]
    truth: dict[str, Any] = {
        "window_steps": win_steps,
        "window_wall_ms": [wall_ms[i] for i in win_steps],
        "outside_wall_ms": {str(i): wall_ms[i] for i in outside},
        "window_wall_mean_ms": _mean([wall_ms[i] for i in win_steps]),
        "outside_wall_median_ms": statistics.median([wall_ms[i] for i in outside])
        if outside
        else None,
        "causes": {},
    }
    for cause, part in planted.items():
        per = clock.parts.get(part, {})
        vals = [per.get(i, 0.0) for i in win_steps]
        slow = [i for i in win_steps if per.get(i, 0.0) > 0.0]
        truth["causes"][cause] = {
            "measured_by": part,
            "per_step_ms": {str(i): per[i] for i in sorted(per)},
            "window_ms_per_step": _mean(vals),
            "slow_steps": slow if len(slow) < len(win_steps) else "every",
        }
    for part, per in clock.parts.items():
        if part not in planted.values():
            truth.setdefault("measured", {})[part] = {str(i): per[i] for i in sorted(per)}
    if extra:
        truth.update(extra)
    doc = {
        "workload": name,
        "annotated": False,
        "config": {**config, "cuda_profiler_window": [s, e]},
        "cuda_profiler_window": [s, e],
        "steps": len(clock.walls),
        "step_times_s": clock.walls,
        "step_start_unix_ns": clock.starts,
        "median_step_time_s": statistics.median(clock.walls[2:] or clock.walls),
        "truth": truth,
    }
    path = Path(out) / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def spend(ms: float, work: Any) -> int:
    """Run `work()` until `ms` of wall time have passed (at least once); the count."""
    deadline = time.perf_counter() + ms / 1e3
    n = 0
    while True:
        work()
        n += 1
        if time.perf_counter() >= deadline:
            return n
