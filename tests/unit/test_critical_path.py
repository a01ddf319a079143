"""Projections (issue 41 item 1): each finding's knob replayed on the step's dependency structure.

Two kinds of evidence:
- HELD OUT, real: pairs of GPU recordings committed before the projections were written
  (tests/data: the same workload with and without the knob, each its own job). The finding's
  projection on the first is set against the step gh-run measures on the second; the pairs are
  those of the table in docs/metrics.md ("Projections checked"). Pairs whose capture shows
  fewer than two whole steps say "no honest projection" instead.
- STAND-INS (tests/fixtures/standin_loop.py, not nsys output): the same loop written with the
  knob off and on. Their knob effects are the replay's own assumptions (pinned copies at the
  link's nominal rate, 15x bf16 GEMMs, 1 µs graph gaps), so they check the replay's mechanics
  (what waits for what, the syncs, overlap), not the knobs' constants: the real pairs check
  those.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from orchestrator.analysis.families import critical_path as cp
from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.presentation.advise import advise, with_findings
from orchestrator.analysis.presentation.verdict import verdict
from orchestrator.runs.trial import measured_step_ms
from tests.fixtures.recordings import unpacked
from tests.fixtures.standin_loop import Knobs, write

DATA = Path(__file__).resolve().parents[1] / "data"
WITHIN = 0.10


def _metrics(folder: Path) -> Metrics:
    packed = any(p.name.endswith(".xz") for p in folder.iterdir())
    return analyze_paths([unpacked(folder) if packed else folder])


def _finding(m: Metrics, rule: str) -> Advice:
    found = [a for a in advise(m) if a.rule == rule]
    assert found, [a.rule for a in advise(m)]
    return found[0]


def _step_ms(m: Metrics) -> float:
    st = m.ranks[0].steps
    assert st is not None and st.count
    return st.mean_ns / 1e6


REAL_PAIRS = [
    # (without the knob, with it, the finding whose knob it is)
    ("unannotated/nsys/sft_w0", "unannotated/nsys/sft_w4", "data-loader"),
    ("unannotated/kineto/sft_w0", "unannotated/kineto/sft_w4", "data-loader"),
    ("unannotated/nsys/convnet_w0", "unannotated/nsys/convnet_w4", "data-loader"),
    ("gpu_metrics/fp32", "gpu_metrics/bf16", "fp32-kernels"),
    pytest.param(
        "traces/fp32", "traces/baseline", "fp32-kernels",
        marks=pytest.mark.xfail(strict=True, reason=(
            "H100 Kineto, two-step captures, workers 0 in both. Predicted 159.5 ms outside the"
            " capture, measured 244.2 there (-35 %): the fp32 run's own steps (700.9 ms median"
            " outside, 770.6 inside, 638.9 of them the GPU's own) say the host's part keeps"
            " 0.47x of its capture time outside it; the bf16 run's did not shrink as much. In"
            " the capture's frame the projection read 229.8 (-5.9 % against 244.2) only because"
            " the replay also missed the capture's own bf16 step (313.7) by -27 %: two errors"
            " that cancelled")),
    ),
    pytest.param(
        "unannotated/kineto/convnet_w0", "unannotated/kineto/convnet_w4", "data-loader",
        marks=pytest.mark.xfail(strict=True, reason=(
            "predicted 44.9 ms, measured 37.1 (+21 %): under Kineto the workers-0 steps take"
            " 94.3 ms against nsys's 83.5 for the same run; the profiler's cost differs"
            " between the two runs")),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("before", "after", "rule"), REAL_PAIRS)
def test_the_projection_meets_the_step_measured_with_the_knob(
    before: str, after: str, rule: str
) -> None:
    """Measured as `gh-run try` scores a try (`trial.measured_step_ms`): the mean traced step,
    or the workload's own steps outside the capture where the capture slowed the run > 10 %."""
    a = _finding(_metrics(DATA / before), rule)
    assert a.projection is not None and a.projection.projected_ms is not None
    got = measured_step_ms(_metrics(DATA / after), a.rank)
    assert got is not None
    assert abs(a.projection.projected_ms - got) <= WITHIN * got, (a.projection, got)
    assert a.projection.low_ms is not None and a.projection.high_ms is not None
    assert a.projection.low_ms <= a.projection.projected_ms <= a.projection.high_ms


@pytest.mark.parametrize("rec", ["traces/baseline", "nsys_h100/baseline"])
def test_a_capture_of_two_steps_has_no_honest_projection_of_its_boundary_wait(rec: str) -> None:
    """Two steps: the span holds one step boundary (the first wait lies before it), so a wait
    at the boundaries cannot be put per step; the projection says so rather than guess."""
    a = _finding(_metrics(DATA / rec), "data-loader")
    assert a.projection is not None and a.projection.projected_ms is None
    assert "whole step" in (a.projection.none_because or "")
    assert a.projection.sentence().startswith("no honest projection")


