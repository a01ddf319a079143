"""The GPU tables of an nsys export: kernels, memcpys and memsets into one `GpuTable`, and each
activity's launch time from the runtime calls.

- CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId, globalPid,
  demangledName/shortName → StringIds), CUPTI_ACTIVITY_KIND_MEMCPY (copyKind per
  ENUM_CUDA_MEMCPY_OPER: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, 11/12/13 Unified HtoD/DtoH/DtoD,
  bytes), CUPTI_ACTIVITY_KIND_MEMSET; memcpys and memsets are named `Memcpy HtoD`, `Memset` in
  the timeline (so HTA's name rules class them as memory);
- CUPTI_ACTIVITY_KIND_GRAPH_TRACE: a CUDA graph launch traced whole (nsys's default
  `--cuda-graph-trace=graph`: the graph's kernels get no rows of their own), one kernel-kind row
  of the graph's duration named `CUDA graph <graphId>`, launched by its `cudaGraphLaunch`; without
  it a workload of CUDA graphs reads as a GPU idle all along;
- CUPTI_ACTIVITY_KIND_RUNTIME: the launch time of every GPU activity (same correlationId: HTA's
  idle-time breakdown needs it).

The GPU tables are queued on the reader's thread pool at once (`queue`), in parts
(`sqlite_columns.TableRead`), and put together once read (`collect`); the UM copies' migration
causes come from the memcpy table's scan (`nsys_memory`).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.readers import nsys_memory
from orchestrator.analysis.readers import table_parts as TP
from orchestrator.analysis.readers.nsys_db import (
    GRAPH,
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    Export,
    map_ids,
    pid_tid,
)
from orchestrator.analysis.readers.sql_integers import SIZE_LIMIT_BYTES
from orchestrator.analysis.readers.sqlite_columns import Subset, TableRead, table_shape
from orchestrator.analysis.timeline import columns
from orchestrator.analysis.timeline import model as T


@dataclass
class GpuReads:
    """The GPU tables being read (`queue`): per table (name, columns, its slice of the table,
    the column of kernel name ids or copy kinds, the UM subset, the read)."""

    gpu: T.GpuTable
    pid: Any
    reads: list[tuple[str, list[str], slice, Any, Subset | None, TableRead | None]]


@dataclass
class GpuRead:
    """The GPU tables read (`collect`): the table, each row's pid (None: not read), and the UM
    migrations grouped from the memcpy read (`nsys_memory.migration_groups`; None: the memcpy
    table was not read, or says no migration cause)."""

    gpu: T.GpuTable
    pid: Any
    um_found: list[tuple[int, ...]] | None


def _plan(ex: Export) -> list[tuple[str, list[str], TP.Shape | None, int]]:
    """(table, columns, its rows (`table_parts.Shape`; None: no row), offset) of the GPU
    tables present."""
    db = ex.db
    plan = []
    offset = 0
    name_col = db.kernel_name_col()
    tables = ((KERNEL, ()), (MEMCPY, ("copyKind", "bytes")), (MEMSET, ("bytes",)),
              (GRAPH, ("graphId",)))  # fmt: skip
    for table, extra in tables:
        if not db.has(table, "start", "end", "deviceId") or (table == KERNEL and not name_col):
            if table not in db.tables and table != GRAPH:  # no graphs: nothing missing
                ex.missing.append(table)
            continue
        cols = ["start", "end", "deviceId", *ex.opt(table, "streamId", "correlationId")]
        cols += [name_col] if table == KERNEL and name_col else list(ex.opt(table, *extra))
        shape = table_shape(ex.path, ex.table(table), db.conn)
        plan.append((table, cols, shape, offset))
        offset += shape.rows if shape else 0
    return plan


def queue(ex: Export, pool: ThreadPoolExecutor, by_pid: bool) -> GpuReads:
    """Kernels, memcpys and memsets into one preallocated table, queued on `pool` in parts
    (`TableRead`); `collect` waits for them. `by_pid`: read each row's process too."""
    plan = _plan(ex)
    total = sum(p[2].rows for p in plan if p[2] is not None)
    gpu = T.GpuTable(*(np.empty(total, dtype=t) for t in T.GPU_DTYPES))
    gpu.stream.fill(T.NONE)
    gpu.corr.fill(T.NONE)
    # no memory until `launches` has the runtime calls (it allocates the column once the
    # runtime columns are let go: a peak of memory otherwise)
    gpu.launch = T.constant(T.NONE, total, np.int64)
    # zeros from calloc: pages no row writes (the kernels' bytes and copy kinds) take no
    # memory
    gpu.nbytes = np.zeros(total, dtype=gpu.nbytes.dtype)
    gpu.copy = np.full(total, T.COPY_NONE, dtype=gpu.copy.dtype) if T.COPY_NONE else (
        np.zeros(total, dtype=gpu.copy.dtype)
    )  # fmt: skip
    pid = np.zeros(total, dtype=np.int64) if by_pid else None
    reads = []
    for table, cols, shape, offset in plan:
        count = shape.rows if shape else 0
        cols = cols + (["globalPid"] if by_pid and "globalPid" in ex.db.cols(table) else [])
        sl = slice(offset, offset + count)
        extra = np.empty(count, dtype=np.int64)  # kernel name ids or copy kinds
        targets: dict[str, Any] = {
            "start": gpu.start[sl],
            "end": gpu.end[sl],
            "deviceId": gpu.device[sl],
            "streamId": gpu.stream[sl],
            "correlationId": gpu.corr[sl],
            "bytes": gpu.nbytes[sl],
            "globalPid": pid[sl] if pid is not None else None,
        }
        sub = None
        if table == MEMCPY and nsys_memory.um_migrations(ex.db):
            # the migration cause of the UM copies, in the same scan (`nsys_memory`)
            sub = Subset("copyKind", tuple(nsys_memory.UM_KINDS), (("migrationCause", 0),))
        out = [targets.get(c, extra) for c in cols]
        read = (
            TableRead(pool, ex.path, ex.table(table), cols, out, shape, True, sub)
            if shape
            else None
        )
        reads.append((table, cols, sl, extra, sub, read))
    return GpuReads(gpu, pid, reads)


