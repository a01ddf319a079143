"""Projections against the planted-cause pairs recorded on an H200 (issue 41 "done means"):
tests/data/causes_h200 (branch `cause`, bench/workloads/causes/pairs.md), each pair the same
workload without and with a knob, recorded through `gh-run submit` under nsys 2024.2.3. The
finding's projection on the run without the knob is set against the step of the run with it,
as gh-run measures it (`trial.measured_step_ms`: the mean traced step, or, where gh-run finds
that the capture slowed that run by more than 10 %, the workload's own steps outside the
capture). Within 10 %: asserted. The pairs the projection misses are xfail(strict) with their
figures and why (docs/metrics.md, "Projections checked"): they fail loudly the day they pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import LeverProjection, Metrics
from orchestrator.analysis.presentation.advice import Advice
from orchestrator.analysis.presentation.advise import advise
from orchestrator.analysis.presentation.projections import LEVERS, host_pace, pace_withheld
from orchestrator.runs.trial import measured_step_ms
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"
_CACHE: dict[str, Metrics] = {}


def _metrics(name: str) -> Metrics:
    if name not in _CACHE:
        _CACHE[name] = analyze_paths([unpacked(DATA / name)])
    return _CACHE[name]


def _miss(why: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=why)


PAIRS = [
    # 22.2 -> 8.7 ms in the capture's frame (+12.3 %); outside it, at the host pace dl_host's
    # own steps kept there (`projections.host_pace`), 7.85 (+1.5 %)
    ("dl_host", "dl_clean", "host-compute"),
    ("dl_backward", "dl_clean", "host-compute"),
    ("dl_fp32", "dl_clean", "fp32-kernels"),
    ("hf_w0", "hf_w4", "data-loader"),
    pytest.param("img_input_w0", "img_input_w6", "data-loader", marks=_miss(
        "predicted 16.3 ms: 4 workers (the knob from none), each loading a batch in the main"
        " thread's 65.4 ms (128 items of 0.4 ms sleep), deliver one every 16.3 ms once their 8"
        " prefetched batches are used. The pair's run had 6 workers (10.9 ms a batch once"
        " settled) and ended 14 steps in, before its 12 prefetched batches ran out: its 3.5-5.5"
        " ms steps (4.0 outside the capture, 6.2 inside) are the prefetch, the replay's 5.4 ms,"
        " not the step a training run settles at; the range, down to the GPU's own 1.9 (the run's"
        " loading, sleeps, hid the capture's cost), holds them")),
    # predicted 9.3 ms against 8.7: the graph shortens the GPU's own ~0.9 µs gaps between queued
    # kernels too; the graph run's steps are the profiler window's (one graph launch a step)
    ("ml_eager", "ml_graphs", "launch-bound"),
    pytest.param("hf_fp32", "hf_w4", "fp32-kernels", marks=_miss(
        "predicted 47.6 ms, measured 36.3 outside the capture (+31 %; 55.1 inside, -14 %: the"
        " capture slowed hf_w4 51 %). The GPU's bf16 step is projected near its kernels (29.6 ms"
        " a step class by class, the variant ran 33.0), but the replay keeps the host's pace"
        " under nsys: 47 ms a step to launch 1,919 calls, which outside the capture the host"
        " runs in under 36 ms. The fp32 run's own steps cannot say by how much: the GPU waits"
        " 2.7 ms of its 172.9 (1.6 %, under projections.MIN_HOST_SHARE); read off that sliver"
        " anyway, the pace outside (0.60x) gives 41.1 (+13 %)")),
    pytest.param("img_pageable", "img_pinned", "host-device-copies", marks=_miss(
        "predicted 6.5 ms, measured 4.4 outside the capture (+46 %), 6.3 inside it (+3 %; the"
        " capture slowed img_pinned 31 %, img_pageable not at all, so its steps give no pace"
        " outside it): the copies at the link's"
        " pinned rate, their host side and, non_blocking, their whole call go; the 1.5-2.9 ms of"
        " host work after each step's 4-byte loss read stays. 7.4 (+67 %) while a pinned copy"
        " held the host until it ended; 5.6 while the replay gave pinned memory the host's work"
        " after any copy, which pin_memory=True's batch hand-off may well shorten, but no"
        " evidence says so")),
]  # fmt: skip


@pytest.mark.parametrize(("before", "after", "rule"), PAIRS)
def test_projection_within_ten_percent_of_the_run_with_the_knob(
    before: str, after: str, rule: str
) -> None:
    m = _metrics(before)
    a = next((x for x in advise(m) if x.rule == rule), None)
    assert a is not None and a.projection is not None and a.projection.projected_ms is not None
    got = measured_step_ms(_metrics(after), a.rank)
    assert got is not None
    err = (a.projection.projected_ms - got) / got
    assert abs(err) <= 0.10, (a.projection.sentence(), got, f"{100 * err:+.1f} %")


def test_pinned_copies_claim_nothing_where_the_copies_are_labels_and_loss_reads() -> None:
    """dl_host copies its labels and reads its loss (bytes a step) and runs numpy on the host
    every third step: pinning the copies cannot touch the numpy. The replay once gave pinned
    memory the host work after any copy (22.2 -> 5.4 ms); a copy's staging explains no more
    than its bytes at 1 GB/s now (critical_path.STAGING_FLOOR_BPS)."""
    p = _metrics("dl_host").ranks[0].projections
    assert p is not None
    pinned = next(x.step_ms for x in p.levers if x.lever == "copies")
    assert abs(pinned - p.base_ms) <= 0.01 * p.base_ms


def test_a_rounds_two_steps_are_read_in_one_frame() -> None:
    """`try --rounds` reads each round's two runs in one frame: the mean steps outside the
    capture for both where the capture slowed either by more than 10 % (dl_clean: 15 %) and
    both measured them, else both traced means (dl_fp32 against itself: 0 %)."""
    from orchestrator.runs.trial import paired_steps

    host, clean, fp32 = _metrics("dl_host"), _metrics("dl_clean"), _metrics("dl_fp32")
    po_h, po_c = host.ranks[0].profiler_overhead, clean.ranks[0].profiler_overhead
    assert po_h is not None and po_c is not None
    assert paired_steps(host, clean, 0) == (po_h.outside_mean_ms, po_c.outside_mean_ms)
    s = fp32.ranks[0].steps
    assert s is not None
    assert paired_steps(fp32, fp32, 0) == (s.mean_ns / 1e6, s.mean_ns / 1e6)


def _advice(name: str, rule: str) -> Advice:
    return next(a for a in advise(_metrics(name)) if a.rule == rule)


def test_a_projection_is_taken_outside_the_capture_where_the_run_measured_its_pace() -> None:
    """dl_host's own steps ran 7.9 ms (median) outside the capture and 8.7 inside, 7.3 of them
    the GPU's own: outside, the host's part of a step kept that share of its captured length.
    The projection starts from the run's own mean step outside and shrinks the host's part of
    the projected step by that share; the GPU's own time stays, and the line says so."""
    r = _metrics("dl_host").ranks[0]
    po, p = r.profiler_overhead, r.projections
    assert po is not None and p is not None and p.gpu_ms is not None
    assert po.window_step_ms is not None and po.outside_step_ms is not None
    pace = host_pace(r)
    assert pace is not None
    k, step, why = pace
    want = (po.outside_step_ms - p.gpu_ms) / (po.window_step_ms - p.gpu_ms)
    assert 0 < k < 1 and k == pytest.approx(want)
    assert step == po.outside_mean_ms and "outside the capture" in why
    lever = next(x for x in p.levers if x.lever == "host-compute")
    assert lever.gpu_ms is not None and lever.gpu_ms < lever.step_ms
    pr = _advice("dl_host", "host-compute").projection
    assert pr is not None and pr.projected_ms is not None and pr.step_ms == step
    want_ms = lever.gpu_ms + k * (lever.step_ms - lever.gpu_ms)
    assert pr.projected_ms == pytest.approx(want_ms, abs=0.01)
    assert why in (pr.assumption or "")


