"""Six workloads written after the rules and the replay, recorded under the PyTorch profiler on
one H200 (tests/data/heldout_h200/README.md, "kineto/"): a Hugging Face GPT-2 fed by a Python
tokeniser on the main thread, a ResNet-18 in fp32 under PyTorch's defaults (cuDNN's TF32), a
Transformer classifier whose loop reads its metrics a dozen times a step, and, written after the
per-class bf16 projection, a Hugging Face GPT-2 and a ConvNeXt trained in fp32, and, written after
the pinned-copy projection, a ResNet-50 fed from pageable memory. Each measured its
own truth, inside the profiler's window (the variant profiled too) and outside it, the whole
sequence three times in turn (the recording before this one ran it once, and a host that slowed
between two windows read as a +20-25 % miss). Each projection is set against its variant in the
frame `gh-run try` reads a pair in (`_in_try_frame`). What holds is asserted; what misses is a
strict xfail with its figures."""

from __future__ import annotations

import functools
import json
import statistics
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


def _in_try_frame(m: Metrics, name: str, variant: str) -> tuple[float, str]:
    """The variant's step as `gh-run try` reads a pair (`trial.paired_steps`): outside the
    profiler for both where it slowed either by more than `SLOWED_PCT` (the rounds' mean of
    each window against the same loop outside it), else both profiled; at the scale of the
    analysed window (its step times the rounds' mean ratio of variant to captured step)."""
    from orchestrator.runs.trial import SLOWED_PCT

    t = _truth(name)
    rounds = t["walls_s"]["rounds"]
    captured = next(iter(t["outside_wall_ms"]))  # the first phase: the loop as captured

    def slowed(window: str, outside: str) -> float:
        each = [statistics.fmean(r[window]) / statistics.fmean(r[outside]) for r in rounds]
        return 100 * (statistics.fmean(each) - 1)

    p = m.ranks[0].projections
    assert p is not None
    if max(abs(slowed("window", captured)), abs(slowed(f"window_{variant}", variant))) > SLOWED_PCT:
        return p.base_ms * statistics.fmean(t["outside_ratio_of"][variant]), "outside"
    return _with_variant(m, name, variant), "profiled"


def _with_variant(m: Metrics, name: str, variant: str) -> float:
    """The step the variant took under the profiler, at the scale of the analysed window: the
    window's step times the rounds' mean ratio of the variant to the captured loop."""
    p = m.ranks[0].projections
    assert p is not None
    r = _ratios(name, variant)
    return p.base_ms * sum(r) / len(r)


def _within(got: float, want: float) -> None:
    """A projection within 10 % of the step it is set against (issue 41's bar)."""
    assert abs(got - want) <= 0.10 * want, (got, want)


KINETO_RUNS = ["gpt_host_batches", "metric_syncs", "convnet_precision", "gpt2_precision",
               "convnext_precision"]  # fmt: skip


