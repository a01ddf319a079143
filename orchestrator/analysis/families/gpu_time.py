"""GPU time of one entry (a device of a rank, or every device of a Kineto trace): span, busy,
idle, idle gaps, the busy-fraction timeline and the activity split (docs/metrics.md).

Rows come sorted by start (`sort_gpu`), so every union here is one pass of numpy over them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import Activity
from orchestrator.analysis.timeline import intervals
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.columns import distinct


def sort_gpu(gpu: T.GpuTable, by_device: bool) -> T.GpuTable:
    """The table sorted by start, stable, and first by device when `by_device` (entries per
    device); columns are permuted one at a time so that only one extra column is alive."""
    if gpu.size == 0:
        return gpu
    order = np.argsort(gpu.start, kind="stable")
    dev = gpu.device[order]
    if by_device and dev.size and int(dev.min()) != int(dev.max()):
        codes, inv = np.unique(dev, return_inverse=True)
        key = inv.astype(np.int16 if codes.size < 1 << 15 else np.int32)
        order = order[np.argsort(key, kind="stable")]  # radix sort of small keys
    del dev
    for c in T.GPU_COLUMNS:
        col = getattr(gpu, c)
        if not T.is_constant(col):
            setattr(gpu, c, col[order])
    return gpu


def entries(gpu: T.GpuTable, split_devices: bool) -> list[tuple[list[int], slice]]:
    """(devices, row slice) of each entry of a table sorted by `sort_gpu`: one per device with
    GPU activity when `split_devices`, else one for all. Rows of devices without activity
    (only annotations) stay with the entry of the first device."""
    act = T.is_activity(gpu.kind)
    devices = distinct(gpu.device[act])
    if not devices:
        return [([], slice(0, gpu.size))]
    if not split_devices or len(devices) == 1:
        return [(devices, slice(0, gpu.size))]
    out = []
    bounds = np.searchsorted(gpu.device, [*devices, devices[-1] + 1])
    for i, d in enumerate(devices):
        lo = 0 if i == 0 else int(bounds[i])
        hi = gpu.size if i == len(devices) - 1 else int(bounds[i + 1])
        out.append(([d], slice(lo, hi)))
    return out


@dataclass
class GpuTime:
    """The union of one entry's GPU activity (kernels, memcpys, memsets)."""

    union: intervals.UnionResult
    activity: Activity
    # the merged intervals, and whether they cover every row (then HTA's view of an nsys
    # entry is the same rows and reuses them)
    groups: tuple[Any, Any]
    every_row: bool


def gpu_time(rows: T.GpuTable) -> GpuTime:
    """Span, busy, gaps and the activity split of rows sorted by start."""
    act = T.is_activity(rows.kind) & (rows.end >= rows.start)
    every = bool(act.all())
    s, e = (rows.start, rows.end) if every else (rows.start[act], rows.end[act])
    groups = intervals.groups_sorted(s, e)
    union = intervals.union_from_groups(*groups, int(s.size))
    del s, e
    kinds = ((T.KERNEL, "kernel"), (T.MEMCPY, "memcpy"), (T.MEMSET, "memset"))
    counts = {key: 0 for _, key in kinds}
    totals = {key: 0 for _, key in kinds}
    for lo in range(0, rows.size, intervals.GROUP_CHUNK_ROWS):  # bounded temporaries
        hi = lo + intervals.GROUP_CHUNK_ROWS
        kind = rows.kind[lo:hi]
        dur = rows.end[lo:hi] - rows.start[lo:hi]
        for k, key in kinds:
            m = kind == k
            counts[key] += int(m.sum())
            totals[key] += int(dur[m].sum())
    total = sum(totals.values())
    activity = Activity(
        kernel_count=counts["kernel"],
        memcpy_count=counts["memcpy"],
        memset_count=counts["memset"],
        kernel_ns=totals["kernel"],
        memcpy_ns=totals["memcpy"],
        memset_ns=totals["memset"],
        kernel_pct=pct(totals["kernel"], total),
        memcpy_pct=pct(totals["memcpy"], total),
        memset_pct=pct(totals["memset"], total),
    )
    return GpuTime(union=union, activity=activity, groups=groups, every_row=every)
