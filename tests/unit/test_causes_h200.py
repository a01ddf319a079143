"""The right cause, every time (issue 35 item 7), on REAL recordings of workloads with planted,
known causes: bench/workloads/causes/ (images.py, many_layers.py, dataless.py, hf_llama.py),
recorded on one H200 through `gh-run submit` under Nsight Systems 2024.2.3 (no NVTX), kept in
tests/data/causes_h200/ with the truth each workload measured about itself (metrics.json
`truth`; README there).

Asserted per planted variant: gh-run's first finding names the planted cause, its cost per step
within 20 % of the truth; where nothing of a class was planted, no finding of it (no input for a
workload that loads no data). The truth is the workload's own clock where it measures the cause
(the data wait around `next()`, the host work's wall, the launch overhead as the eager step less
the same step as a CUDA graph), else the pair's walls (the same script with the knob turned: an
fp32 run less its bf16 twin, a hook's run less the clean one), each named below.

Where gh-run misses on these recordings the test is marked xfail(strict=True) with the figures:
it fails the suite the day the miss is fixed without the mark being removed, and the miss is in
the causes README's table, not hidden.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.presentation.advise import advise
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"
TOLERANCE = 0.20


@functools.cache
def _run(variant: str) -> tuple[Metrics, list[Advice]]:
    m = analyze_paths([unpacked(DATA / variant)])
    return m, advise(m)


def _truth(variant: str) -> dict[str, Any]:
    return dict(json.loads((DATA / variant / "metrics.json").read_text())["truth"])


def _planted_ms(variant: str, cause: str) -> float:
    return float(_truth(variant)["causes"][cause]["window_ms_per_step"])


def _wall_ms(variant: str) -> float:
    return float(_truth(variant)["window_wall_mean_ms"])


def _pair_ms(without: str, with_knob: str) -> float:
    """What the knob gave back: the window's mean step of the run without it less the run with
    it (the workload's own walls)."""
    return _wall_ms(without) - _wall_ms(with_knob)


# variant -> (the rule gh-run must name first, the truth in ms per step, where the truth is from)
PLANTED: dict[str, tuple[str, float, str]] = {
    "img_input_w0": ("data-loader", _planted_ms("img_input_w0", "input"), "wait in next()"),
    "hf_w0": ("data-loader", _planted_ms("hf_w0", "input"), "wait in next()"),
    "dl_host": ("host-compute", _planted_ms("dl_host", "host-compute"), "the numpy work's wall"),
    "dl_backward": (
        "host-compute",
        _pair_ms("dl_backward", "dl_clean"),
        "walls: dl_backward less dl_clean (the hook less the backward queued before it)",
    ),
    "dl_fp32": ("fp32-kernels", _pair_ms("dl_fp32", "dl_clean"), "walls: fp32 less bf16"),
    "hf_fp32": ("fp32-kernels", _pair_ms("hf_fp32", "hf_w4"), "walls: fp32 less bf16"),
    "ml_eager": (
        "launch-bound",
        _planted_ms("ml_eager", "launch-bound"),
        "each eager step less the same step as a CUDA graph",
    ),
    "img_pageable": (
        "host-device-copies",
        _pair_ms("img_pageable", "img_pinned"),
        "walls: pageable less pinned",
    ),
    "ml_sync": ("sync-overhead", _planted_ms("ml_sync", "sync"), "sync steps less the others"),
}

# known misses on these recordings (the causes README's table has the figures); none left.
# ml_sync's sync cost (0.82 ms a step against 0.93) is every host sync's gone at once
# (`sync_refill`): the planted `.item()` checks and the step-end `loss.item()` of every step
# alike; the truth (sync steps less the others) leaves the latter out and holds the checks' own
# kernels (abs, mean: GPU work, no idle), which gh-run does not count.
FIRST_MISSES: dict[str, str] = {}
COST_MISSES: dict[str, str] = {}


def _xfail(misses: dict[str, str], variant: str) -> Any:
    if variant in misses:
        return pytest.param(variant, marks=pytest.mark.xfail(reason=misses[variant], strict=True))
    return variant


@pytest.mark.parametrize("variant", [_xfail(FIRST_MISSES, v) for v in PLANTED])
def test_the_planted_cause_is_the_first_finding(variant: str) -> None:
    rule = PLANTED[variant][0]
    _, found = _run(variant)
    assert found, f"{variant}: no finding"
    assert found[0].rule == rule, [(a.rule, a.cost_ms) for a in found[:4]]


@pytest.mark.parametrize("variant", [_xfail(COST_MISSES, v) for v in PLANTED])
def test_its_cost_per_step_is_the_truth_within_20_pct(variant: str) -> None:
    rule, want, source = PLANTED[variant]
    _, found = _run(variant)
    got = [a for a in found if a.rule == rule]
    assert got, f"{variant}: no {rule} finding"
    # the trace's own figure: a launch-bound finding is ranked by its cost outside the
    # capture (test_launch_waits_are_ranked_by_their_cost_outside_the_capture), the truths
    # here are the window's
    cost = got[0].evidence.get("launch-bound_ms_per_step", got[0].cost_ms)
    assert cost is not None and got[0].cost_basis == "per step"
    assert abs(cost - want) <= TOLERANCE * want, (
        f"{variant}: {cost:.2f} ms vs {want:.2f} ({source})"
    )


# workloads that load no data: the token ids or inputs are drawn on the GPU or by one CPU op
# (dl_clean draws its token ids on the host before each copy: 0.6-0.7 ms a step of the loop's
# own host work recurs before the batch's copy, with nothing of loading in it)
DATALESS = ["dl_host", "dl_backward", "dl_fp32", "ml_eager", "ml_graphs", "ml_sync", "dl_clean"]


@pytest.mark.parametrize("variant", DATALESS)
def test_no_input_is_claimed_where_no_data_is_loaded(variant: str) -> None:
    m, found = _run(variant)
    assert "data-loader" not in {a.rule for a in found}
    causes = m.ranks[0].idle_causes
    assert causes is not None
    step = m.ranks[0].steps
    inp = [c for c in causes.causes if c.cause == "input"]
    # what input there is (a batch drawn on the host) costs under 5 % of a step
    if step is not None and inp:
        assert inp[0].ms_per_step < 0.05 * _wall_ms(variant)


def test_host_compute_is_not_input_and_its_period_is_found() -> None:
    """dl_host: 40 ms of numpy after the optimizer of every 3rd step (the window's steps 6 and
    9): host compute, slow every 3rd step, and never data loading."""
    m, found = _run("dl_host")
    assert found[0].rule == "host-compute"
    steps = m.ranks[0].steps
    assert steps is not None and steps.pattern is not None
    p = steps.pattern
    assert p.every == 3 and p.cause == "host-compute"
    assert len(p.slow_steps) == len(_truth("dl_host")["causes"]["host-compute"]["slow_steps"])
    # each slow step's extra is the planted 40 ms (the workload's own clock: 40.0-40.4 ms)
    planted = _truth("dl_host")["causes"]["host-compute"]["per_step_ms"]
    slow = [planted[str(s)] for s in _truth("dl_host")["causes"]["host-compute"]["slow_steps"]]
    assert abs(p.cause_ms - sum(slow) / len(slow)) <= TOLERANCE * sum(slow) / len(slow)


def test_backward_hook_is_host_compute_not_input() -> None:
    """dl_backward: numpy on autograd's thread; the main thread waits in backward(): host
    compute (the hook), not input and not a sync."""
    _, found = _run("dl_backward")
    rules = [a.rule for a in found]
    assert rules[0] == "host-compute"
    assert "data-loader" not in rules and "sync-overhead" not in rules


def test_launch_bound_leads_on_the_eager_loop_and_not_on_its_graph() -> None:
    """ml_eager: µs kernels, launch-bound first (before precision: the step is mostly gaps);
    ml_graphs, the same step as one CUDA graph (7.5x faster by the workload's walls): its
    launch-bound idle is under a tenth of the eager loop's over the same window of steps."""
    m_eager, eager = _run("ml_eager")
    assert eager[0].rule == "launch-bound"
    rules = [a.rule for a in eager]
    assert rules.index("launch-bound") < rules.index("fp32-kernels")
    m_graphs, _ = _run("ml_graphs")

    def launch_ns(m: Metrics) -> int:
        causes = m.ranks[0].idle_causes
        assert causes is not None
        return sum(c.total_ns for c in causes.causes if c.cause == "launch-bound")

    assert launch_ns(m_graphs) < 0.1 * launch_ns(m_eager)


def test_input_goes_when_workers_load_it() -> None:
    """The input pairs: with workers the data-loader finding is gone or costs under 10 % of what
    it cost at workers 0 (img_input_w6: the workload measured 0.11 ms of wait; hf_w4: none)."""
    for w0, wn in (("img_input_w0", "img_input_w6"), ("hf_w0", "hf_w4")):
        _, before = _run(w0)
        _, after = _run(wn)
        cost0 = next(a.cost_ms for a in before if a.rule == "data-loader")
        assert cost0 is not None
        assert all((a.cost_ms or 0.0) < 0.1 * cost0 for a in after if a.rule == "data-loader")


def test_cuda_graph_launches_are_gpu_time() -> None:
    """ml_graphs replays the step as one CUDA graph, which nsys traces whole by default
    (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, no kernel rows of its own): gh-run counts each graph
    launch as GPU work (kernel time equals plain SQL over both tables), so the GPU is busy, not
    idle all along for a cause nobody could name."""
    m, found = _run("ml_graphs")
    r = m.ranks[0]
    db = sqlite3.connect(unpacked(DATA / "ml_graphs") / "ml_graphs.sqlite")
    try:
        (k,) = db.execute("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        (g, n) = db.execute(
            "SELECT sum(end - start), count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        ).fetchone()
    finally:
        db.close()
    assert n > 0 and r.activity.kernel_ns == k + g
    assert r.busy_pct > 90
    assert "idle-unclassified" not in {a.rule for a in found}


def test_steps_are_found_where_some_steps_sync_and_the_optimizer_bursts_thrice() -> None:
    """ml_sync: Adam (`capturable`, foreach) runs three multi-tensor bursts a step, split by a
    kernel per parameter, and every 2nd step adds `.item()` checks (no repeating kernel
    sequence): the optimizer's bursts joined close each step, and each step found is the
    workload's own wall (its clock around the step, within 5 %)."""
    m, _ = _run("ml_sync")
    steps = m.ranks[0].steps
    assert steps is not None and steps.rule == "optimizer", m.ranks[0].no_steps
    t = json.loads((DATA / "ml_sync" / "metrics.json").read_text())
    lo, hi = t["config"]["cuda_profiler_window"]
    walls = [1e9 * x for x in t["step_times_s"][lo:hi]]
    assert len(steps.durations_ns) == len(walls)
    for got, want in zip(steps.durations_ns, walls, strict=True):
        assert abs(got - want) <= 0.05 * want, (steps.durations_ns, walls)


def _outside_median(variant: str) -> float:
    """The workload's median step outside the capture, as gh-run's `profiler_overhead` takes it:
    the first two steps (warm-up) and the step after the window (it pays the profiler's flush)
    left out."""
    t = _truth(variant)
    after = max(t["window_steps"]) + 1
    walls = [v for k, v in t["outside_wall_ms"].items() if int(k) >= 2 and int(k) != after]
    return float(statistics.median(walls))


def test_launch_waits_are_ranked_by_their_cost_outside_the_capture() -> None:
    """A capture's cost lands on every launch (`capture_cost`): ml_eager's launch waits, 56.8 ms
    a step in the trace, are ranked by 41.6, the trace's less the 15.2 ms its steps ran faster
    outside the capture; outside it, the eager loop's median step less the graph loop's (the
    launch waits' truth there) is 49.7 ms: within 20 %. hf_w4 (4 workers, bf16) shows 15.1 ms of
    launch waits and ran 18.5 ms a step faster outside the capture, where its step (36.3 ms)
    is within 1.2 ms of its GPU's own time: ranked at nothing, and its sentence says why."""
    _, found = _run("ml_eager")
    lb = next(a for a in found if a.rule == "launch-bound")
    assert found[0].rule == "launch-bound"
    inside = lb.evidence["launch-bound_ms_per_step"]
    assert lb.cost_ms is not None and lb.cost_ms < inside
    want = _outside_median("ml_eager") - _outside_median("ml_graphs")
    assert abs(lb.cost_ms - want) <= TOLERANCE * want, (lb.cost_ms, want)
    assert "ms a step (the figure it is ranked by)" in lb.message
    m, found = _run("hf_w4")
    lb = next(a for a in found if a.rule == "launch-bound")
    assert lb.cost_ms == 0.0 and lb.evidence["launch-bound_ms_per_step"] > 10
    assert "the capture's own cost explains whole" in lb.message
    po, p = m.ranks[0].profiler_overhead, m.ranks[0].projections
    assert po is not None and po.outside_step_ms is not None and p is not None and p.gpu_ms
    assert po.outside_step_ms - p.gpu_ms < 0.05 * po.outside_step_ms
