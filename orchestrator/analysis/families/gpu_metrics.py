"""nsys GPU metrics (`--gpu-metrics-device`): what the SMs did while kernels ran.

Reading: `readers/nsys_gpu_metrics.py` (`read`, `Samples`).

Which GPU: each GPU's samples have a `typeId` of their own, and `typeId - sourceId` is the
GPU's `TARGET_INFO_GPU.pwGpuId` (evidence: tests/data/gpu_metrics, where only the GPU the
process was given had SM activity); its `TARGET_INFO_GPU.id` is the `deviceId` of the
kernels that ran on it (evidence: the DDP recording, rank 1's kernels on device 1, whose UUID
the sampler's typeId for pwGpuId 1 names). One nsys per node samples every GPU of the node
(`--gpu-metrics-device=all`), so a rank whose own report holds no samples takes those of
another report of the run for the GPU with its device's UUID (`attribute`), the two clocks
aligned by the reports' session start times (`TARGET_INFO_SESSION_START_TIME`).

Figures (`figures`): per entry, each metric's mean over the entry's span (the window the time
based `busy` is taken over), per step (the step ranges the analysis found) and per bucket of
the representative step's window (the report's metrics lane).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrator.analysis.gpu_metric_model import (
    GpuMetrics,
    MetricLane,
    MetricMean,
    StepMetrics,
)
from orchestrator.analysis.readers import gpu_metric_names as N
from orchestrator.analysis.readers.nsys_gpu_metrics import GpuSamples as GpuSamples
from orchestrator.analysis.readers.nsys_gpu_metrics import Samples as Samples
from orchestrator.analysis.readers.nsys_gpu_metrics import read as read
from orchestrator.analysis.timeline.step_names import step_family

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import RankMetrics

LANE_BUCKETS = 100
# the lane's metrics, in the order the report draws them (those the set has)
LANE_KEYS = (
    "sm_active_pct",
    "tensor_active_pct",
    "dram_read_pct",
    "dram_write_pct",
    "pcie_rx_pct",
    "pcie_tx_pct",
    "c2c_rx_pct",
    "c2c_tx_pct",
)


# ---- figures -----------------------------------------------------------------------------------


def _means(g: GpuSamples, lo: int, hi: int) -> tuple[int, list[MetricMean]]:
    """Each metric's mean over the samples in [lo, hi] (the entry's clock = the samples')."""
    a = int(np.searchsorted(g.times, lo, side="left"))
    b = int(np.searchsorted(g.times, hi, side="right"))
    block = g.values[a:b]
    out = []
    for i, name in enumerate(g.names):
        col = block[:, i]
        n = int(np.count_nonzero(~np.isnan(col)))
        if n:
            out.append(
                MetricMean(
                    name=name,
                    key=N.key_of(name),
                    unit=N.unit_of(N.split(name)[1]) or "value",
                    mean=float(np.nanmean(col)),
                    samples=n,
                )
            )
    return int(b - a), out


def _covered(g: GpuSamples, lo: int, hi: int) -> float:
    """How much of [lo, hi] lies between the GPU's first and last sample, percent: a sampler
    whose capture opened later than the rank's (another report's) covers part of it."""
    if hi <= lo or not g.times.size:
        return 0.0
    a, b = max(lo, int(g.times[0])), min(hi, int(g.times[-1]))
    return round(100.0 * max(0, b - a) / (hi - lo), 2)


def _known_cols(g: GpuSamples) -> dict[str, list[int]]:
    cols: dict[str, list[int]] = {}
    for i, n in enumerate(g.names):
        k = N.key_of(n)
        if k is not None:
            cols.setdefault(k, []).append(i)
    return cols


def _window_means(
    g: GpuSamples, bounds: Any, cols: dict[str, list[int]]
) -> tuple[Any, dict[str, Any]]:
    """Counts and known metrics' means of the samples in each [lo, hi) of `bounds` (an (n, 2)
    array), by prefix sums: one pass over the samples for any number of windows."""
    lo = np.searchsorted(g.times, bounds[:, 0], side="left")
    hi = np.searchsorted(g.times, bounds[:, 1], side="left")
    counts = hi - lo
    means: dict[str, Any] = {}
    for key, idx in cols.items():
        total = np.zeros(bounds.shape[0])
        ok = np.ones(bounds.shape[0], dtype=bool)
        for i in idx:
            col = g.values[:, i]
            have = ~np.isnan(col)
            s = np.concatenate(([0.0], np.cumsum(np.where(have, col, 0.0))))
            c = np.concatenate(([0], np.cumsum(have)))
            n = c[hi] - c[lo]
            ok &= n > 0
            total += np.divide(s[hi] - s[lo], n, out=np.zeros(n.size), where=n > 0)
        means[key] = np.where(ok, total, np.nan)
    return counts, means