def test_a_graph_projection_stays_in_the_capture_frame() -> None:
    """ml_eager's capture slowed its steps too, but one CUDA graph a step leaves no host pace in
    the step: its projection is the replay's, from the traced step."""
    r = _metrics("ml_eager").ranks[0]
    assert host_pace(r) is not None
    pr = _advice("ml_eager", "launch-bound").projection
    p = r.projections
    assert pr is not None and p is not None
    lever = next(x for x in p.levers if x.lever == "launch-bound")
    assert pr.step_ms == p.base_ms and pr.projected_ms == round(lever.step_ms, 2)
    assert "outside the capture" not in (pr.assumption or "")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"outside_after": 0}, "only steps before the window: they may be warming up"),
        ({"outside_steps": 2}, "too few steps outside"),
        ({"outside_step_ms": 9.0}, "the capture did not slow the steps"),
        ({"window_step_ms": None}, "no walls inside the window"),
        ({"outside_step_ms": 7.0}, "faster outside than the GPU's own time inside"),
    ],
)
def test_no_pace_outside_the_capture_without_the_runs_own_evidence(
    change: dict[str, object], why: str
) -> None:
    r = _metrics("dl_host").ranks[0]
    assert r.profiler_overhead is not None
    po = r.profiler_overhead.model_copy(update=change)
    changed = r.model_copy(update={"profiler_overhead": po})
    assert host_pace(changed) is None, why
    said = pace_withheld(changed)
    assert said and pace_withheld(r) is None, why


