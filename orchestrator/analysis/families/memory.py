"""Memory of one entry: copies by direction, Unified-Memory faults and migrations, peak GPU
memory (docs/metrics.md)."""

from __future__ import annotations

import numpy as np

from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import Activity, CopyDirection, UmMigrationCause, UnifiedMemory
from orchestrator.analysis.timeline import model as T


def copies(rows: T.GpuTable) -> list[CopyDirection]:
    """Memcpys by direction: count, bytes, summed duration, bandwidth (GB/s = 1e9 B/s)."""
    m = rows.kind == T.MEMCPY
    if not bool(m.any()):
        return []
    code = rows.copy[m].astype(np.int64)
    dur = (rows.end - rows.start)[m]
    nbytes = rows.nbytes[m]
    keys, inv = np.unique(code, return_inverse=True)
    cnt = np.bincount(inv, minlength=keys.size)
    tot = np.bincount(inv, weights=dur, minlength=keys.size)
    byt = np.bincount(inv, weights=nbytes, minlength=keys.size)
    out = [
        CopyDirection(
            direction=T.copy_name(int(k)),
            count=int(cnt[i]),
            bytes=round(byt[i]),
            total_ns=round(tot[i]),
            bandwidth_gb_s=round(byt[i]) / round(tot[i]) if round(tot[i]) else None,
        )
        for i, k in enumerate(keys.tolist())
    ]
    return sorted(out, key=lambda c: _order(c.direction))


def _order(direction: str) -> tuple[int, str]:
    code = T.COPY_CODES.get(direction)
    return (code if code is not None and code > 0 else 1000, direction)


def unified_memory(
    tl: T.RankTimeline, devices: list[int], cp: list[CopyDirection], a: Activity, first: bool
) -> UnifiedMemory:
    """UM migrations (the UM copy kinds) and their shares of memory operations; page faults
    (CPU faults on the rank's first entry, GPU faults per device)."""
    um = UnifiedMemory()
    for c in cp:
        code = T.COPY_CODES.get(c.direction)
        if code in T.UM_COPIES:
            um.migrations += c.count
            um.migration_ns += c.total_ns
            attr = f"migrated_{T.UM_COPIES[code]}_bytes"
            setattr(um, attr, getattr(um, attr) + c.bytes)
    um.share_of_memory_ops_pct = pct(um.migrations, a.memcpy_count + a.memset_count)
    um.share_of_memory_time_pct = pct(um.migration_ns, a.memcpy_ns + a.memset_ns)
    if first:
        um.cpu_page_faults = tl.um.cpu_faults
    if tl.um.gpu_faults is not None and devices:
        groups = sum(tl.um.gpu_faults.get(d, (0, 0))[0] for d in devices)
        faults = sum(tl.um.gpu_faults.get(d, (0, 0))[1] for d in devices)
        um.gpu_page_faults = faults
        um.gpu_fault_groups = groups
        access: dict[str, int] = {}
        for d in devices:
            for code, n in tl.um.gpu_fault_access.get(d, {}).items():
                name = T.UM_ACCESS.get(code, f"access {code}")
                access[name] = access.get(name, 0) + n
        um.gpu_faults_by_access = dict(sorted(access.items(), key=lambda kv: -kv[1]))
    um.by_cause = _by_cause(tl, devices)
    return um


def _by_cause(tl: T.RankTimeline, devices: list[int]) -> list[UmMigrationCause]:
    """The entry's UM migrations by direction and cause, in copy-code then cause order."""
    tot: dict[tuple[int, int], tuple[int, int, int]] = {}
    for d in devices:
        for key, (n, b, ns) in tl.um.migrations.get(d, {}).items():
            n0, b0, ns0 = tot.get(key, (0, 0, 0))
            tot[key] = (n0 + n, b0 + b, ns0 + ns)
    return [
        UmMigrationCause(
            direction=T.copy_name(copy),
            cause=T.UM_CAUSES.get(cause, f"cause {cause}"),
            count=n,
            bytes=b,
            total_ns=ns,
        )
        for (copy, cause), (n, b, ns) in sorted(tot.items())
    ]


def peak_memory(tl: T.RankTimeline, devices: list[int]) -> tuple[int | None, str | None]:
    """Peak GPU memory of the entry's devices (every device of the rank when the entry has no
    GPU activity; a trace-wide figure when the source has no device: Kineto's `[memory]`
    events), with its source."""
    vals = [tl.peak_memory[d] for d in _devices(tl.peak_memory, devices)]
    if not vals and -1 in tl.peak_memory:
        vals = [tl.peak_memory[-1]]
    if not vals:
        return None, None
    return max(vals), tl.peak_memory_source


def peak_apart(peaks: dict[int, int], devices: list[int]) -> int | None:
    """Peak pinned host or managed memory of the entry's devices (nsys; None when not seen)."""
    vals = [peaks[d] for d in _devices(peaks, devices)]
    return max(vals) if vals else None


def _devices(peaks: dict[int, int], devices: list[int]) -> list[int]:
    """The entry's devices with a peak; all of the rank's when the entry has no GPU activity
    (a report whose import stopped before any kernel still holds the allocations)."""
    if devices:
        return [d for d in devices if d in peaks]
    return [d for d in peaks if d >= 0]