def test_the_replay_without_changes_gives_back_the_trace() -> None:
    """Identity: no cost removed, every op ends where it ended (the real sft export: syncs,
    a copy each step, launches ahead of the GPU and behind it)."""
    captured: list[cp.StepGraph] = []
    real = cp.project

    def spy(g: cp.StepGraph, *args: object) -> object:
        captured.append(g)
        return real(g, *args)  # type: ignore[arg-type]

    cp.project = spy  # type: ignore[assignment]
    try:
        _metrics(DATA / "unannotated/nsys/sft_w0")
    finally:
        cp.project = real  # type: ignore[assignment]
    g = captured[0]
    ends = cp.replay(g, np.zeros(g.gap_at.size, np.int64), np.zeros(g.start.size, np.int64))
    assert np.array_equal(ends, np.maximum.accumulate(g.start + g.excl))


STANDIN_PAIRS = [
    ("data-loader", Knobs(num_workers=0, load_ms=12), Knobs(num_workers=4, load_ms=12)),
    (
        "host-compute",
        Knobs(load_ms=0.5, host_ms=40, host_every=3, steps=9),
        Knobs(load_ms=0.5, host_ms=0, steps=9),
    ),
    ("fp32-kernels", Knobs(load_ms=0.5, precision="fp32"), Knobs(load_ms=0.5, precision="bf16")),
    (
        "launch-bound",
        Knobs(load_ms=0.5, tiny=3000, layers=4),
        Knobs(load_ms=0.5, tiny=3000, layers=4, cuda_graphs=True),
    ),
    (
        "host-device-copies",
        Knobs(load_ms=0.5, batch_mb=400, pin_memory=False, layers=4),
        Knobs(load_ms=0.5, batch_mb=400, pin_memory=True, layers=4),
    ),
]


@pytest.mark.parametrize(("rule", "off", "on"), STANDIN_PAIRS, ids=[p[0] for p in STANDIN_PAIRS])
def test_stand_in_pairs_the_replay_removes_what_the_knob_removes(
    tmp_path: Path, rule: str, off: Knobs, on: Knobs
) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    m_off = analyze_paths([write(tmp_path / "off" / "loop.sqlite", off)])
    m_on = analyze_paths([write(tmp_path / "on" / "loop.sqlite", on)])
    first = advise(m_off)[0]
    assert first.rule == rule
    assert first.projection is not None and first.projection.projected_ms is not None
    got = _step_ms(m_on)
    assert abs(first.projection.projected_ms - got) <= WITHIN * got, (first.projection, got)
    # what the views show: analyze --json's findings and the verdict carry the same line
    js = with_findings(m_off).findings[0]
    assert js.projected_ms == first.projection.projected_ms
    assert js.projection == first.projection.sentence()
    assert verdict(m_off, advise(m_off)).findings[0].projection == first.projection.sentence()


def test_a_gpu_speed_up_buys_nothing_where_the_host_bounds_the_step(tmp_path: Path) -> None:
    """Overlap is not counted twice: a launch-bound loop (µs kernels launched 8 µs apart) with
    fp32 GEMMs that take a small part of the step. Making the GEMMs 12x faster leaves the host
    launching the tiny kernels as slowly as before, so the projection gives back at most the
    GEMMs' own exposed time, never more, and the launch-bound projection stays the larger."""
    path = write(tmp_path / "loop.sqlite", Knobs(load_ms=0.5, precision="fp32", tiny=3000,
                                                  layers=2, gemm_us=100))  # fmt: skip
    m = analyze_paths([path])
    r = m.ranks[0]
    assert r.projections is not None
    levers = {x.lever: x for x in r.projections.levers}
    fp32, launch = levers["fp32-gemms"], levers["launch-bound"]
    # the fp32 GEMMs' kernel time per step: 2 x 2 layers x 100 µs
    assert fp32.removed_ms <= 0.4 + 0.05
    assert launch.removed_ms > fp32.removed_ms


def test_findings_without_a_lever_say_why() -> None:
    from orchestrator.analysis.presentation import projections

    m = _metrics(DATA / "unannotated/nsys/sft_w0")
    p = projections.project("idle-unclassified", m.ranks[0], m.settings)
    assert p is not None and p.projected_ms is None
    assert p.sentence().startswith("no honest projection: no cause outweighs")
    p = projections.project("unified-memory", m.ranks[0], m.settings)
    assert p is not None and "bounds the gain" in p.sentence()


