"""A training script nobody here wrote, recorded on an H200 (tests/data/heldout_h200/README.md,
"external_imagenet/"): PyTorch's ImageNet example (pytorch/examples imagenet/main.py, BSD-3) on
its own synthetic data (`--dummy`: each image made and converted on the host), ResNet-18, batch
256, run unchanged under torch.profiler by bench/workloads/external/kineto_wrap.py with its own
`-j` (DataLoader workers) at 0, 4 and 8, in turn, three rounds of 60 steps. Recorded after every
rule and projection it is checked against but the loader's steady state, which it prompted.
What holds is asserted; what misses is a strict xfail with its figures."""

from __future__ import annotations

import functools
import json
import lzma
import statistics
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.families import profiler_overhead
from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import Metrics, ProfilerOverhead
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.presentation.advise import advise
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "heldout_h200" / "external_imagenet"
TRACE = "imagenet_j0_rank0.pt.trace.json.xz"


@functools.cache
def _run() -> tuple[Metrics, list[Advice]]:
    m = analyze_paths([unpacked(DATA / "j0")])
    return m, advise(m)


def _walls(rnd: int, workers: int) -> ProfilerOverhead:
    """gh-run's own reading of one run's step walls (`profiler_overhead.measured`): its median
    step in and outside the profiled window, and its mean step outside it."""
    d: dict[str, Any] = json.loads((DATA / "rounds" / f"r{rnd}" / f"j{workers}" /
                                    "metrics.json").read_text())  # fmt: skip
    got = profiler_overhead.measured(None, d["step_times_s"], profiler_overhead.window_of(d, True))
    assert got is not None and got.outside_mean_ms is not None
    return got


