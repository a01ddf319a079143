"""The idle-cause rules on a workload they were not built from (issue 35): a GRU loop with
planted pageable copies and `.item()` reads (bench/workloads/heldout/gru_copies_syncs.py),
recorded twice on one H200 after the rules were written (tests/data/heldout_h200/README.md);
and the projections (issue 41) on an MLP of many narrow blocks recorded after the graph and
pinned-copy rules were written (bench/workloads/heldout/mlp_graphs_copies.py, folder `mlp`).
What holds is asserted; what misses is a strict xfail with its figures, so the day it is fixed
the mark must go."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.presentation.advise import advise
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "heldout_h200"
RUNS = ["run1", "run2"]
TOLERANCE = 0.20


@functools.cache
def _run(run: str) -> tuple[Metrics, list[Advice]]:
    m = analyze_paths([unpacked(DATA / run)])
    return m, advise(m)


def _truth(run: str) -> dict[str, Any]:
    return dict(json.loads((DATA / run / "metrics.json").read_text())["truth"])


def _cause_ms(run: str, cause: str) -> float:
    return float(_truth(run)["causes"][cause]["ms_per_step"])


def _rounds_ratio(workload: str) -> float:
    """The mean over every round of the variant's mean step against the loop's as captured (B
    over A), from the rounds measured since without a profiler (`rounds/<workload>/`,
    bench/device/heldout_rounds.sh): the same loop's phases in turn, so a host whose speed
    drifts moves both alike."""
    ratios = [
        r["B"] / r["A"]
        for f in sorted((DATA / "rounds" / workload).glob("*.json"))
        for r in json.loads(f.read_text())["truth"]["rounds"]
    ]
    assert len(ratios) >= 10, workload
    return sum(ratios) / len(ratios)


@pytest.mark.parametrize("run", [*RUNS, "mlp"])
def test_no_input_is_claimed_for_a_loop_that_loads_no_data(run: str) -> None:
    m, found = _run(run)
    assert "data-loader" not in {a.rule for a in found}
    causes = m.ranks[0].idle_causes
    assert causes is not None
    inp = [c.ms_per_step for c in causes.causes if c.cause == "input"]
    assert sum(inp) < 0.05 * float(_truth(run)["window_wall_mean_ms"])


@pytest.mark.parametrize("run", RUNS)
def test_the_planted_copies_are_found(run: str) -> None:
    _, found = _run(run)
    assert "host-device-copies" in [a.rule for a in found[:2]], [(a.rule, a.cost_ms) for a in found]


def test_the_copies_come_first_where_the_truth_is_measured_well() -> None:
    """run2 measured its truth over 60 steps a phase (run1 over 10: its sync truth is negative)."""
    _, found = _run("run2")
    assert found[0].rule == "host-device-copies", [(a.rule, a.cost_ms) for a in found[:4]]


@pytest.mark.xfail(
    strict=True,
    reason="4.09 ms a step against 5.82 by the walls (-30 %): the copies' GPU time is counted, the"
    " host held around each pageable from_numpy().to() goes to host compute and unclassified",
)
def test_the_copies_cost_is_the_truth_within_20_pct() -> None:
    _, found = _run("run2")
    got = next(a for a in found if a.rule == "host-device-copies")
    want = _cause_ms("run2", "host-device-copies")
    assert got.cost_ms is not None and abs(got.cost_ms - want) <= TOLERANCE * want


@pytest.mark.xfail(
    strict=True,
    reason="8 .item() reads a step cost 0.89 ms by the walls; the sync class has 0.16 ms, under"
    " the 5 %-of-step threshold: no sync finding",
)
def test_the_planted_reads_are_a_sync_finding() -> None:
    _, found = _run("run2")
    assert "sync-overhead" in {a.rule for a in found}


def test_the_gru_rounds_measure_pinned_copies_alike() -> None:
    """The truth the GRU's pinned projection is held to: 35 rounds in 7 processes on three lent
    H200s, B/A 0.56-0.72 a round, 0.64-0.67 a process; the recordings' own single sequence
    said 0.79 (run1) and 0.69 (run2)."""
    assert 0.60 <= _rounds_ratio("gru") <= 0.70


def test_pinned_copies_give_back_the_copy_call_and_nothing_else() -> None:
    """The GRU's host time mark to mark in each step (`--segments`: the copy's call, forward
    launched, its read, backward, the reads and the optimizer; medians of 150 steps a phase
    outside the capture): pinned takes the copy's call from 4.6 ms to 0.03 and leaves the rest
    within 3 %, and the call is the walls' whole difference (A - B). The projection's mechanism:
    the call given back, the host's own work as it was."""
    seen = 0
    for f in sorted((DATA / "rounds" / "gru").glob("*.json")):
        t = json.loads(f.read_text())["truth"]
        seg = t.get("segments")
        if not seg:
            continue
        seen += 1
        pageable, pinned = seg["pageable"], seg["pinned"]
        call = pageable["copy call"] - pinned["copy call"]
        rest = [sum(v for k, v in d.items() if k != "copy call") for d in (pageable, pinned)]
        walls = t["outside_wall_ms"]
        saved = walls["A_pageable_checks"] - walls["B_pinned_checks"]
        assert call > 3.0 and abs(call - saved) <= 0.10 * saved, (f.name, call, saved)
        assert abs(rest[0] - rest[1]) <= 0.05 * rest[1], (f.name, rest)
    assert seen >= 2


