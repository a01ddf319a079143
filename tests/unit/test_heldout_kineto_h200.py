"""Three workloads written after the rules and the replay, recorded under the PyTorch profiler on
one H200 (tests/data/heldout_h200/README.md, "kineto/"): a Hugging Face GPT-2 fed by a Python
tokeniser on the main thread, a ResNet-18 in fp32 under PyTorch's defaults (cuDNN's TF32), and a
Transformer classifier whose loop reads its metrics a dozen times a step. Each measured its own
truth, inside the profiler's window (the variant profiled too) and outside it, the whole
sequence three times in turn (the recording before this one ran it once, and a host that slowed
between two windows read as a +20-25 % miss). What holds is asserted; what misses is a strict
xfail with its figures."""

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

DATA = Path(__file__).resolve().parents[1] / "data" / "heldout_h200" / "kineto"


@functools.cache
def _run(name: str) -> tuple[Metrics, list[Advice]]:
    m = analyze_paths([unpacked(DATA / name)])
    return m, advise(m)


def _truth(name: str) -> dict[str, Any]:
    return dict(json.loads((DATA / name / "metrics.json").read_text())["truth"])


def _lever(m: Metrics, lever: str) -> float:
    p = m.ranks[0].projections
    assert p is not None
    return next(x.step_ms for x in p.levers if x.lever == lever)


def _idle(m: Metrics, cause: str) -> float:
    causes = m.ranks[0].idle_causes
    assert causes is not None
    return sum(c.ms_per_step for c in causes.causes if c.cause == cause)


def _ratios(name: str, variant: str) -> list[float]:
    """Each round's mean step of the variant's profiled window over the captured one's: the
    harness ran the whole sequence three times in turn (kineto_phases.run), so a host whose
    speed drifts moves both alike."""
    return [float(x) for x in _truth(name)["window_ratio_of"][variant]]


def _with_variant(m: Metrics, name: str, variant: str) -> float:
    """The step the variant took under the profiler, at the scale of the analysed window: the
    window's step times the rounds' mean ratio of the variant to the captured loop."""
    p = m.ranks[0].projections
    assert p is not None
    r = _ratios(name, variant)
    return p.base_ms * sum(r) / len(r)


@pytest.mark.parametrize("name", ["gpt_host_batches", "metric_syncs", "convnet_precision"])
def test_pinned_copies_claim_nothing_where_the_copies_are_microseconds(name: str) -> None:
    """Each loop copies a few small tensors a step (the batch's token ids, the loss's 4 bytes):
    pinning them can buy microseconds. The replay once gave pinned memory the host's work after
    any copy, a 4-byte `.item()` read's included (on the first recording: 59.8 -> 57.6 ms for
    the metric reads, 17.1 -> 16.6 for the ResNet, 64.1 -> 47.0 for the GPT loop while its
    tokeniser was unclassified). A copy's staging now explains no more host time than its
    bytes at 1 GB/s (critical_path.STAGING_FLOOR_BPS)."""
    m, _ = _run(name)
    base = m.ranks[0].projections
    assert base is not None
    assert abs(_lever(m, "copies") - base.base_ms) <= 0.01 * base.base_ms


def test_the_tokeniser_is_named_input_first() -> None:
    """The tokeniser runs before each batch's copy, outside any PyTorch operator, and ends in a
    tensor built from Python data (`aten::lift_fresh`): the recurrence and that loading evidence
    make it input, the costliest finding, with DataLoader workers as its knob (the workers
    variant took 0.63x of the step outside the profiler, the three rounds' mean). Before
    Kineto's unrecorded stretches were counted as the process's own code
    (idle_evidence.UNRECORDED_NS), the wait was unclassified, with no knob and no projection."""
    m, found = _run("gpt_host_batches")
    assert found[0].rule == "data-loader", [(a.rule, a.cost_ms) for a in found[:3]]
    causes = m.ranks[0].idle_causes
    assert causes is not None
    why = " ".join(c.evidence for c in causes.causes if c.cause == "input")
    assert "outside PyTorch" in why and "a tensor built from Python data" in why, why


