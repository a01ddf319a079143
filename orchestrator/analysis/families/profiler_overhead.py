"""The profiler's own cost (issue 35 item 6), two ways:

- recorded: the overhead records nsys keeps for the profiled process (`nsys_overhead`:
  `PROFILER_OVERHEAD`, `CUPTI_ACTIVITY_KIND_OVERHEAD`), their union inside the GPU span, in ns and
  percent of the span, by name;
- measured: where the workload's metrics.json gives every step's wall and the capture window
  (`cuda_profiler_window` S:E, or torch.profiler's `profile_steps` for a Kineto trace, top level
  or under `config`), the median step inside the window
  against the median outside it (the first `WARMUP` steps and the step after the window, which
  pays the profiler's flush, left out): the slowdown the capture caused, which includes what no
  table records (CUPTI's callbacks on every launch, the OS-runtime interposers, sampling); and
  the mean step outside, what the run's steps settle at (`trial.measured_step_ms`).
Either over `NOTE_PCT` puts a note on the entry: figures taken inside the capture are that much
slower than the run outside it.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from orchestrator.analysis.metrics import ProfilerOverhead
from orchestrator.analysis.readers import nsys_overhead
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals

NOTE_PCT = 10.0
WARMUP = 2  # first steps of a run left out of the outside median (compilation, autotuning)
TOP = 5
NOTE_STARTS = ("the capture slowed", "nsys recorded")  # how `note` begins


def recorded(tl: T.RankTimeline, lo: int, hi: int) -> ProfilerOverhead | None:
    """The overhead nsys recorded for this rank's process inside [lo, hi); None for a Kineto
    trace, an export without the tables, or no span."""
    if tl.source.kind != "nsys-sqlite" or hi <= lo:
        return None
    rows = nsys_overhead.read(tl.source.path, tl.pid, lo, hi)
    if rows is None:
        return None
    by: dict[str, int] = {}
    for s, e, n in rows:
        by[n] = by.get(n, 0) + (e - s)
    if rows:
        ms, me = merge_intervals(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
        union = int((me - ms).sum())
    else:
        union = 0
    top = dict(sorted(by.items(), key=lambda kv: -kv[1])[:TOP])
    return ProfilerOverhead(
        recorded_ns=union, recorded_pct_of_span=100 * union / (hi - lo), recorded_by_name=top
    )


def window_of(data: dict[str, Any], kineto: bool = False) -> tuple[int, int] | None:
    """The capture window S:E a workload's metrics.json names: `cuda_profiler_window` for an
    nsys capture, torch.profiler's `profile_steps` for a Kineto trace (top level or under
    `config`)."""
    keys = ("profile_steps", "cuda_profiler_window") if kineto else ("cuda_profiler_window",)
    for key in keys:
        for d in (data, data.get("config")):
            w = d.get(key) if isinstance(d, dict) else None
            if isinstance(w, list) and len(w) == 2 and all(isinstance(x, int) for x in w):
                s, e = int(w[0]), int(w[1])
                if e > s >= 0:
                    return s, e
    return None


def measured(
    found: ProfilerOverhead | None, times: list[float], window: tuple[int, int] | None
) -> ProfilerOverhead | None:
    """`found` with the workload's own comparison added (module docstring)."""
    if window is None or not times:
        return found
    s, e = window
    inside = times[s:e]
    # the step right after the window pays the profiler's flush (a Kineto trace is written in
    # its prof.step(), nsys ends its collection there): neither inside nor outside
    outside = [t for i, t in enumerate(times) if i >= WARMUP and not s <= i <= e]
    if not inside or not outside:
        return found
    # medians to say whether the capture slowed the steps (a loop with a periodic slow step, a
    # window that caught one more of them than outside, is not slowed); the mean outside for
    # what the run's steps settle at (a loader whose workers deliver in bursts stalls one step
    # in N: that stall is the step's cost, which a median would drop)
    win, out = statistics.median(inside), statistics.median(outside)
    base = found or ProfilerOverhead()
    return base.model_copy(
        update={
            "window_step_ms": win * 1e3,
            "outside_step_ms": out * 1e3,
            "outside_mean_ms": statistics.fmean(outside) * 1e3,
            "outside_steps": len(outside),
            "outside_after": sum(1 for i in range(e + 1, len(times)) if i >= WARMUP),
            "slowdown_pct": 100 * (win / out - 1) if out > 0 else None,
        }
    )


def note(p: ProfilerOverhead | None) -> str | None:
    """The entry's note when the capture cost more than NOTE_PCT."""
    if p is None:
        return None
    parts = []
    if p.slowdown_pct is not None and p.slowdown_pct > NOTE_PCT:
        parts.append(
            f"the capture slowed the workload's steps by {p.slowdown_pct:.0f} % (its own median"
            f" step: {p.window_step_ms:.2f} ms inside the capture, {p.outside_step_ms:.2f} ms"
            " outside)"
        )
    if p.recorded_pct_of_span > NOTE_PCT:
        parts.append(
            f"nsys recorded {p.recorded_ns / 1e6:.1f} ms of its own overhead in the GPU span"
            f" ({p.recorded_pct_of_span:.0f} %)"
        )
    if not parts:
        return None
    return (
        "; ".join(parts) + ": times taken inside the capture (launch gaps, host windows) carry"
        " the profiler's cost"
    )