@pytest.mark.xfail(
    strict=True,
    reason="projected 17.9 -> 13.5 ms (run2) and 24.5 -> 19.1 (run1) with pinned copies, against"
    " the window x 0.66, the rounds' B/A: 11.7 and 16.1 (+15 %, +19 %). The projection gives back"
    " the pageable call's whole 4.0-4.7 ms (the knob's copy is non_blocking), and the host's time"
    " mark to mark outside the capture says that is all pinned copies give back (the test"
    " below); but the capture slows the host's launching, not the copy's call, so the call is"
    " a smaller share of the captured step than of the step outside, and a ratio taken outside"
    " overstates what it removes from the window (the window less the 4.57 ms the segments"
    " measured: 13.3, +1.8 %). Against the recordings' own walls, one sequence each (0.69, 0.79):"
    " +8.7 %, -1.5 %; before a non_blocking copy was taken to free the host: 14.2 and 19.9",
)
@pytest.mark.parametrize("run", RUNS)
def test_the_pinned_projection_is_within_10_pct_of_the_walls(run: str) -> None:
    """The projection runs each copy at the link's pinned rate (nominal here: the export holds no
    pinned copy) and, the knob's copy being non_blocking, lets the host leave the copy's call
    at once (critical_path._async_calls); set against the captured window's step times the
    rounds' B/A."""
    _, found = _run(run)
    a = next(x for x in found if x.rule == "host-device-copies")
    assert a.projection is not None and a.projection.projected_ms is not None
    want = float(_truth(run)["window_wall_mean_ms"]) * _rounds_ratio("gru")
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.sentence(), want)


@pytest.mark.parametrize(("run", "widened"), [("run1", True), ("run2", False)])
def test_the_pinned_projections_range_reaches_the_gpus_own_time_where_the_host_gains(
    run: str, widened: bool
) -> None:
    """The GRU's walls hold no step after the capture, so no pace outside it is read. run1's
    pinned copies leave the host 64 % of the projected step beyond the GPU's own time, where its
    own step left 53 %: the range reaches down to the GPU's own time, says why, and holds the
    walls' step (the typical misses, above). run2's leave 45 % against 39 %, under a tenth
    more: its range stays the lever's, and the walls' step lies under it."""
    _, found = _run(run)
    a = next(x for x in found if x.rule == "host-device-copies")
    pr = a.projection
    assert pr is not None and pr.low_ms is not None and pr.high_ms is not None
    want = float(_truth(run)["window_wall_mean_ms"]) * _rounds_ratio("gru")
    said = pr.assumption or ""
    assert ("the range's low end" in said) is widened
    assert (pr.low_ms <= want <= pr.high_ms) is widened, (pr.sentence(), want)
    if widened:
        assert "no step after the capture" in said


