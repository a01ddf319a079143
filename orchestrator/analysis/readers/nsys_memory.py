"""Memory in an nsys export: Unified-Memory page faults and migrations, and the peak of GPU
memory per memory class.

- CUDA_UM_CPU_PAGE_FAULT_EVENTS (one row per fault, no `end` column: counted, never timed),
  CUDA_UM_GPU_PAGE_FAULT_EVENTS (numberOfPageFaults, faultAccessType), the UM copies'
  `migrationCause` (ENUM_CUDA_UNIF_MEM_MIGRATION: gathered by the memcpy table's read,
  `migration_groups`), CUDA_GPU_MEMORY_USAGE_EVENTS (`memKind` per ENUM_CUDA_MEM_KIND: device
  memory for the peak, pinned host and managed memory apart).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.readers.nsys_db import (
    GPU_MEM,
    MEMCPY,
    UM_CPU,
    UM_GPU,
    Db,
    Export,
    as_int,
    pid_tid,
)
from orchestrator.analysis.readers.sql_integers import is_size, is_time
from orchestrator.analysis.readers.sqlite_columns import Subset
from orchestrator.analysis.timeline import memory as M
from orchestrator.analysis.timeline import model as T

UM_KINDS = T.UM_COPIES
# CUDA_GPU_MEMORY_USAGE_EVENTS.memKind (ENUM_CUDA_MEM_KIND): 0 pageable, 1 pinned, 2 device,
# 3 array, 4 managed, 5 device static, 6 managed static, 7 unknown. Peak GPU memory counts the
# device kinds only: pinned host buffers (activation offloading) and managed memory (whose pages
# may live on either side) are peaks of their own.
MEM_CLASSES = {1: "pinned", 2: "device", 3: "device", 4: "managed", 5: "device", 6: "managed"}


def um_migrations(db: Db) -> bool:
    """Whether the memcpy table says why Unified-Memory pages moved."""
    return db.has(MEMCPY, "deviceId", "copyKind", "bytes", "migrationCause")


def migration_groups(
    gpu: T.GpuTable, rows: slice, copy: Any, pid: Any, sub: Subset
) -> list[tuple[int, ...]]:
    """(globalPid, device, kind, cause, count, summed bytes, summed ns) of the UM copies
    among the memcpy rows just read, per (globalPid, device, kind, cause) ascending (what the
    SQL `SELECT globalPid, deviceId, copyKind, coalesce(migrationCause, 0), count(*),
    sum(bytes), sum("end" - start) ... GROUP BY 1, 2, 3, 4` gives over the rows read). `copy`:
    the copy kinds as read; `pid`: the rows' globalPid (None: -1, the table has none); `sub`:
    the UM copies' causes, gathered by the read (`sqlite_columns.Subset`: the rows whose copy
    kind as read is a UM kind)."""
    um = np.flatnonzero(np.isin(copy, list(UM_KINDS)))
    (cause,) = sub.columns()
    if um.size != cause.size:  # both readers pick the rows by the values read: never
        raise RuntimeError(
            f"{MEMCPY}: {um.size} UM copies read but {cause.size} migration causes gathered"
        )
    if um.size == 0:
        return []
    at = um + rows.start
    cols = [
        pid[at] if pid is not None else np.full(um.size, -1, dtype=np.int64),
        gpu.device[at].astype(np.int64),
        copy[um],
        cause,
    ]
    keys, inv = unique_rows(cols)
    n = np.bincount(inv, minlength=len(keys))
    nbytes = np.zeros(len(keys), dtype=np.int64)
    np.add.at(nbytes, inv, gpu.nbytes[at])
    ns = np.zeros(len(keys), dtype=np.int64)
    np.add.at(ns, inv, gpu.end[at] - gpu.start[at])
    return [
        (*k, c, b, t)
        for k, c, b, t in zip(keys, n.tolist(), nbytes.tolist(), ns.tolist(),
                              strict=True)
    ]  # fmt: skip


def unified_memory(
    ex: Export, um_copies: bool, found: list[tuple[int, ...]] | None
) -> tuple[T.UnifiedMemoryEvents, dict[int, T.UnifiedMemoryEvents]]:
    """Unified-Memory events of the whole file and per process (pid; -1 where a table has no
    globalPid): CPU page faults (rows: the table has no `end`), GPU page faults (groups =
    rows, faults = sum of numberOfPageFaults) by device and access type, and, when the GPU
    table holds UM copies, the migrations by device, copy kind and `migrationCause` (`found`:
    those `migration_groups` gathered from the memcpy read)."""
    db = ex.db
    whole = T.UnifiedMemoryEvents()
    per: dict[int, T.UnifiedMemoryEvents] = {}

    def both(gp: Any) -> tuple[T.UnifiedMemoryEvents, T.UnifiedMemoryEvents]:
        p = int(pid_tid(gp)[0]) if isinstance(gp, int) and gp >= 0 else -1
        return whole, per.setdefault(p, T.UnifiedMemoryEvents())

    if db.has(UM_CPU):
        cpu = db.name(UM_CPU)
        whole.cpu_faults = int(db.q(f'SELECT count(*) FROM "{cpu}"')[0][0])
        if "globalPid" in db.cols(UM_CPU):
            for gp, n in db.q(f'SELECT globalPid, count(*) FROM "{cpu}" GROUP BY globalPid'):
                both(gp)[1].cpu_faults = int(n)
    else:
        ex.missing.append(UM_CPU)
    if db.has(UM_GPU, "deviceId"):
        whole.gpu_faults = {}
        cols = db.cols(UM_GPU)
        count = "sum(numberOfPageFaults)" if "numberOfPageFaults" in cols else "count(*)"
        pid = "globalPid" if "globalPid" in cols else "-1"
        access = "faultAccessType" if "faultAccessType" in cols else "0"
        for gp, dev, acc, groups, faults in db.q(
            f'SELECT {pid}, deviceId, {access}, count(*), {count} FROM "{db.name(UM_GPU)}"'
            f" GROUP BY {pid}, deviceId, {access}"
        ):
            if not isinstance(dev, int):
                continue
            for ev in both(gp):
                ev.add_gpu_faults(dev, as_int(acc), int(groups), as_int(faults))
    else:
        ex.missing.append(UM_GPU)
    # only when the copies read hold UM kinds: grouped from the memcpy read, else (values
    # that are not all integers) a query, which scans the memcpy table
    # (`found` is None only where no memcpy row was read: then `um_copies` is False)
    if um_copies and um_migrations(db) and found is not None:
        for gp, dev, kind, cause, n, nbytes, ns in found:
            if not isinstance(dev, int) or not isinstance(kind, int):
                continue
            for ev in both(gp):
                ev.add_migrations(dev, kind, as_int(cause), int(n), as_int(nbytes), as_int(ns))
    return whole, per


def peak_memory(db: Db) -> tuple[dict[int, dict[str, dict[int, int]]], str | None]:
    """Peak of the running sum of allocations - frees per memory class (`MEM_CLASSES`: device
    memory, and apart pinned host and managed memory) and device: for the whole file (key
    -1) and per process (the pid of `globalPid`: in a report holding several ranks each
    counts its own allocations); and its source text (None without the table)."""
    peaks: dict[int, dict[str, dict[int, int]]] = {}
    if not db.has(GPU_MEM, "deviceId", "bytes", "memoryOperationType"):
        return peaks, None
    cols = db.cols(GPU_MEM)
    has_kind = "memKind" in cols
    kind = "memKind" if has_kind else "2"
    pid = "globalPid" if "globalPid" in cols else "-1"
    cur: dict[tuple[int, str, int], int] = {}
    starts: set[int] = set()
    for gp, dev, nbytes, op, k, start in db.conn.execute(
        f"SELECT {pid}, deviceId, bytes, memoryOperationType, {kind}, start"
        f' FROM "{db.name(GPU_MEM)}"'
        # in time; at one nanosecond frees first (no export met has such ties), then the
        # rest of the row: never the stored order
        f" ORDER BY start, memoryOperationType DESC, deviceId, bytes, {kind}, {pid}"
    ):
        cls = MEM_CLASSES.get(k) if isinstance(k, int) else None
        # a size no machine holds is no allocation (it made a peak of 2**63 bytes)
        if cls is None or not isinstance(dev, int) or not is_size(nbytes):
            continue
        if cls == "device" and isinstance(start, int):
            starts.add(start)
        p = int(pid_tid(gp)[0]) if isinstance(gp, int) and gp >= 0 else -2
        for who in (-1, p):
            key = (who, cls, dev)
            cur[key] = cur.get(key, 0) + (-nbytes if op == 1 else nbytes)
            per = peaks.setdefault(who, {}).setdefault(cls, {})
            if cur[key] > per.get(dev, 0):
                per[dev] = cur[key]
    # short: the CLI prints it on one line; docs/metrics.md says the rest (pinned host and
    # managed memory are peaks of their own)
    kinds = "device memory (memKind 2,3,5)" if has_kind else "every memKind (no such column)"
    # nsys writes the allocations alive when the capture opens as rows at start 0; with no
    # other row the peak is what was held then (torch's caching allocator reuses its pool
    # without calling cudaMalloc), not a peak measured inside the window
    when = "held at capture start" if starts <= {0} else "peak in the window"
    return peaks, f"nsys memory-usage events: {kinds}, {when}"


def memory_timelines(db: Db) -> dict[int, list[M.MemoryTimeline]]:
    """What each process took from CUDA for device memory (memKind 2, 3, 5) and gave back, in
    time: one CUDA-level memory timeline per process (pid; -1 for the whole file) and device.
    Only where the window holds such events: rows at `start` 0 alone are what was held when the
    capture opened (`peak_memory` says that), no history."""
    out: dict[int, list[M.MemoryTimeline]] = {}
    if not db.has(GPU_MEM, "deviceId", "bytes", "memoryOperationType", "start"):
        return out
    cols = db.cols(GPU_MEM)
    if "memKind" not in cols:
        return out
    later = db.q(f"SELECT count(*) FROM {GPU_MEM} WHERE start > 0 AND memKind IN (2, 3, 5)")
    if not later or not later[0][0]:
        return out
    pid = "globalPid" if "globalPid" in cols else "-1"
    addr = "address" if "address" in cols else "0"
    rows: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
    for gp, dev, nbytes, op, start, ad in db.conn.execute(
        f"SELECT {pid}, deviceId, bytes, memoryOperationType, start, {addr} FROM {GPU_MEM}"
        " WHERE memKind IN (2, 3, 5)"
        f" ORDER BY start, memoryOperationType DESC, deviceId, bytes, {pid}"
    ):
        if not (isinstance(dev, int) and is_size(nbytes) and is_time(start)):
            continue
        p = int(pid_tid(gp)[0]) if isinstance(gp, int) and gp >= 0 else -1
        code = M.SEGMENT_FREE if op == 1 else M.SEGMENT_ALLOC
        a = ad if isinstance(ad, int) else -1
        rows.setdefault((p, dev), []).append((start, code, a, nbytes))
    for (p, dev), got in sorted(rows.items()):
        t_c, code_c, a_c, n_c = (np.array(c, dtype=np.int64) for c in zip(*got, strict=True))
        ev = M.MemoryEvents(
            t_c, code_c.astype(np.int8), a_c, n_c, np.full(t_c.size, -1, dtype=np.int32)
        )
        tl = M.MemoryTimeline(
            source="nsys memory-usage events", level="cuda", device=dev, events=ev,
            start_reserved=0,
        )  # fmt: skip
        out.setdefault(p, []).append(tl)
        if p != -1:
            out.setdefault(-1, []).append(tl)
    return out


def unique_rows(cols: list[Any]) -> tuple[list[tuple[int, ...]], Any]:
    """The distinct rows of equal-length integer columns in ascending (lexicographic) order,
    and each row's index among them: `np.unique(np.stack(cols, 1), axis=0, return_inverse=
    True)` at a fraction of its cost (each column coded by its own sorted values, the codes
    packed into one integer; the few distinct values of each column keep it small)."""
    code = np.zeros(cols[0].size, dtype=np.int64)
    values = []
    room = 1
    for c in cols:
        vals, inv = np.unique(c, return_inverse=True)
        room *= max(vals.size, 1)
        if room >= 1 << 62:  # too many distinct values to pack: the slow way
            rows, inv = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
            return [tuple(k) for k in rows.tolist()], inv.reshape(-1)
        code = code * vals.size + inv.reshape(-1)
        values.append(vals)
    uniq, inv = np.unique(code, return_inverse=True)
    keys: list[tuple[int, ...]] = []
    for k in uniq.tolist():
        row = []
        for vals in reversed(values):
            k, i = divmod(k, vals.size)
            row.append(int(vals[i]))
        keys.append(tuple(reversed(row)))
    return keys, inv.reshape(-1)
