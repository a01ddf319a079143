"""nsys GPU metrics (`--gpu-metrics-device`) as an export holds them: the samples of each GPU
the profiler sampled (`families/gpu_metrics.py` turns them into figures per entry, step and
lane).

Reading (`read`): `GPU_METRICS` (timestamp, typeId, metricId, value: one row per metric per
sample) joined to `TARGET_INFO_GPU_METRICS` on (typeId, metricId) for each metric's name
(`gpu_metric_names` says what a name means). The table holds millions of rows on a long
capture: its four integer columns are read through the page reader (`sqlite_columns.
fetch_columns`; SQLite's own path the fallback), about 3 times faster than rows through
Python's sqlite3 (bench/bench_gpu_metrics.py), and tested against plain SQL
(tests/unit/test_gpu_metrics.py). Samples outside the capture window
(`ANALYSIS_DETAILS.duration`: nsys samples from before the capture starts to after it stops)
are left out.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import gpu_metric_names as N
from orchestrator.analysis.readers.export_tables import Schema, read_schema

TABLE = "GPU_METRICS"
NAMES = "TARGET_INFO_GPU_METRICS"


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