def _steps(
    g: GpuSamples, steps: list[tuple[str, int, int]], shift: int, cols: dict[str, list[int]]
) -> list[StepMetrics]:
    """The step ranges of the family the analysis counts (`step_names.step_family`, the one with
    most ranges), each with its known metrics' means."""
    fams: dict[str, list[tuple[str, int, int]]] = {}
    for name, start, dur in steps:
        fam = step_family(name)
        if fam is not None and dur > 0:
            fams.setdefault(fam, []).append((name, start, dur))
    if not fams:
        return []
    fam = max(fams, key=lambda f: len(fams[f]))
    chosen = sorted(fams[fam], key=lambda s: s[1])
    bounds = np.array([(s + shift, s + d + shift) for _, s, d in chosen], dtype=np.int64)
    counts, means = _window_means(g, bounds, cols)
    out = []
    for i, (name, start, dur) in enumerate(chosen):
        vals = {k: float(v[i]) for k, v in means.items() if not np.isnan(v[i])}
        out.append(
            StepMetrics(
                name=name,
                start_ns=start,
                end_ns=start + dur,
                samples=int(counts[i]),
                covered_pct=_covered(g, start + shift, start + dur + shift),
                means=vals,
            )
        )
    return out


def _lane(
    g: GpuSamples, window: tuple[int, int], shift: int, cols: dict[str, list[int]]
) -> MetricLane | None:
    lo, hi = window
    if hi <= lo:
        return None
    n = LANE_BUCKETS
    step = max(1, (hi - lo) // n)
    edges = lo + shift + step * np.arange(n + 1, dtype=np.int64)
    bounds = np.stack([edges[:-1], edges[1:]], axis=1)
    counts, means = _window_means(g, bounds, {k: v for k, v in cols.items() if k in LANE_KEYS})
    if not counts.any():
        return None
    series = {
        k: [None if np.isnan(x) else round(float(x), 2) for x in means[k]]
        for k in LANE_KEYS
        if k in means
    }
    return MetricLane(start_ns=lo, bucket_ns=int(step), series=series)


def figures(
    g: GpuSamples,
    sampler: str,
    attribution: str,
    span: tuple[int, int],
    steps: list[tuple[str, int, int]],
    view: tuple[int, int] | None,
    shift: int = 0,
) -> GpuMetrics | None:
    """One entry's GPU metrics from its GPU's samples: means over its span, per step and in
    the lane of its step view's window (`shift`: the samples' clock minus the entry's)."""
    lo, hi = span
    if hi <= lo:
        return None
    count, means = _means(g, lo + shift, hi + shift)
    if not count:
        return None
    cols = _known_cols(g)
    return GpuMetrics(
        device=g.device,
        uuid=g.uuid,
        sampler=sampler,
        attribution=attribution,
        window_start_ns=lo,
        window_end_ns=hi,
        samples=count,
        covered_pct=_covered(g, lo + shift, hi + shift),
        rate_hz=g.rate_hz,
        metrics=means,
        steps=_steps(g, steps, shift, cols),
        lane=_lane(g, view, shift, cols) if view else None,
    )


OWN_RULE = (
    "sampled by this report's nsys; GPU_METRICS typeId - sourceId = TARGET_INFO_GPU.pwGpuId,"
    " whose id is the device the kernels ran on"
)


def own(
    samples: Samples | None,
    devices: list[int],
    span: tuple[int, int],
    steps: list[tuple[str, int, int]],
    view: tuple[int, int] | None,
) -> GpuMetrics | None:
    """An entry's GPU metrics from its own report's samples (None: it sampled none of its
    devices)."""
    if samples is None:
        return None
    for d in devices:
        g = samples.gpus.get(d)
        if g is not None:
            return figures(g, Path(samples.path).name, OWN_RULE, span, steps, view)
    return None


def borrowed(
    mine: Samples,
    others: list[Samples],
    devices: list[int],
    span: tuple[int, int],
    steps: list[tuple[str, int, int]],
    view: tuple[int, int] | None,
) -> GpuMetrics | None:
    """An entry's GPU metrics from another report of the run that sampled its GPU (one sampler
    per node): the GPU matched by UUID, the clocks by the session start times."""
    if mine.session_start_ns is None:
        return None
    for d in devices:
        uuid = mine.uuids.get(d)
        if not uuid:
            continue
        for s in others:
            if s.session_start_ns is None:
                continue
            for g in s.gpus.values():
                if g.uuid == uuid:
                    shift = mine.session_start_ns - s.session_start_ns
                    rule = (
                        f"sampled by {Path(s.path).name}'s nsys (one sampler per node): the GPU"
                        f" of UUID {uuid}, device {d} here; clocks aligned by the reports'"
                        f" session starts ({shift / 1e6:+.1f} ms)"
                    )
                    return figures(g, Path(s.path).name, rule, span, steps, view, shift)
    return None


def attribute(
    ranks: list[RankMetrics],
    steps: list[list[tuple[str, int, int]]],
    samples: list[Samples | None],
) -> list[RankMetrics]:
    """The run's entries, each without samples of its own given those another report of the
    run took of its GPU (`borrowed`); `steps` and `samples`: each entry's step ranges and its
    report's `Samples`."""
    samplers = {id(s): s for s in samples if s is not None and s.gpus}
    if not samplers:
        return ranks
    out = []
    for r, st, mine in zip(ranks, steps, samples, strict=True):
        if r.gpu_metrics is None and mine is not None and r.span_ns > 0:
            others = [s for k, s in samplers.items() if k != id(mine)]
            view = (r.step_view.start_ns, r.step_view.end_ns) if r.step_view else None
            got = borrowed(mine, others, r.devices, (r.span_start_ns, r.span_end_ns), st, view)
            if got is not None:
                r = r.model_copy(update={"gpu_metrics": got})
        out.append(r)
    return out