@pytest.mark.parametrize("name", KINETO_RUNS)
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
    would say -17 %), the frame `try` reads it in: the profiler slowed neither loop by over
    10 %. Outside the profiler the prebuilt loop took 0.57x, DataLoader workers, the knob
    itself, 0.63x. The recording before this one compared one window of each, one after the
    other, and read +25 % where the host had slowed between them."""
    m, found = _run("gpt_host_batches")
    want, frame = _in_try_frame(m, "gpt_host_batches", "B_prebuilt")
    assert frame == "profiled"  # the profiler slowed neither loop by more than 10 %
    a = found[0]
    assert a.projection is not None and a.projection.projected_ms is not None
    _within(a.projection.projected_ms, want)


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
    reason="the bf16 row is 15.1 -> 15.06 ms (1.00x: the GPU is busy 7.3 ms of the host-bound"
    " step, its TF32 convolutions and the rest take their time under autocast, and one fp32 GEMM"
    " of 0.1 ms gains); outside the profiler, the frame `try` reads this pair in (the profiler"
    " slowed the bf16 loop 29 %), bf16 ran 0.86x in three rounds (0.85, 0.92, 0.80): +16 %. The"
    " profiled bf16 windows took 1.01x (0.85, 1.03, 1.15; -1.2 %). What bf16 shortens outside"
    " the profiler is host time no fp32 trace shows (the table said 0.74x while every non-GEMM"
    " kernel was taken at 1.6x)",
)
def test_the_bf16_projection_is_within_10_pct_of_the_bf16_run() -> None:
    m, _ = _run("convnet_precision")
    want, _ = _in_try_frame(m, "convnet_precision", "P_bf16")
    assert abs(_lever(m, "fp32-gemms") - want) <= 0.10 * want


def _gpt2_miss() -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=(
        "projected 241.6 -> 51.4 ms (0.21x), the bf16 loop ran 0.237x outside the profiler (0.237,"
        " 0.234, 0.241; the profiler slowed it 8-39 %): -10.5 %. Its variant's trace, class by"
        " class: fp32 GEMMs 15.2x (15x assumed), fp32 attention 7.6x (10x), the rest 0.82x with"
        " autocast's casts (1.0x): the GPU's bf16 step 17 % longer than projected"))  # fmt: skip


@pytest.mark.parametrize(
    "name", [pytest.param("gpt2_precision", marks=_gpt2_miss()), "convnext_precision"]
)
def test_the_bf16_projection_of_a_held_out_fp32_model(name: str) -> None:
    """Two fp32 models recorded after the per-class bf16 projection (critical_path.AUTOCAST_X)
    was written, neither of a family it was measured on: a Hugging Face GPT-2 (12 x 1024, SDPA
    attention) and a ConvNeXt of torch.nn layers (depthwise 7x7 convolutions, LayerNorm, Linear
    MLPs in fp32, a few TF32 convolutions). The fp32 finding comes first with bf16 as its knob,
    and its projection meets the bf16 loop in the frame `try` reads the pair in (outside the
    profiler for both: it slowed the bf16 loops 8-39 %). ConvNeXt: 77.8 -> 46.0 ms against
    44.2 (+3.9 %; its profiled bf16 windows 0.68x: -12.6 %)."""
    m, found = _run(name)
    a = found[0]
    assert a.rule == "fp32-kernels", [(x.rule, x.cost_ms) for x in found[:3]]
    assert "bf16" in a.knob
    want, frame = _in_try_frame(m, name, "P_bf16")
    assert frame == "outside"
    p = a.projection
    assert p is not None and p.projected_ms is not None and p.low_ms is not None
    assert p.low_ms <= want  # the range holds the outcome even where the typical misses
    _within(p.projected_ms, want)


def test_the_sync_projection_is_within_10_pct_of_the_run_without_reads() -> None:
    """The sync projection (35.2 -> 34.9 ms) against the run without the reads, outside the
    profiler, the frame `try` reads this pair in (the profiler slowed the loop with the reads
    28-71 %): its rounds took 1.19, 0.86 and 1.13x the run with them (mean 1.06x: -6.4 %;
    profiled 1.40, 0.85 and 0.97x, mean 1.07x: -7.6 %). Under the profiler the host bounds the
    step and each sync returns almost at once: what removing the reads buys is below what the
    host's own drift moves from one phase to the next. The recording before this one, a window
    of each one after the other, read 58.8 -> 48.6 ms and a +20 % miss."""
    m, _ = _run("metric_syncs")
    want, frame = _in_try_frame(m, "metric_syncs", "C_no_reads")
    assert frame == "outside"  # the profiler slowed the loop with the reads 28-71 %
    assert abs(_lever(m, "sync") - want) <= 0.10 * want


def test_pageable_batches_of_a_held_out_resnet_are_named_and_projected() -> None:
    """A sixth workload, written after the pinned-copy projection and recorded once, its first
    recording the check (`resnet_pinned`: torchvision's ResNet-50 in bf16 autocast, each step
    copying a 77 MB float32 batch from pageable memory). The copies come first, with pinned
    memory as their knob, and the projection (52.6 -> 41.3 ms, 0.785x) meets the pinned loop in
    the frame `try` reads the pair in: outside the profiler for both, which slowed the pageable
    loop 16 % (the five rounds' mean) and the pinned one 7 %; there the pinned loop took 0.777x
    of the pageable one (0.70-0.82 a round), +1.0 %. The profiled windows' 0.72x (0.62-0.83) is
    within 10 % too. In the capture's own time it is not: round 1's pinned window took 32.7 ms,
    where the replay keeps the pageable window's launch gaps (tests/data/heldout_h200/README.md)."""
    m, found = _run("resnet_pinned")
    a = found[0]
    assert a.rule == "host-device-copies", [(x.rule, x.cost_ms) for x in found[:3]]
    assert "pin_memory=True" in a.knob
    pr = a.projection
    assert pr is not None and pr.projected_ms is not None
    want, frame = _in_try_frame(m, "resnet_pinned", "P_pinned")
    assert frame == "outside"
    _within(pr.projected_ms, want)
    profiled = _with_variant(m, "resnet_pinned", "P_pinned")
    _within(pr.projected_ms, profiled)


@pytest.mark.xfail(strict=True, reason=(
    "projected 25.4 -> 2.65 ms as one CUDA graph (2.0 as first recorded, under the eager"
    " kernels' own time: the floor came after), the graph's own step 3.10 outside the"
    " profiler (3.45 inside, 5 rounds): -14.5 %. Its graph, a whole training step, needs"
    " AdamW(capturable=True): 152 more elementwise kernels and 10 more multi-tensor ones a"
    " step (+0.25 ms), which the eager trace does not hold; the graph's node-to-node gaps"
    " were the 0.5 µs assumed (median 0.42 µs)"))  # fmt: skip
def test_a_held_out_launch_bound_transformer_as_one_cuda_graph() -> None:
    """A seventh workload, written after the CUDA-graph projection and recorded once
    (`transformer_graphs`: a 6-layer Transformer LM of width 256 on 16 x 64 tokens, fp32,
    eager; its variant the whole step captured once and replayed, PyTorch's recipe). The
    finding is launch-bound, first, with CUDA graphs as its knob; its projection is set
    against the graph's own step outside the profiler (which slowed it 11 %), as a graph's
    step is the GPU's own (the eager loop's 39 % is the profiler's cost per launch, which a
    graph does not pay)."""
    _, found = _run("transformer_graphs")
    a = found[0]
    assert a.rule == "launch-bound" and "CUDA graphs" in a.knob
    assert a.projection is not None and a.projection.projected_ms is not None
    want = _truth("transformer_graphs")["outside_wall_ms"]["G_graph"]
    _within(a.projection.projected_ms, want)


def test_the_held_out_transformers_graph_projection_keeps_the_kernels() -> None:
    """The same recording, what holds: the projection is the eager step's GPU work and its
    waits (2.65 ms), never under them; before that floor the mean step less what the replay
    took off the window's (longer) steps read 2.0 ms, under the kernels' own time."""
    m, found = _run("transformer_graphs")
    p = m.ranks[0].projections
    assert p is not None
    lever = next(x for x in p.levers if x.lever == "launch-bound")
    a = found[0]
    assert a.projection is not None and lever.gpu_ms is not None
    assert a.projection.projected_ms == pytest.approx(lever.gpu_ms, abs=0.01)
    assert lever.gpu_ms >= 2.5  # the eager step's kernels and their waits


def test_host_metrics_on_read_back_scores_are_named_and_take_their_reads_with_them() -> None:
    """An eighth workload, written after the host-compute rule and recorded once
    (`metric_numpy`: an MLP classifier whose loop copies its 4096 x 1000 softmax scores to the
    host each step, `.cpu().numpy()`, and computes top-5 accuracy, a confusion matrix and
    per-class precision and recall in numpy). Host compute comes first (37.7 ms a step of the
    51.6), with moving that work off the step as its knob; the read back that feeds it (16 MB
    into pageable memory, 9.6 ms a step on the GPU's side, at a twentieth of the link's pinned
    rate) goes with it: the lever's GPU time is the step's less that copy."""
    m, found = _run("metric_numpy")
    a = found[0]
    assert a.rule == "host-compute", [(x.rule, x.cost_ms) for x in found[:3]]
    p = m.ranks[0].projections
    assert p is not None and p.gpu_ms is not None
    lever = next(x for x in p.levers if x.lever == "host-compute")
    assert lever.gpu_ms is not None and p.gpu_ms - lever.gpu_ms > 9.0
    assert "device-to-host copies that read its data back" in lever.assumption


@pytest.mark.xfail(strict=True, reason=(
    "projected 51.6 -> 3.9 ms without the host metrics (13.5 as first recorded, when the"
    " 16 MB read back of the scores, 9.6 ms a step, stayed: it went with the metrics in the"
    " variant, and now goes with the host compute it feeds), the loop without them 0.0385x"
    " outside the profiler (five rounds 0.033-0.041: 1.99 ms at the captured step's scale;"
    " 1.86 ms its own), the frame `try` reads the pair in (the profiler slowed the variant"
    " 29 %, its steps a tenth of a millisecond of launches each): +95 %; against its profiled"
    " windows (0.051x, 2.62 ms) +48 %. What is left is the variant's own step, 2-3 ms,"
    " which the captured step's host gaps around the metrics' kernels overstate"))  # fmt: skip
def test_the_host_metrics_projection_meets_the_loop_without_them() -> None:
    m, found = _run("metric_numpy")
    want, frame = _in_try_frame(m, "metric_numpy", "N_no_metrics")
    assert frame == "outside"
    pr = found[0].projection
    assert pr is not None and pr.projected_ms is not None
    _within(pr.projected_ms, want)


def test_copies_at_the_links_rate_are_not_the_host_computes_reads() -> None:
    """The H100 offload recording (tests/data/traces/offload) moves 22.5 GiB each way between
    the GPU and pinned memory at 48-54 GB/s, deliberate transfers, with host compute after
    some of them: the host-compute lever keeps them (its GPU time is the step's)."""
    folder = Path(__file__).resolve().parents[1] / "data" / "traces" / "offload"
    packed = any(p.name.endswith(".xz") for p in folder.iterdir())
    m = analyze_paths([unpacked(folder) if packed else folder])
    p = m.ranks[0].projections
    assert p is not None and p.gpu_ms is not None
    lever = next(x for x in p.levers if x.lever == "host-compute")
    assert lever.gpu_ms == pytest.approx(p.gpu_ms, abs=1e-3)


def _outside_frame(name: str, variant: str, step_ms: float) -> float:
    """The variant's step at the scale of `step_ms`, the captured loop's own step outside the
    profiler (a projection taken there starts from it): times the rounds' mean ratio of the
    variant to the captured loop outside the profiler."""
    return step_ms * statistics.fmean(_truth(name)["outside_ratio_of"][variant])


def test_a_second_pageable_resnet_with_its_walls_is_projected_outside_the_capture() -> None:
    """`resnet_pinned` recorded again (batch 64 at 320 px) after the capture's cost on launches
    was ranked and with the loop's own walls (`step_times_s`), as a user's timed run gives them:
    the copies first (11.4 ms a step); the launch waits, 8.0 ms a step in the trace, ranked by
    4.5 (the capture slowed the loop's steps 3.5 ms); the projection taken outside the capture
    at the loop's own pace there (49.1 -> 39.2 ms) against the pinned loop's 0.781x of it (five
    rounds 0.72-0.85): +2.2 % (against round 1's pinned loop alone, 37.1 ms, +5.6 %)."""
    m, found = _run("resnet_pinned_2")
    assert found[0].rule == "host-device-copies", [(a.rule, a.cost_ms) for a in found[:3]]
    lb = next(a for a in found if a.rule == "launch-bound")
    assert lb.cost_ms is not None and lb.cost_ms < lb.evidence["launch-bound_ms_per_step"]
    pr = found[0].projection
    po = m.ranks[0].profiler_overhead
    assert pr is not None and pr.projected_ms is not None and pr.step_ms is not None
    assert po is not None and pr.step_ms == po.outside_mean_ms
    assert "taken outside the capture" in (pr.assumption or "")
    want = _outside_frame("resnet_pinned_2", "P_pinned", pr.step_ms)
    _within(pr.projected_ms, want)


@pytest.mark.xfail(strict=True, reason=(
    "projected 50.3 -> 2.44 ms outside the capture (the loop's own pace there), the loop without"
    " the metrics 0.042x of the captured one outside the profiler over five rounds (0.045,"
    " 0.044, 0.041, 0.039, 0.038: the numpy slowed from round to round while the loop without"
    " it did not): 2.11 ms, +15.6 %; against round 1's loop without the metrics alone (2.31 ms,"
    " what one `try` reads), +5.6 %"))  # fmt: skip
def test_host_metrics_recorded_again_with_their_walls_meet_the_loop_without_them() -> None:
    """`metric_numpy` recorded again (batch 2048, 2,000 classes) with the loop's own walls: host
    compute first, its projection taken outside the capture (the capture slowed the loop 8 %),
    where the first recording's, without walls, stayed in the capture's time (+95 %)."""
    _, found = _run("metric_numpy_2")
    assert found[0].rule == "host-compute"
    pr = found[0].projection
    assert pr is not None and pr.projected_ms is not None and pr.step_ms is not None
    assert "taken outside the capture" in (pr.assumption or "")
    want = _outside_frame("metric_numpy_2", "N_no_metrics", pr.step_ms)
    _within(pr.projected_ms, want)
