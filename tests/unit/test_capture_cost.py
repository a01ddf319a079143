"""`capture_cost`: launch waits ranked by their cost outside the capture, only where the run's
own walls measured the capture's slowdown (tests/data/causes_h200/hf_w4: 54.8 ms median inside,
36.3 outside, 15.1 ms of launch waits in the trace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import RankMetrics
from orchestrator.analysis.presentation import capture_cost
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"


@pytest.fixture(scope="module")
def rank() -> RankMetrics:
    return analyze_paths([unpacked(DATA / "hf_w4")]).ranks[0]


def _with(r: RankMetrics, **change: object) -> RankMetrics:
    assert r.profiler_overhead is not None
    return r.model_copy(update={"profiler_overhead": r.profiler_overhead.model_copy(update=change)})


def test_the_slowdown_is_the_median_inside_less_outside(rank: RankMetrics) -> None:
    po = rank.profiler_overhead
    assert po is not None and po.window_step_ms is not None and po.outside_step_ms is not None
    got = capture_cost.slowdown_ms(rank)
    assert got == (po.window_step_ms - po.outside_step_ms, po.window_step_ms, po.outside_step_ms)
    cost, said = capture_cost.launch_cost(rank, 30.0) or (None, "")
    assert cost == pytest.approx(30.0 - got[0]) and "about" in said
    assert capture_cost.launch_cost(rank, 10.0) == (0.0, capture_cost.launch_cost(rank, 5.0)[1])


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"outside_after": 0}, "only steps before the window: they may be warming up"),
        ({"outside_steps": 2}, "too few steps outside"),
        ({"outside_step_ms": 60.0}, "the capture did not slow the steps"),
        ({"window_step_ms": None}, "no walls inside the window"),
    ],
)
def test_no_cost_outside_without_the_runs_own_walls(
    rank: RankMetrics, change: dict[str, object], why: str
) -> None:
    changed = _with(rank, **change)
    assert capture_cost.slowdown_ms(changed) is None, why
    assert capture_cost.launch_cost(changed, 15.0) is None, why