def collect(ex: Export, pending: GpuReads) -> GpuRead:
    """The GPU table of `queue` once read, the pid of every row when the export holds several
    processes with CUDA work, and the UM migrations grouped from the memcpy read."""
    gpu, pid = pending.gpu, pending.pid
    um_found = None
    keep = []
    for table, cols, sl, extra, sub, read in pending.reads:
        got, skipped = read.result() if read is not None else (0, 0)
        extra = extra[:got]
        if sub is not None:
            um_found = nsys_memory.migration_groups(
                gpu, slice(sl.start, sl.start + got), extra,
                pid if "globalPid" in cols else None, sub,
            )  # fmt: skip
        if skipped:
            ex.notes.append(
                f"{skipped} rows of {table} left out: start or end missing, not an integer,"
                " beyond 2^62 ns, or end before start"
            )
        rows = slice(sl.start, sl.start + got)
        keep.append(rows)
        kind = {KERNEL: T.KERNEL, MEMCPY: T.MEMCPY, MEMSET: T.MEMSET, GRAPH: T.KERNEL}[table]
        gpu.kind[rows] = kind
        if table == KERNEL:
            gpu.name[rows] = kernel_names(ex, extra, ex.db.kernel_name_col())
        elif table == MEMCPY:
            code = extra if "copyKind" in cols else np.zeros(got, dtype=np.int64)
            lut = {
                k: ex.names.id(f"Memcpy {T.copy_name(int(k))}") for k in np.unique(code).tolist()
            }
            gpu.name[rows] = map_ids(code, lut)
            gpu.copy[rows] = code.astype(np.int8)
        elif table == GRAPH:
            ids = extra if "graphId" in cols else np.zeros(got, dtype=np.int64)
            lut = {k: ex.names.id(f"CUDA graph {k}") for k in np.unique(ids).tolist()}
            gpu.name[rows] = map_ids(ids, lut)
        else:
            gpu.name[rows] = ex.names.id("Memset")
        del extra
    pending.reads.clear()  # the `extra` columns go
    # a copy's or memset's size that no machine holds reads as unknown (0), as a missing one
    # does (`sql_integers.a_size`): 2**63 - 1 bytes summed past 64 bits
    odd = (gpu.nbytes < 0) | (gpu.nbytes >= SIZE_LIMIT_BYTES)
    if odd.any():
        gpu.nbytes[odd] = 0
    total = gpu.size
    if sum(r.stop - r.start for r in keep) != total:  # rows left out: close the holes
        idx = np.concatenate([np.arange(r.start, r.stop) for r in keep])
        gpu = gpu.take(idx)
        pid = pid[idx] if pid is not None else None
    if pid is not None:  # the process part of the GlobalIds (`pid_tid`), in place
        np.right_shift(pid, 24, out=pid)
        np.bitwise_and(pid, 0xFFFFFF, out=pid)
    return GpuRead(gpu, pid, um_found)