def test_the_replay_over_part_of_a_long_capture_gives_the_same_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long capture is replayed over its middle whole steps only (bounded cost, bench/
    bench_projections.py): on a stand-in of 16 like steps, 4 of them give back per step what
    all of them give (within the first, partial step's share: the span opens inside it)."""
    path = write(tmp_path / "loop.sqlite", Knobs(num_workers=0, load_ms=12, steps=16))

    def gain() -> float:
        r = analyze_paths([path]).ranks[0]
        assert r.projections is not None
        return next(x.removed_ms for x in r.projections.levers if x.lever == "input")

    full = gain()
    monkeypatch.setattr(cp, "MAX_PERIODS", 4)
    part = gain()
    assert abs(part - full) <= full / 15 + 0.01, (part, full)


def test_a_graph_also_shortens_the_gpus_own_waits_between_queued_operations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ml_eager (tests/data/causes_h200) runs ~3,900 µs operations a step; ~700 of them were
    launched before the one ahead of them ended and still started ~5 µs after it (the launch's
    own latency: the host launched just in time), 3.2 ms a step on the GPU's side, which the
    host-side replay cannot move. A CUDA graph replaces those gaps with its node-to-node one:
    cutting them takes more than a millisecond off the replayed step (10.6 -> 9.3 ms; the graph
    run measures 8.7), never below the GPU's own busy time, and a cut of nothing changes
    nothing."""
    seen: list[cp.StepGraph] = []
    real = cp.project
    monkeypatch.setattr(cp, "project", lambda g, *a, **k: seen.append(g) or real(g, *a, **k))
    _metrics(DATA / "causes_h200" / "ml_eager")
    (g,) = seen
    t = g.window
    periods = t.size - 1
    inside = (g.start >= t[0]) & (g.start < t[-1])
    assert (g.queued_wait[inside] > 0).sum() / periods > 500
    rem = cp._removal(g, "launch-bound", 500.0)
    zero = np.zeros(g.start.size, dtype=np.int64)

    def step_ms(waits: object) -> float:
        t2 = cp.moved(g, cp.replay(g, rem, zero, True, waits), zero, t)
        return float(t2[-1] - t2[0]) / periods / 1e6

    kept = step_ms(None)
    assert step_ms(zero) == kept
    shortened = step_ms(np.maximum(g.queued_wait - 500, 0))
    busy = float(g.excl[inside].sum()) / periods / 1e6
    assert kept - shortened > 1.0, (kept, shortened)
    assert shortened >= busy, (shortened, busy)


def test_a_graph_keeps_a_long_launch_free_wait_nothing_explains() -> None:
    """A CUDA graph replays launches, not the host's own code: of a gap's unexplained wait, the
    stretch before the launch that ends it in which the host neither launched nor sat in a sync
    stays, beyond GRAPH_HOST_NS (a tokeniser, I/O); a launch or a sync's release inside the
    stretch shortens it, and launch-bound, host-compute and sync claims go as before."""
    ms = 1_000_000
    gap_s = np.array([0, 100 * ms, 200 * ms], dtype=np.int64)
    at = np.array([30 * ms, 130 * ms, 200 * ms + ms // 2], dtype=np.int64)
    launches = np.array([-5 * ms, 129 * ms], dtype=np.int64)  # one 1 ms before the second end
    releases = np.array([10 * ms], dtype=np.int64)  # a sync returning inside the first gap
    keeps = cp._host_stretch(gap_s, at, launches, releases)
    assert keeps.tolist() == [30 * ms - 10 * ms - cp.GRAPH_HOST_NS, 0, 0]
    n = gap_s.size
    zero = np.zeros(n, dtype=np.int64)
    removable = {c: zero.copy() for c in (*cp.IDLE_LEVERS, *cp.OTHER_CLAIMS)}
    removable["unclassified"] = np.array([30 * ms, 30 * ms, ms // 2], dtype=np.int64)
    removable["launch-bound"] = np.array([0, 0, 0], dtype=np.int64)
    removable["host-compute"] = np.array([2 * ms, 0, 0], dtype=np.int64)
    none = np.zeros(0)
    g = cp.StepGraph(
        none, none, none, none, none, at, np.arange(n), removable, zero, zero, {}, none, none,
        none, graph_keeps=keeps,
    )  # fmt: skip
    removed = cp._removal(g, "launch-bound", 0.0)
    # the first gap keeps its 19 ms stretch; the others, launched or short, go whole
    assert removed.tolist() == [32 * ms - keeps[0], 30 * ms, ms // 2]
    without = cp._removal(cp.StepGraph(**{**g.__dict__, "graph_keeps": None}), "launch-bound", 0.0)
    assert without.tolist() == [32 * ms, 30 * ms, ms // 2]


@pytest.mark.parametrize("rec", ["causes_h200/dl_host", "heldout_h200/kineto/resnet_pinned"])
def test_no_projected_step_is_shorter_than_the_gpus_own_time_it_leaves(rec: str) -> None:
    """The projected step is the mean step less what the replay takes off the span's whole
    steps; where those run longer than the mean (dl_host: its window holds two of its six
    numpy steps, 24.7 ms a step against the run's 22.2; resnet_pinned's window 54.8 against
    52.6), that subtraction reached under the GPU's own time for a CUDA graph (dl_host 4.5 ms,
    its GPU's own 7.1). Every lever's step, low and high end stay at or above the GPU's own
    time each leaves, and the graph's, the step the span's replay collapses to it, is it."""
    m = _metrics(DATA / rec)
    p = m.ranks[0].projections
    assert p is not None and p.levers
    for x in p.levers:
        assert x.gpu_ms is not None
        assert x.step_ms >= x.gpu_ms - 1e-3, (x.lever, x.step_ms, x.gpu_ms)
        assert x.low_ms >= 0 and x.low_ms <= x.step_ms <= x.high_ms
    graph = next(x for x in p.levers if x.lever == "launch-bound")
    assert graph.gpu_ms is not None and graph.step_ms == pytest.approx(graph.gpu_ms, abs=1e-3)