# ---- the MLP of many narrow blocks (bench/workloads/heldout/mlp_graphs_copies.py), recorded
# after the replay's graph and pinned-copy rules were written (README.md); its truth is its own
# walls outside the capture: eager pageable (A), eager pinned (B), one CUDA graph a step (G)


def _mlp() -> tuple[Metrics, list[Advice], dict[str, Any]]:
    m, found = _run("mlp")
    return m, found, _truth("mlp")


def test_a_launch_bound_mlp_is_launch_bound_first() -> None:
    _, found, _ = _mlp()
    assert found[0].rule == "launch-bound", [(a.rule, a.cost_ms) for a in found[:4]]


def test_the_graph_projection_is_within_10_pct_of_the_graph_runs_walls() -> None:
    """Projected 26.6 -> 3.8 ms; the graph run's own steps took 3.99 (-4 %). Set against the
    graph run as it ran, not scaled by the capture's slowdown of the eager run (28 %): that
    slowdown is nsys's cost per launch, which a graph, one launch a step, does not pay (the
    graph pair of tests/data/causes_h200 was slowed 0.4 %), and the replay's 0.5 µs gaps leave
    it out too."""
    _, found, truth = _mlp()
    a = found[0]
    assert a.projection is not None and a.projection.projected_ms is not None
    want = float(truth["outside_wall_ms"]["G_graph_pageable"])
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.sentence(), want)


def test_the_pinned_projection_is_within_10_pct_of_the_walls_in_rounds() -> None:
    """Pinned batches bought little here (the launch-bound host hides most of the 8 MB copy):
    the recording's one sequence said nothing (B 18.8 ms against A 18.4), 15 rounds since say
    0.92x (0.77-1.06 a round). The projection, 26.6 -> 25.2 ms (0.95x), within 10 % of the
    window's step scaled by the rounds' B/A (24.3)."""
    _, found, truth = _mlp()
    a = next(x for x in found if x.rule == "host-device-copies")
    assert a.projection is not None and a.projection.projected_ms is not None
    want = float(truth["window_wall_mean_ms"]) * _rounds_ratio("mlp")
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.sentence(), want)


def test_the_mlp_rounds_say_pinned_batches_buy_little() -> None:
    assert 0.85 <= _rounds_ratio("mlp") <= 0.98


# ---- the Transformer encoder fed by a host-built DataLoader
# (bench/workloads/heldout/encoder_loader_precision.py), recorded after the replay's rules;
# its truth is its own walls outside the capture: fp32 at workers 0 (A), fp32 at 4 workers (W),
# bf16 autocast at workers 0 (P)


def test_the_encoders_data_loader_projection_is_within_10_pct_of_its_walls_with_workers() -> None:
    """Projected 305.8 -> 258.0 ms with 4 workers; the run with them took 260.3 (-0.9 %; the
    capture slowed the window 0.1 %)."""
    _, found = _run("encoder")
    a = next(x for x in found if x.rule == "data-loader")
    assert a.projection is not None and a.projection.projected_ms is not None
    want = float(_truth("encoder")["outside_wall_ms"]["W_fp32_workers"])
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.sentence(), want)


def test_the_encoders_fp32_finding_comes_first() -> None:
    _, found = _run("encoder")
    assert found[0].rule == "fp32-kernels", [(a.rule, a.cost_ms) for a in found[:3]]


def test_the_encoders_bf16_projection_is_within_10_pct_of_its_walls() -> None:
    """Projected 305.8 -> 94.6 ms with bf16; the run took 86.7 (+9.1 %). Its fused attention
    runs in fp32 (fmha_cutlass*_f32, 33 ms a step): taken at the other kernels' 1.6x, with the
    GEMMs at 12x, the projection said 104.7 (+21 %); by class (critical_path.AUTOCAST_X: GEMMs
    15x, fp32 attention 10x, the rest 1.0x) it meets the run."""
    _, found = _run("encoder")
    a = next(x for x in found if x.rule == "fp32-kernels")
    assert a.projection is not None and a.projection.projected_ms is not None
    want = float(_truth("encoder")["outside_wall_ms"]["P_bf16_workers0"])
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.sentence(), want)
