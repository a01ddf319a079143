"""nsys GPU metrics (`--gpu-metrics-device`): what the SMs did while kernels ran.

Reading (`read`): `GPU_METRICS` (timestamp, typeId, metricId, value: one row per metric per
sample) joined to `TARGET_INFO_GPU_METRICS` on (typeId, metricId) for each metric's name
(`gpu_metric_names` says what a name means). The table holds millions of rows on a long
capture: its four integer columns are read through the page reader (`sqlite_columns.
fetch_columns`; SQLite's own path the fallback), about 3 times faster than rows through
Python's sqlite3 (bench/bench_gpu_metrics.py), and tested against plain SQL
(tests/unit/test_gpu_metrics.py). Samples outside the capture window
(`ANALYSIS_DETAILS.duration`: nsys samples from before the capture starts to after it stops)
are left out.

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

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrator.analysis.families import gpu_metric_names as N
from orchestrator.analysis.families.gpu_metric_model import (
    GpuMetrics,
    MetricLane,
    MetricMean,
    StepMetrics,
)
from orchestrator.analysis.timeline.step_names import step_family

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import RankMetrics
    from orchestrator.analysis.readers.export_tables import Schema

TABLE = "GPU_METRICS"
NAMES = "TARGET_INFO_GPU_METRICS"
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


@dataclass
class GpuSamples:
    """One GPU's samples: sorted sample times (the report's clock, ns) and one column per
    metric (in the metric's unit: multiplier applied; NaN where a metric has no sample at a
    time)."""

    device: int
    uuid: str | None
    times: Any
    names: list[str]
    values: Any

    @property
    def rate_hz(self) -> float | None:
        if self.times.size < 2:
            return None
        return float((self.times.size - 1) / ((self.times[-1] - self.times[0]) / 1e9))


@dataclass
class Samples:
    """What one export holds for GPU metrics: its GPUs' UUIDs (every export, for the
    attribution of another report's samples), its session start (Unix ns) and the samples of
    the GPUs its nsys sampled (none: it did not sample)."""

    path: str
    session_start_ns: int | None = None
    uuids: dict[int, str] = field(default_factory=dict)
    gpus: dict[int, GpuSamples] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _cols(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')}


def read(path: Path, conn: sqlite3.Connection, tables: Schema | None = None) -> Samples:
    """The GPU-metric samples of an export (`conn`: an open read-only connection to it;
    `tables`: its tables resolved, `export_tables`; read here when not given)."""
    if tables is None:
        from orchestrator.analysis.readers.export_tables import read_schema
        from orchestrator.analysis.readers.nsys_db import KEYS

        tables = read_schema(conn, KEYS)
    tname = tables.name
    out = Samples(path=str(path))
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        row = conn.execute(
            f'SELECT utcEpochNs FROM "{tname("TARGET_INFO_SESSION_START_TIME")}"'
        ).fetchone()
        if row and isinstance(row[0], int):
            out.session_start_ns = row[0]
    pw_to_id: dict[int, int] = {}
    gpu = tname("TARGET_INFO_GPU")
    if "TARGET_INFO_GPU" in tables and {"id", "uuid"} <= _cols(conn, gpu):
        pw = "pwGpuId" if "pwGpuId" in _cols(conn, gpu) else "id"
        for i, uuid, p in conn.execute(f'SELECT id, uuid, {pw} FROM "{gpu}"'):
            if isinstance(i, int):
                if isinstance(uuid, str) and uuid:
                    out.uuids[i] = uuid
                if isinstance(p, int):
                    pw_to_id[p] = i
    if TABLE not in tables or NAMES not in tables:
        return out
    if not {"typeId", "sourceId", "metricId", "metricName"} <= _cols(conn, tname(NAMES)):
        out.notes.append(f"{NAMES} lacks typeId, sourceId, metricId or metricName: not read")
        return out
    names: dict[tuple[int, int], str] = {}
    type_gpu: dict[int, int] = {}
    for type_id, source_id, metric_id, name in conn.execute(
        f'SELECT typeId, sourceId, metricId, metricName FROM "{tname(NAMES)}"'
    ):
        if not all(isinstance(v, int) for v in (type_id, source_id, metric_id)):
            continue
        names[(type_id, metric_id)] = str(name)
        pw = type_id - source_id
        type_gpu[type_id] = pw_to_id.get(pw, pw)
    if not names:
        return out
    from orchestrator.analysis.readers import sqlite_columns  # only where the table is there

    mult = N.multipliers(_system_env(conn, tables, "GpuMetricsConfig"))
    end = _capture_end(conn, tables)
    t, typ, mid, val = sqlite_columns.fetch_columns(
        path, tname(TABLE), ["timestamp", "typeId", "metricId", "value"], has_times=False
    )
    keep = t >= 0
    if end is not None:
        keep &= t <= end
    if not keep.all():
        t, typ, mid, val = t[keep], typ[keep], mid[keep], val[keep]
    for type_id in np.unique(typ).tolist():
        if type_id not in type_gpu:
            out.notes.append(
                f"GPU_METRICS typeId {type_id} is not in {NAMES}: its samples left out"
            )
            continue
        sel = typ == type_id
        out.gpus[type_gpu[type_id]] = _pivot(
            type_gpu[type_id],
            out.uuids.get(type_gpu[type_id]),
            t[sel],
            mid[sel],
            val[sel],
            {m: n for (ty, m), n in names.items() if ty == type_id},
            mult,
        )
    unscaled = sorted(
        {n for g in out.gpus.values() for n in g.names if (N.key_of(n) or "").endswith("_mhz")}
        - set(mult)
    )
    if unscaled:
        out.notes.append(
            f"the export's GpuMetricsConfig gives {', '.join(unscaled)} no multiplier: read as"
            " sampled"
        )
    return out


def _system_env(conn: sqlite3.Connection, tables: Schema, name: str) -> str | None:
    if "TARGET_INFO_SYSTEM_ENV" not in tables:
        return None
    row = conn.execute(
        f'SELECT value FROM "{tables.name("TARGET_INFO_SYSTEM_ENV")}" WHERE name = ?', (name,)
    )
    got = row.fetchone()
    return str(got[0]) if got and got[0] is not None else None


def _capture_end(conn: sqlite3.Connection, tables: Schema) -> int | None:
    """The capture window's end in the report's clock (it starts at 0)."""
    details = tables.name("ANALYSIS_DETAILS")
    if "ANALYSIS_DETAILS" not in tables or "duration" not in _cols(conn, details):
        return None
    row = conn.execute(f'SELECT max(duration) FROM "{details}"').fetchone()
    return int(row[0]) if row and isinstance(row[0], int) and row[0] > 0 else None


def _pivot(
    device: int,
    uuid: str | None,
    t: Any,
    mid: Any,
    val: Any,
    names: dict[int, str],
    mult: dict[str, float],
) -> GpuSamples:
    """Rows (time, metric, value) of one GPU as sample times x metric columns."""
    cols = [int(m) for m in np.unique(mid).tolist() if int(m) in names]
    known = np.isin(mid, cols)
    if not known.all():
        t, mid, val = t[known], mid[known], val[known]
    times, row = np.unique(t, return_inverse=True)
    values = np.full((times.size, len(cols)), np.nan)
    values[row.reshape(-1), np.searchsorted(np.array(cols, dtype=np.int64), mid)] = val
    labels = [names[m] for m in cols]
    for i, n in enumerate(labels):
        f = mult.get(n, mult.get(N.split(n)[0]))
        if f is not None and f != 1.0:
            values[:, i] *= f
    return GpuSamples(device, uuid, times.astype(np.int64), labels, values)


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
