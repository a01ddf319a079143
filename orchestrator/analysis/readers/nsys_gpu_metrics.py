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
are left out. Every array is sized by the rows the table holds, never by an id's range: the
rows are split by typeId in one sorted pass, and a GPU's grid of sample times x metrics is
built only while it is as dense as a sampler writes it (`GRID_PER_ROW`); text, fractions and
values below 0 are left out and counted, never read as 0 (issue 42, class 4).
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
    names: dict[int, dict[int, str]] = {}  # typeId -> metricId -> name
    type_gpu: dict[int, int] = {}
    for type_id, source_id, metric_id, name in conn.execute(
        f'SELECT typeId, sourceId, metricId, metricName FROM "{tname(NAMES)}"'
    ):
        if not all(isinstance(v, int) for v in (type_id, source_id, metric_id)):
            continue
        names.setdefault(type_id, {})[metric_id] = str(name)
        pw = type_id - source_id
        type_gpu[type_id] = pw_to_id.get(pw, pw)
    if not names:
        return out
    from orchestrator.analysis.readers import sqlite_columns  # only where the table is there

    mult, config_note = N.read_multipliers(_system_env(conn, tables, "GpuMetricsConfig"))
    if config_note:
        out.notes.append(config_note)
    end = _capture_end(conn, tables)
    cols = ["timestamp", "typeId", "metricId", "value"]
    (t, typ, mid, val), not_numbers = sqlite_columns.fetch_columns_counted(
        path, tname(TABLE), cols, has_times=False, whole=tuple(cols)
    )
    # a metric's value is a count, a percentage, a rate or a clock: never below 0 (a NULL is
    # read as -1 by both readers); text and fractions were left out by the read, in any column
    negative = val < 0
    not_numbers += int(np.count_nonzero(negative))
    keep = (t >= 0) & ~negative
    if end is not None:
        keep &= t <= end
    if not keep.all():
        t, typ, mid, val = t[keep], typ[keep], mid[keep], val[keep]
    if not_numbers:
        out.notes.append(
            f"{TABLE}: {not_numbers} row(s) hold what is not a count (text, NULL, a fraction or a"
            " value below 0): left out, never read as 0"
        )
    # one pass over the rows for all GPUs: sorted by typeId, each GPU's rows a slice
    order = np.argsort(typ, kind="stable")
    typ = typ[order]
    starts = np.flatnonzero(np.r_[True, typ[1:] != typ[:-1]]) if typ.size else np.zeros(0, int)
    bounds = np.r_[starts, typ.size]
    unknown: list[int] = []
    # the typeId whose samples each GPU has, and their count: two typeIds naming one GPU keep
    # the one with more samples (said), never the last one read
    chosen: dict[int, int] = {}
    doubled = 0
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        type_id = int(typ[a])
        if type_id not in type_gpu:
            unknown.append(type_id)
            continue
        device = type_gpu[type_id]
        if device in chosen:
            doubled += 1
            if chosen[device] >= b - a:
                continue
        rows = order[a:b]
        got, why = _pivot(
            device, out.uuids.get(device), t[rows], mid[rows], val[rows], names[type_id], mult
        )
        if why is not None:
            out.notes.append(f"{TABLE} typeId {type_id}: {why}")
        if got is not None:
            out.gpus[device] = got
            chosen[device] = b - a
    if doubled:
        out.notes.append(
            f"{TABLE}: {doubled} typeId(s) name a GPU another typeId names too: each GPU keeps"
            " the typeId with most samples"
        )
    if unknown:
        shown = ", ".join(map(str, unknown[:5])) + (" ..." if len(unknown) > 5 else "")
        out.notes.append(
            f"{TABLE}: {len(unknown)} typeId(s) not in {NAMES} ({shown}): their samples left out"
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


# A sampler writes every metric of its set at each sample time: its table is dense. The grid of
# sample times x metrics is built only while it holds at least a quarter of values (and a few
# thousand cells of slack): an export whose ids scatter its rows over a huge grid (40,000 ids
# asked 11.9 GiB for 4.4 MB) is noted, never allocated. Memory: at most 8 bytes x (4 rows +
# 4096) per GPU.
GRID_PER_ROW = 4
GRID_SLACK = 4096


def _pivot(
    device: int,
    uuid: str | None,
    t: Any,
    mid: Any,
    val: Any,
    names: dict[int, str],
    mult: dict[str, float],
) -> tuple[GpuSamples | None, str | None]:
    """Rows (time, metric, value) of one GPU as sample times x metric columns, and what to say
    of them: None and why for a grid far sparser than a sampler writes; two rows of one metric
    at one time keep the later row (said)."""
    known = np.isin(mid, np.fromiter(names, dtype=np.int64, count=len(names)))
    if not known.all():
        t, mid, val = t[known], mid[known], val[known]
    cols = np.unique(mid)
    times, row = np.unique(t, return_inverse=True)
    cells = int(times.size) * int(cols.size)
    if cells > GRID_PER_ROW * int(t.size) + GRID_SLACK:
        return None, (
            f"{t.size} samples spread over {times.size} times x {cols.size} metrics, not the"
            " grid a sampler writes (every metric at each time): its samples left out"
        )
    values = np.full((times.size, cols.size), np.nan)
    cell = row.reshape(-1) * cols.size + np.searchsorted(cols, mid)
    # each cell's last row (in table order): the later of two rows at one time and metric
    _, from_end = np.unique(cell[::-1], return_index=True)
    last = cell.size - 1 - from_end
    values.flat[cell[last]] = val[last]
    repeated = int(cell.size - last.size)
    labels = [names[int(m)] for m in cols.tolist()]
    for i, n in enumerate(labels):
        f = mult.get(n, mult.get(N.split(n)[0]))
        if f is not None and f != 1.0:
            values[:, i] *= f
    why = (
        f"{repeated} row(s) repeat a metric at a sample time already read: the later row kept"
        if repeated
        else None
    )
    return GpuSamples(device, uuid, times.astype(np.int64), labels, values), why
