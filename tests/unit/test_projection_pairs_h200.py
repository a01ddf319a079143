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
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.advise import advise
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
    pytest.param("dl_host", "dl_clean", "host-compute", marks=_miss(
        "predicted 8.7 ms, measured 7.7 outside the capture (+12.3 %; the capture slowed"
        " dl_clean 15 %), 8.9 inside it (-2.6 %)")),
    ("dl_backward", "dl_clean", "host-compute"),
    ("dl_fp32", "dl_clean", "fp32-kernels"),
    ("hf_w0", "hf_w4", "data-loader"),
    pytest.param("img_input_w0", "img_input_w6", "data-loader", marks=_miss(
        "predicted 16.3 ms: 4 workers (the knob from none), each loading a batch in the main"
        " thread's 65.4 ms (128 items of 0.4 ms sleep), deliver one every 16.3 ms once their 8"
        " prefetched batches are used. The pair's run had 6 workers (10.9 ms a batch once"
        " settled) and ended 14 steps in, before its 12 prefetched batches ran out: its 3.5-5.5"
        " ms steps (4.0 outside the capture, 6.2 inside) are the prefetch, the replay's 5.4 ms"
        " (the range's low end), not the step a training run settles at")),
    # predicted 9.3 ms against 8.7: the graph shortens the GPU's own ~0.9 µs gaps between queued
    # kernels too; the graph run's steps are the profiler window's (one graph launch a step)
    ("ml_eager", "ml_graphs", "launch-bound"),
    pytest.param("hf_fp32", "hf_w4", "fp32-kernels", marks=_miss(
        "predicted 47.6 ms, measured 36.3 outside the capture (+31 %; 55.1 inside, -14 %: the"
        " capture slowed hf_w4 51 %). The GPU's bf16 step is projected near its kernels (29.6 ms"
        " a step class by class, the variant ran 33.0), but the replay keeps the"
        " host's pace under nsys: 47 ms a step to launch 1,919 calls, which outside the capture"
        " the host runs in under 36 ms; no trace of the fp32 run says by how much")),
    pytest.param("img_pageable", "img_pinned", "host-device-copies", marks=_miss(
        "predicted 6.5 ms, measured 4.4 outside the capture (+48 %), 6.3 inside it (+3 %; the"
        " capture slowed img_pinned 31 %, img_pageable not at all): the copies at the link's"
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