def test_a_knob_that_leaves_the_host_more_of_the_step_reaches_down_to_the_gpus_own_time() -> None:
    """hf_fp32: bf16 leaves the host 34 % of the projected step beyond the GPU's own time, where
    the run's own step left it 2 %; the run, GPU-bound, gives no pace outside the capture. So the
    typical stays the capture's, the range reaches down to the GPU's own time (a capture's cost
    lands on the host, which the run's step carried less of than the projected one), and the
    line says why the run could not say how far. The variant's step outside the capture, which
    the typical misses by +31 % (the xfail above), lies in that range."""
    r = _metrics("hf_fp32").ranks[0]
    assert host_pace(r) is None
    lever, p = _lever("hf_fp32", "fp32-kernels"), r.projections
    assert lever.gpu_ms is not None and p is not None and p.gpu_ms is not None
    assert (lever.step_ms - lever.gpu_ms) / lever.step_ms > 0.3 > 0.05 > 1 - p.gpu_ms / p.base_ms
    pr = _advice("hf_fp32", "fp32-kernels").projection
    assert pr is not None and pr.projected_ms == round(lever.step_ms, 2)
    assert pr.low_ms == round(lever.gpu_ms, 2) < lever.low_ms
    said = pr.assumption or ""
    assert "its step is the GPU's" in said and "the range's low end" in said
    assert "(34 %, against 2 % of the run's own step)" in said
    got = measured_step_ms(_metrics("hf_w4"), 0)
    assert got is not None and pr.high_ms is not None
    assert pr.low_ms <= got <= pr.high_ms and abs(pr.projected_ms - got) > 0.1 * got


def _lever(name: str, rule: str) -> LeverProjection:
    p = _metrics(name).ranks[0].projections
    assert p is not None
    return next(x for x in p.levers if x.lever == LEVERS[rule])


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("dl_host", "host-compute"),
        ("ml_eager", "launch-bound"),
        ("dl_fp32", "fp32-kernels"),
        ("img_pageable", "host-compute"),
        ("img_input_w0", "host-device-copies"),
    ],
)
def test_a_pace_a_graph_or_a_step_no_more_host_bound_keeps_its_range(name: str, rule: str) -> None:
    """Taken outside the capture at the run's own pace (dl_host), a CUDA graph's (ml_eager), a
    knob that leaves the host under a tenth more of the step than the run's own step did
    (dl_fp32: 1 % -> 10 %, a run the capture slowed, if barely), a knob that leaves the waits
    of a run the capture did not slow where they were (img_pageable's host compute, 1.8 of its
    8.1 ms; img_input_w0's pinned copies, which buy nothing): the range is the lever's, in its
    frame, and no clause is added."""
    lever = _lever(name, rule)
    pace = host_pace(_metrics(name).ranks[0]) if rule != "launch-bound" else None
    low = lever.low_ms
    if pace is not None and lever.gpu_ms is not None:
        low = lever.gpu_ms + pace[0] * (low - lever.gpu_ms)
    pr = _advice(name, rule).projection
    assert pr is not None and pr.low_ms == pytest.approx(round(low, 2), abs=0.006)
    assert "the range's low end" not in (pr.assumption or "")


