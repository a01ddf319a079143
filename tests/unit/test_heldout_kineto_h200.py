"""Three workloads written after the rules and the replay, recorded under the PyTorch profiler on
one H200 (tests/data/heldout_h200/README.md, "kineto/"): a Hugging Face GPT-2 fed by a Python
tokeniser on the main thread, a ResNet-18 in fp32 under PyTorch's defaults (cuDNN's TF32), and a
Transformer classifier whose loop reads its metrics a dozen times a step. Each measured its own
truth, inside the profiler's window (the variant profiled too) and outside it. What holds is
asserted; what misses is a strict xfail with its figures."""

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


def _window_ratio(name: str, variant: str) -> float:
    """The variant's step over the captured loop's, both under the profiler."""
    t = _truth(name)
    return float(t["window_wall_mean_ms_of"][variant]) / float(t["window_wall_mean_ms"])


@pytest.mark.parametrize("name", ["gpt_host_batches", "metric_syncs", "convnet_precision"])
def test_pinned_copies_claim_nothing_where_the_copies_are_microseconds(name: str) -> None:
    """Each loop copies a few small tensors a step (the batch's token ids, the loss's 4 bytes):
    pinning them can buy microseconds. The replay once gave pinned memory the host's work after
    any copy, a 4-byte `.item()` read's included: 64.1 -> 47.0 ms for the GPT loop (its Python
    tokeniser), 56.6 -> 54.5 for the metric reads. A copy's staging now explains no more host
    time than its bytes at 1 GB/s (critical_path.STAGING_FLOOR_BPS)."""
    m, _ = _run(name)
    base = m.ranks[0].projections
    assert base is not None
    assert abs(_lever(m, "copies") - base.base_ms) <= 0.01 * base.base_ms


def test_a_graph_leaves_the_python_tokeniser_in_the_step() -> None:
    """A CUDA graph replays the step's launches, not the Python that builds its batch: the
    tokeniser's ~30 ms a step without a launch stay. The replay once removed every wait no cause
    explained, and projected 64.1 -> 24.9 ms; it keeps a launch-free stretch of over 1 ms now
    (critical_path.GRAPH_HOST_NS): at least the tokeniser's wait is left."""
    m, _ = _run("gpt_host_batches")
    assert _lever(m, "launch-bound") >= _idle(m, "unclassified")


def test_the_tokenisers_wait_is_measured_as_planted() -> None:
    """The GPU waits for the tokeniser as long as removing it saves under the profiler (the
    prebuilt variant's window): gh-run measures the wait within 15 % of that."""
    m, _ = _run("gpt_host_batches")
    step = m.ranks[0].projections.base_ms  # type: ignore[union-attr]
    planted = step * (1 - _window_ratio("gpt_host_batches", "B_prebuilt"))
    assert abs(_idle(m, "unclassified") - planted) <= 0.15 * planted


@pytest.mark.xfail(
    strict=True,
    reason="the tokeniser's ~31 ms a step is unclassified, with no projection: Kineto records"
    " nothing of the main thread outside PyTorch's operators, so nothing shows it is host work"
    " or loading (a tensor built from Python data, `aten::lift_fresh`, is seen only under nsys's"
    " samples as such). Counting unrecorded time as host work named it (input 28.5 ms, host"
    " compute 15.4 ms on the full trace) but turned a model's Python between operators into"
    " host-compute advice on every Kineto trace: not kept",
)
def test_the_tokeniser_is_named_with_a_projection_within_10_pct() -> None:
    m, found = _run("gpt_host_batches")
    step = m.ranks[0].projections.base_ms  # type: ignore[union-attr]
    want = step * _window_ratio("gpt_host_batches", "B_prebuilt")
    named = [a for a in found if a.rule in ("data-loader", "host-compute")]
    assert named and named[0].projection is not None
    got = named[0].projection.projected_ms
    assert got is not None and abs(got - want) <= 0.10 * want


def test_tf32_convolutions_are_not_called_fp32_work() -> None:
    """fp32 training under PyTorch's defaults runs cuDNN's convolutions as TF32 on the tensor
    cores: bf16 bought nothing here (outside the profiler 18.6 -> 20.2 ms; in its window 17.9 ->
    22.0). No fp32 finding is made."""
    _, found = _run("convnet_precision")
    assert "fp32-kernels" not in {a.rule for a in found}
    t = _truth("convnet_precision")["outside_wall_ms"]
    assert t["T_fp32_no_tf32"] > 2 * t["A_fp32"]  # TF32 was on: without it the step is 2.3x


@pytest.mark.xfail(
    strict=True,
    reason="the table's bf16 projection is 17.3 -> 14.7 ms; the profiled bf16 run took 1.23x the"
    " fp32 one (21.3 ms at this window's scale, -31 %): autocast adds a cast kernel per weight"
    " and activation, and in a step whose host is near its limit those launches cost more than"
    " the GEMMs save; the projection counts no added launches",
)
def test_the_bf16_projection_is_within_10_pct_of_the_profiled_bf16_run() -> None:
    m, _ = _run("convnet_precision")
    step = m.ranks[0].projections.base_ms  # type: ignore[union-attr]
    want = step * _window_ratio("convnet_precision", "P_bf16")
    assert abs(_lever(m, "fp32-gemms") - want) <= 0.10 * want


@pytest.mark.xfail(
    strict=True,
    reason="removing the dozen reads a step took the profiled step 58.8 -> 48.6 ms (-17 %); the"
    " sync projection is -0.8 % (56.6 -> 56.1): under the profiler the host is the bottleneck"
    " (803 kernels a step, 8 µs each), each sync returns at once (1.1 ms in 121 calls), and what"
    " the reads cost is the host's own time around them (the boolean mask's nonzero, the"
    " .item() calls), which the idle classes give to launch-bound, host compute and unclassified",
)
def test_the_sync_projection_is_within_10_pct_of_the_profiled_run_without_reads() -> None:
    m, _ = _run("metric_syncs")
    step = m.ranks[0].projections.base_ms  # type: ignore[union-attr]
    want = step * _window_ratio("metric_syncs", "C_no_reads")
    assert abs(_lever(m, "sync") - want) <= 0.10 * want