def test_the_main_threads_waits_add_up_to_the_planted_one() -> None:
    """What the GPU waits for the main thread outside PyTorch's launches (input, host compute,
    unclassified) is within 15 % of what removing the tokeniser saved under the profiler (the
    prebuilt variant's window)."""
    m, _ = _run("gpt_host_batches")
    p = m.ranks[0].projections
    assert p is not None
    planted = p.base_ms - _with_variant(m, "gpt_host_batches", "B_prebuilt")
    got = sum(_idle(m, c) for c in ("input", "host-compute", "unclassified"))
    assert abs(got - planted) <= 0.15 * planted, (got, planted)


def test_the_tokenisers_projection_is_within_10_pct_of_the_prebuilt_run() -> None:
    """The data-loader projection (37.8 -> 22.5 ms, 0.60x) against the prebuilt batches' profiled
    window, the three rounds' mean (0.60x; the rounds 0.72, 0.53, 0.56: the first round alone
    would say -17 %). Outside the profiler the prebuilt loop took 0.57x, DataLoader workers, the
    knob itself, 0.63x. The recording before this one compared one window of each, one after
    the other, and read +25 % where the host had slowed between them."""
    m, found = _run("gpt_host_batches")
    want = _with_variant(m, "gpt_host_batches", "B_prebuilt")
    a = found[0]
    assert a.projection is not None and a.projection.projected_ms is not None
    assert abs(a.projection.projected_ms - want) <= 0.10 * want, (a.projection.projected_ms, want)


def test_tf32_convolutions_are_not_called_fp32_work() -> None:
    """fp32 training under PyTorch's defaults runs cuDNN's convolutions as TF32 on the tensor
    cores: bf16 bought 0.80-0.92x outside the profiler and 0.85-1.15x in its profiled windows
    (three rounds each), no more than the host's own drift moves the step. No fp32 finding is
    made."""
    _, found = _run("convnet_precision")
    assert "fp32-kernels" not in {a.rule for a in found}
    t = _truth("convnet_precision")["outside_wall_ms"]
    assert t["T_fp32_no_tf32"] > 2 * t["A_fp32"]  # TF32 was on: without it the step is 2.6-2.8x


@pytest.mark.xfail(
    strict=True,
    reason="the table's bf16 row is 15.1 -> 11.2 ms (0.74x); the profiled bf16 run took 0.85,"
    " 1.03 and 1.15x the fp32 one in three rounds (mean 1.01x, -26 %), 0.80-0.92x outside the"
    " profiler (mean 0.86x, -13 %): autocast adds a cast kernel per weight and activation, which"
    " a step near its host's limit pays in launches; the projection counts no added launches,"
    " and the host's own speed moves the outcome as much as the GEMMs do",
)
def test_the_bf16_projection_is_within_10_pct_of_the_profiled_bf16_run() -> None:
    m, _ = _run("convnet_precision")
    want = _with_variant(m, "convnet_precision", "P_bf16")
    assert abs(_lever(m, "fp32-gemms") - want) <= 0.10 * want


def test_the_sync_projection_is_within_10_pct_of_the_profiled_run_without_reads() -> None:
    """The sync projection (35.2 -> 34.9 ms) against the run without the reads, profiled: its
    rounds took 1.40, 0.85 and 0.97x the run with them (mean 1.07x: -7.6 %; outside the
    profiler 0.86-1.19x, mean 1.06x). Under the profiler the host bounds the step and each sync
    returns almost at once: what removing the reads buys is below what the host's own drift
    moves from one phase to the next. The recording before this one, a window of each one after
    the other, read 58.8 -> 48.6 ms and a +20 % miss."""
    m, _ = _run("metric_syncs")
    want = _with_variant(m, "metric_syncs", "C_no_reads")
    assert abs(_lever(m, "sync") - want) <= 0.10 * want