def _loader_ranges_ms() -> list[float]:
    """The DataLoader's own `enumerate(DataLoader)#...__next__` ranges in the trace, ms."""
    with lzma.open(DATA / "j0" / TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    name = "enumerate(DataLoader)"
    return [e["dur"] / 1e3 for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith(name)]  # fmt: skip


def test_the_input_wait_a_step_is_the_loading_of_one_batch() -> None:
    """The GPU waits for input once a step, the main thread fetching the next batch: within
    10 % of the DataLoader's own ranges a step (600.4 ms against 626.3) and below the step
    (652.4). The span of this capture opens on GPU work launched before its first step (that
    step's optimizer, still running when the profiler's window opened), so its first step's
    load is one of the span's step boundaries too; counted as work inside a step besides, the
    wait read 747.6 ms a step, more than the step (677.0 of 634.8 on the 6-step trace)."""
    m, _ = _run()
    r = m.ranks[0]
    assert r.steps is not None and r.idle_causes is not None
    step = r.steps.mean_ns / 1e6
    wait = sum(c.ms_per_step for c in r.idle_causes.causes if c.cause == "input")
    ranges = statistics.fmean(_loader_ranges_ms())
    assert wait < step
    assert abs(wait - ranges) <= 0.10 * ranges, (wait, ranges)


def test_the_loader_knob_projects_the_workers_steady_state() -> None:
    """Data loading first, knob 4 workers (from none); the projection is their steady state:
    each loading a batch in what the main thread took outside the profiler (the run's own steps
    there: 480.5 ms a step, 446.9 median against 701.8 inside it), they deliver one every 105.5
    ms, which the rest of the step (58.3 ms, the replay with the loading gone) cannot hide. It
    was the replay's step, "4 workers keep up", while a projection from no workers took the
    workers to keep up; the runs with 4 workers settled at 140-150 ms a step outside it."""
    _, found = _run()
    a = found[0]
    assert a.rule == "data-loader" and "num_workers=4" in a.knob
    p = a.projection
    assert p is not None and p.projected_ms is not None and p.low_ms is not None
    assert p.projected_ms == p.high_ms and p.projected_ms > 1.5 * p.low_ms
    assert "deliver one every" in p.sentence() and "outside the capture" in p.sentence()
    po = found[0].projection
    assert po is not None and po.step_ms is not None
    r = _run()[0].ranks[0].profiler_overhead
    assert r is not None and po.step_ms == r.outside_mean_ms


def test_a_loader_that_stalls_one_step_in_four_is_measured_by_its_mean() -> None:
    """With 4 workers the steps come in bursts: three of about 52 ms (the GPU's), then a stall
    of 300-600 ms while the workers catch up. The median step outside the profiler (54-74 ms)
    drops the stalls; the mean (140-150 ms) is what the run settles at, and what `try` scores
    (`trial.measured_step_ms`: the workload's own mean outside the capture where the traced
    window's mean differs from it by over 10 %; this run's 6 profiled steps held one stall)."""
    for rnd in (1, 2, 3):
        w = _walls(rnd, 4)
        assert w.outside_step_ms is not None and w.outside_mean_ms is not None
        assert w.outside_mean_ms > 1.8 * w.outside_step_ms, (rnd, w)


def _truth_ms(base_ms: float, workers: int) -> float:
    """The run with `workers` at the analysed run's scale, as `try --rounds` reads a pair: the
    rounds' mean ratio of the two runs' mean steps outside the profiler (the profiler slowed the
    workers-0 run 3-57 %), times the analysed step."""
    ratios = [_walls(r, workers).outside_mean_ms / _walls(r, 0).outside_mean_ms  # type: ignore[operator]
              for r in (1, 2, 3)]  # fmt: skip
    return base_ms * statistics.fmean(ratios)


@pytest.mark.xfail(strict=True, reason=(
    "projected 480.5 -> 105.5 ms outside the profiler (the run's own steps: 446.9 ms median"
    " outside, 701.8 inside, 49.6 of them the GPU's own; 4 workers each loading a batch as fast"
    " as the main thread did there), the runs with 4 workers took 0.292, 0.262 and 0.241x the"
    " runs without (mean 0.265x: 127.3 ms): -17 %. The workers' steady state ran 1.06-1.31x the"
    " same round's main-thread loading (a second recording, not kept: 1.02 and 1.07x; there the"
    " main thread's loading on one intra-op thread, as a worker's, was 1.13-1.34x slower), and"
    " between rounds the runs without workers moved from 480 to 598 ms a step. One `try` (its"
    " run's mean outside the capture) reads 140.4: -25 %. In the capture's frame the projection"
    " read 147.1 (-15 %, +4.8 % against that try): the profiler's 57 % on the main thread's"
    " loading hid the workers' slower pace. Before the steady state was the typical, the"
    " projection said 63.8 ms (-63 %)"))  # fmt: skip
def test_the_projection_meets_the_runs_with_four_workers() -> None:
    _, found = _run()
    p = found[0].projection
    assert p is not None and p.projected_ms is not None and p.step_ms is not None
    want = _truth_ms(p.step_ms, 4)
    assert abs(p.projected_ms - want) <= 0.10 * want, (p.projected_ms, want)


# ---- the same example with a vision transformer (`-a vit_b_16 -b 128`, -j 0 and 4, three
# rounds of 40 steps: tests/data/heldout_h200/README.md, "external_vit/"), recorded after every
# rule above: its GPU step (fp32, 336 ms) longer than the main thread's loading of a batch, so 4
# workers keep up where ResNet-18's could not

VIT = DATA.parent / "external_vit"


@functools.cache
def _vit() -> tuple[Metrics, list[Advice]]:
    m = analyze_paths([unpacked(VIT / "j0")])
    return m, advise(m)


def _vit_walls(rnd: int, workers: int) -> tuple[ProfilerOverhead, list[float]]:
    d: dict[str, Any] = json.loads((VIT / "rounds" / f"r{rnd}" / f"j{workers}" /
                                    "metrics.json").read_text())  # fmt: skip
    window = profiler_overhead.window_of(d, True)
    got = profiler_overhead.measured(None, d["step_times_s"], window)
    assert got is not None and got.outside_mean_ms is not None and window is not None
    return got, [1e3 * s for s in d["step_times_s"][window[0] : window[1]]]


def test_a_vision_transformers_loader_projection_meets_the_runs_with_four_workers() -> None:
    """fp32 GEMMs first (258 ms a step, no run of the example in bf16 checks it: the example has
    no flag for autocast), the input wait second, knob 4 workers. Its projection, taken outside
    the profiler at the pace the run's own steps kept there (459.9 ms median outside, 503.4
    inside): 473.9 -> 338.7 ms, the workers keeping up (one batch every 33.8 ms). Against the
    rounds (4 workers took 0.70, 0.72 and 0.81x the runs without, their mean outside the
    profiler: 352.5 ms at this scale) -3.9 %; against the first round's run with 4 workers as
    `try` reads it (its traced window, 0.5 % slower than its steps outside) -1.2 %."""
    m, found = _vit()
    assert [a.rule for a in found[:2]] == ["fp32-kernels", "data-loader"]
    a = found[1]
    assert "num_workers=4" in a.knob
    p = a.projection
    assert p is not None and p.projected_ms is not None and p.step_ms is not None
    po = m.ranks[0].profiler_overhead
    assert po is not None and p.step_ms == po.outside_mean_ms
    assert "keep up" in p.sentence() and "outside the capture" in p.sentence()
    ratios = []
    for rnd in (1, 2, 3):
        with_, without = _vit_walls(rnd, 4)[0], _vit_walls(rnd, 0)[0]
        ratios.append(with_.outside_mean_ms / without.outside_mean_ms)  # type: ignore[operator]
    rounds = p.step_ms * statistics.fmean(ratios)
    first, window = _vit_walls(1, 4)
    assert first.slowdown_pct is not None and abs(first.slowdown_pct) < 10
    tried = statistics.fmean(window)
    for want in (rounds, tried):
        assert abs(p.projected_ms - want) <= 0.10 * want, (p.projected_ms, want)