def kernel_names(ex: Export, ids: Any, name_col: str | None) -> Any:
    """Timeline name ids of kernel rows (StringIds ids, or the `name` column's values)."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int32)
    distinct = columns.distinct(ids)
    strs = ex.db.strings(distinct) if name_col != "name" else {}
    lut = {i: ex.names.id(strs.get(i, str(i))) for i in distinct}
    return map_ids(ids, lut)


def launches(gpu: T.GpuTable, gpu_pid: Any, rt: Iterator[dict[str, Any]]) -> None:
    """GpuTable.launch: the start of the runtime call with the same correlationId (of the
    same process when the export holds several). Of several calls with one id (a runtime
    call and the driver call inside it, or a tracing layer's wrapper and the call: the
    2022.2 export in tests/data/nsys), the latest start: what the table's last row gave in
    the exports met, and the same whatever order the rows are stored in. `rt`: the runtime
    columns (start, correlationId, globalTid) in parts."""
    if gpu.size == 0:
        return
    gc = gpu.corr
    hi = int(gc.max())
    if gpu_pid is None and 0 <= hi < 4 * gpu.size + (1 << 20):
        # dense ids: a lookup table filled part by part, each part let go once in it
        table = np.empty(hi + 1, dtype=np.int64)
        found = np.zeros(hi + 1, dtype=bool)
        for part in rt:
            rc, rs = part["correlationId"], part["start"]
            del part
            inside = (rc >= 0) & (rc <= hi)
            if not inside.all():
                rc, rs = rc[inside], rs[inside]
            seen = found[rc]
            earlier = table[rc[seen]] if seen.any() else None
            table[rc] = rs
            if (table[rc] != rs).any():  # an id twice in this part: the latest start
                np.maximum.at(table, rc, rs)
            if earlier is not None:  # an id of an earlier part: the latest start
                np.maximum.at(table, rc[seen], earlier)
            found[rc] = True
            del rc, rs, inside, seen, earlier
        launch = np.take(table, gc, mode="clip")  # ids below 0 clipped, then set to NONE
        del table
        launch[(gc < 0) | ~np.take(found, gc, mode="clip")] = T.NONE
        gpu.launch = launch
        _drop_corr(gpu)
        return
    parts = list(rt)
    if not parts or "correlationId" not in parts[0]:
        return
    rc = np.concatenate([p["correlationId"] for p in parts])
    rs = np.concatenate([p["start"] for p in parts])
    if gpu_pid is not None and "globalTid" in parts[0]:
        pid = pid_tid(np.concatenate([p["globalTid"] for p in parts]))[0]
        rc = (pid << 40) | (rc & ((1 << 40) - 1))
        gc = (gpu_pid << 40) | (gc & ((1 << 40) - 1))
    del parts
    if rc.size == 0:
        return
    order = np.lexsort((rs, rc))  # by id, then start: the last of each id starts latest
    rc = rc[order]
    rs = rs[order]
    del order
    last = np.ones(rc.size, dtype=bool)
    last[:-1] = rc[1:] != rc[:-1]
    rc, rs = rc[last], rs[last]
    j = np.searchsorted(rc, gc)
    np.minimum(j, rc.size - 1, out=j)
    hit = (rc[j] == gc) & (gpu.corr != T.NONE)
    gpu.launch = np.where(hit, rs[j], T.NONE)
    _drop_corr(gpu)


def _drop_corr(gpu: T.GpuTable) -> None:
    """Once launches are known nothing reads nsys correlation ids (HTA's last-step filter is
    for Kineto traces): a constant column in their place saves 8 bytes a row."""
    gpu.corr = T.constant(T.NONE, gpu.size, np.int64)


def runtime_cols(ex: Export, by_pid: bool) -> list[str]:
    """Runtime columns for the launch times: start and correlationId (and globalTid, to
    tell processes apart)."""
    if not ex.db.has(RUNTIME, "start", "end", "correlationId"):
        if RUNTIME not in ex.db.tables:
            ex.missing.append(RUNTIME)
        return []
    return ["start", "correlationId", *(["globalTid"] if by_pid else [])]