@pytest.mark.parametrize(
    ("name", "rule", "variant"),
    [("img_pageable", "host-device-copies", "img_pinned"), ("img_input_w0", "data-loader", None)],
)
def test_a_run_the_capture_did_not_slow_sets_the_knobs_host_part_against_none(
    name: str, rule: str, variant: str | None
) -> None:
    """img_pageable's own steps ran no faster outside the capture (18.2 ms median) than inside
    (17.6): its host's part, 46 % of the step, was the pageable copies' calls, which a
    capture's callbacks do not slow. Pinned copies leave the host 35 % of the projected step,
    launches the capture does slow (the pinned run: 31 %). The run's share is no measure of the
    capture's cost, so the projected host part is set against none: the range reaches down to
    the GPU's own time, and the pinned run's 4.4 ms outside the capture, which the typical
    misses (the xfail above), lies in it. The knob takes away the waits that hid the capture's
    cost (11.1 ms of the 8.1 beyond the GPU's own time: half or more, `UNCOVERS`). Likewise
    img_input_w0's workers, which take away its main thread's loading (sleeps the capture did
    not slow). With the run's steps slower inside the capture than outside, the old comparison
    holds: 35 % against 46 % adds nothing."""
    pr = _advice(name, rule).projection
    lever = _lever(name, rule)
    assert pr is not None and lever.gpu_ms is not None
    assert pr.low_ms == round(lever.gpu_ms, 2) < lever.low_ms
    said = pr.assumption or ""
    assert "while the run's own steps carried none of the capture's cost" in said
    assert "the capture did not slow its steps" in said
    if variant is not None:
        got = measured_step_ms(_metrics(variant), 0)
        assert got is not None and pr.high_ms is not None
        assert pr.low_ms <= got <= pr.high_ms
    r = _metrics(name).ranks[0]
    po = r.profiler_overhead
    assert po is not None and po.window_step_ms is not None
    slowed = po.model_copy(update={"outside_step_ms": 0.97 * po.window_step_ms})
    changed = _metrics(name).model_copy(
        update={"ranks": [r.model_copy(update={"profiler_overhead": slowed})]}
    )
    again = next(a for a in advise(changed) if a.rule == rule).projection
    assert again is not None
    assert "carried none of the capture's cost" not in (again.assumption or "")


def test_hidden_communication_keeps_its_frame_and_its_range() -> None:
    """The DDP recording's low-overlap projection (tests/data/gpu_metrics/ddp, rank 1): hiding
    three quarters of the communication leaves the projected step 297.7 ms with the GPU's own
    time 133.2, the rest the waits for the other rank, not the host's part: no pace and no
    reach down to the GPU's own time (`projections.IN_CAPTURE_FRAME`)."""
    m = analyze_paths(
        [unpacked(Path(__file__).resolve().parents[1] / "data" / "gpu_metrics" / "ddp")]
    )
    found = [a for a in advise(m) if a.rule == "low-overlap"]
    assert found
    for a in found:
        p = m.ranks[a.rank].projections
        assert p is not None and a.projection is not None
        lever = next(x for x in p.levers if x.lever == "comm-overlap")
        assert lever.gpu_ms is not None and lever.step_ms - lever.gpu_ms > 0.3 * lever.step_ms
        assert a.projection.low_ms == round(lever.low_ms, 2)
        assert "the range's low end" not in (a.projection.assumption or "")
        assert "outside the capture" not in (a.projection.assumption or "")
