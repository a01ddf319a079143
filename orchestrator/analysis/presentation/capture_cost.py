"""What the capture itself cost the launches (issue 41, found on held-out recordings): a
profiler's cost lands on every CUDA call the host makes (nsys's and CUPTI's callbacks, the PyTorch
profiler's record of each operator), so a step the host bounds by its launches runs slower inside
the capture than outside it, and the GPU's waits for launches that the trace shows are partly the
profiler's own. Where the workload's own walls measured the steps inside the capture and outside
it (`profiler_overhead`: over `MIN_OUTSIDE` steps outside, some after the window), the launches'
cost outside it is the launch-bound idle less that slowdown (no less than nothing): a step that
the capture slowed by more than its launch waits is no launch-bound step outside it.

On causes_h200: `hf_w4` (4 DataLoader workers, bf16) shows 15.1 ms a step of launch waits and
ran 18.5 ms a step faster outside the capture, where its step (36.3 ms) is its GPU's (35.1);
`ml_eager`, launch-bound by design, keeps 41.6 of its 56.8. The finding still fires on what the
trace shows, and its sentence says both figures; it is ranked, and costed for the verdict, by the
cost outside the capture.
"""

from __future__ import annotations

from orchestrator.analysis.metrics import RankMetrics

MIN_OUTSIDE = 3  # the workload's steps outside the capture its walls must hold


def walls(r: RankMetrics) -> tuple[float, float] | None:
    """(median step inside the capture, outside it) in ms, where the run's own walls measured
    both, over MIN_OUTSIDE steps outside some of which came after the window (steps only before
    it may still be warming up); else None. The evidence this module and the projections'
    frames (`projections._capture_free`) rest on."""
    po = r.profiler_overhead
    if po is None or po.window_step_ms is None or po.outside_step_ms is None:
        return None
    if (po.outside_steps or 0) < MIN_OUTSIDE or not po.outside_after:
        return None
    return po.window_step_ms, po.outside_step_ms


def slowdown_ms(r: RankMetrics) -> tuple[float, float, float] | None:
    """(slowdown, median inside, median outside) of the run's steps, in ms, where their walls
    say (`walls`) and the capture slowed them; else None."""
    found = walls(r)
    if found is None:
        return None
    win, out = found
    return (win - out, win, out) if win > out else None


def launch_cost(r: RankMetrics, cost_ms: float) -> tuple[float, str] | None:
    """(cost outside the capture, the clause that says so) of `cost_ms` of launch waits a
    step; None where the run's walls do not measure the capture's slowdown."""
    slowed = slowdown_ms(r)
    if slowed is None:
        return None
    x, win, out = slowed
    outside = max(cost_ms - x, 0.0)
    if outside == 0.0:
        tail = (
            "which the capture's own cost explains whole: outside it the launches may not"
            " bound the step"
        )
    else:
        tail = f"so outside it the launch waits cost about {outside:.1f} ms a step"
    return outside, (
        f"; the capture slowed the run's steps {x:.1f} ms (median {win:.1f} inside, {out:.1f}"
        f" outside), a cost that lands on every launch, {tail} (the figure it is ranked by)"
    )
