"""Reader of `nsys export --type sqlite` files → `RankMetrics` per active GPU of the file.

The file is opened read-only (`mode=ro` URI) and every string in it is data. Tables and columns
that a trace option did not produce, or that an nsys version names differently, are tolerated:
the metric they feed is left empty and the table is listed in `Source.missing`.

Tables read (documented export schema): CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId,
streamId, demangledName/shortName → StringIds), CUPTI_ACTIVITY_KIND_MEMCPY (copyKind per
ENUM_CUDA_MEMCPY_OPER: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, 11/12/13 Unified HtoD/DtoH/DtoD,
bytes), CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME (sync calls), NVTX_EVENTS
(eventType 59 push/pop, 60 start/end, 70 NVtx push/pop ranges; name = text or
StringIds[textId]), OSRT_API, ThreadNames, CUDA_UM_CPU_PAGE_FAULT_EVENTS,
CUDA_UM_GPU_PAGE_FAULT_EVENTS, CUDA_GPU_MEMORY_USAGE_EVENTS, TARGET_INFO_GPU,
TARGET_INFO_CUDA_STREAM / TARGET_INFO_CUDA_CONTEXT_INFO (which process owns the GPU work: its
main thread is the one whose blocking waits are measured), META_DATA_EXPORT (or
EXPORT_META_DATA in older exports).

Speed: the small aggregates are SQL GROUP BYs run on a second connection in a worker thread
(sqlite releases the GIL). With numpy, the kernel, memcpy and memset tables are read once, as
columns (`_fetch_columns`), and everything about them (union, per-name kernel totals, counts,
durations and bytes per device and copy kind) comes from those columns; without numpy, the
main thread streams the GPU intervals of each device, sorted by start in SQL, through
`core.union_pass` and the per-table totals are SQL GROUP BYs. A file with GPU activity on
several devices yields one `RankMetrics` per device; the process-wide CPU metrics (NVTX, OSRT
threads, sync calls, CPU page faults) are reported on the entry of the first device only.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.analysis import core
from orchestrator.analysis.metrics import (
    Activity,
    CopyDirection,
    FunctionStat,
    KernelStat,
    RangeStat,
    RankMetrics,
    Source,
    SyncStats,
    ThreadStat,
    UnifiedMemory,
)
from orchestrator.errors import UserError

if core.HAVE_NUMPY:
    import numpy as np

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
UM_CPU = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"
UM_GPU = "CUDA_UM_GPU_PAGE_FAULT_EVENTS"
GPU_MEM = "CUDA_GPU_MEMORY_USAGE_EVENTS"

COPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UM HtoD",
    12: "UM DtoH",
    13: "UM DtoD",
}
UM_KINDS = {11: "htod", 12: "dtoh", 13: "dtod"}
NVTX_RANGE_TYPES = (59, 60, 70)
SYNC_PATTERNS = (
    "cuda%Synchronize%",
    "cu%Synchronize%",
    "cudaStreamWaitEvent%",
    "cuStreamWaitEvent%",
)
TOP_KERNELS = 25
TOP_RANGES = 50
TOP_THREADS = 40
USE_JSON_EACH = True  # tests turn it off to check the chunked fallback of `_named_rows`


def connect_ro(path: Path) -> sqlite3.Connection:
    """Open an SQLite file read-only (never creates or modifies it)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file; pass an nsys SQLite export (.sqlite)")
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise UserError(
            f"{path}: not a readable SQLite file ({exc}); export it with"
            " `nsys export --type sqlite`"
        ) from exc
    return conn


class _Db:
    """Schema probing and string lookups on one read-only connection."""

    def __init__(self, path: Path) -> None:
        self.conn = connect_ro(path)
        self.tables = {
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        self._cols: dict[str, set[str]] = {}

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = (
                {r[1] for r in self.conn.execute(f'PRAGMA table_info("{table}")')}
                if table in self.tables
                else set()
            )
        return self._cols[table]

    def has(self, table: str, *cols: str) -> bool:
        return table in self.tables and all(c in self.cols(table) for c in cols)

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def strings(self, ids: Iterable[int]) -> dict[int, str]:
        want = sorted({int(i) for i in ids if i is not None})
        out: dict[int, str] = {}
        if "StringIds" not in self.tables:
            return out
        for i in range(0, len(want), 500):
            chunk = want[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(
                (int(k), str(v))
                for k, v in self.q(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", chunk)
            )
        return out

    def kernel_name_col(self) -> str | None:
        for c in ("demangledName", "shortName", "name"):
            if c in self.cols(KERNEL):
                return c
        return None


@dataclass
class _Aux:
    """Results of the aggregate queries (worker thread)."""

    kernels: dict[int, list[tuple[str, int, int]]] = field(default_factory=dict)
    sync: list[FunctionStat] = field(default_factory=list)
    # merged (starts, ends) of the sync calls of every thread, clipped to each span later
    sync_ranges: tuple[list[int], list[int]] = ([], [])
    ranges: list[RangeStat] = field(default_factory=list)
    step_ranges: list[tuple[str, int, int]] = field(default_factory=list)
    # merged (starts, ends) of the data-wait ranges, clipped to each device's span later
    data_ranges: tuple[list[int], list[int]] = ([], [])
    threads: list[ThreadStat] = field(default_factory=list)
    main_thread: str | None = None
    main_rule: str | None = None
    # merged (starts, ends) of the main thread's blocking waits; None = not measurable
    main_waits: tuple[list[int], list[int]] | None = None
    cpu_faults: int | None = None
    gpu_faults: dict[int, tuple[int, int]] = field(default_factory=dict)
    peak_mem: dict[int, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    summ: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    copies: dict[int, dict[int, tuple[int, int, int]]] = field(default_factory=dict)


def _aux_queries(path: Path, kernels_by_name: bool, summaries: bool) -> _Aux:
    """The aggregate queries. `kernels_by_name` and `summaries` are False on the numpy path,
    which computes those from the interval columns it fetches anyway (one pass over the big
    tables instead of two)."""
    db = _Db(path)
    aux = _Aux()
    try:
        if summaries:
            aux.summ, aux.copies = _summaries(db)
        # kernels per device and name (the numpy path computes these itself)
        name_col = db.kernel_name_col()
        if kernels_by_name and name_col and db.has(KERNEL, "deviceId", "start", "end"):
            rows = db.q(
                f'SELECT deviceId, {name_col}, count(*), sum("end" - start) FROM {KERNEL}'
                f' WHERE "end" >= start GROUP BY deviceId, {name_col}'
            )
            names = db.strings(r[1] for r in rows) if name_col != "name" else {}
            per_dev: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
            for dev, nid, cnt, tot in rows:
                nm = names.get(nid, str(nid)) if name_col != "name" else str(nid)
                per_dev[int(dev)].append((nm, int(cnt), int(tot or 0)))
            aux.kernels = dict(per_dev)
        # CUDA sync API calls
        if db.has(RUNTIME, "nameId") and "StringIds" in db.tables:
            where = " OR ".join("value LIKE ?" for _ in SYNC_PATTERNS)
            ids = dict(db.q(f"SELECT id, value FROM StringIds WHERE {where}", SYNC_PATTERNS))
            if ids:
                marks = ",".join("?" * len(ids))
                for nid, cnt, tot in db.q(
                    f'SELECT nameId, count(*), sum("end" - start) FROM {RUNTIME}'
                    f" WHERE nameId IN ({marks}) GROUP BY nameId",
                    ids,
                ):
                    aux.sync.append(FunctionStat(name=ids[nid], count=cnt, total_ns=tot or 0))
                aux.sync.sort(key=lambda f: -f.total_ns)
                rows = db.q(f'SELECT start, "end" FROM {RUNTIME} WHERE nameId IN ({marks})', ids)
                aux.sync_ranges = core.merge_intervals((r[0] for r in rows), (r[1] for r in rows))
        elif RUNTIME not in db.tables:
            aux.missing.append(RUNTIME)
        _nvtx(db, aux)
        _threads(db, aux)
        # Unified memory faults
        if db.has(UM_CPU):
            aux.cpu_faults = int(db.q(f"SELECT count(*) FROM {UM_CPU}")[0][0])
        else:
            aux.missing.append(UM_CPU)
        if db.has(UM_GPU, "deviceId"):
            count_expr = (
                "sum(numberOfPageFaults)" if "numberOfPageFaults" in db.cols(UM_GPU) else "count(*)"
            )
            for dev, groups, faults in db.q(
                f"SELECT deviceId, count(*), {count_expr} FROM {UM_GPU} GROUP BY deviceId"
            ):
                aux.gpu_faults[int(dev)] = (int(groups), int(faults or 0))
        else:
            aux.missing.append(UM_GPU)
        # GPU memory usage: running sum of allocations - frees
        if db.has(GPU_MEM, "deviceId", "bytes", "memoryOperationType"):
            cur: dict[int, int] = defaultdict(int)
            for dev, nbytes, op in db.conn.execute(
                f"SELECT deviceId, bytes, memoryOperationType FROM {GPU_MEM} ORDER BY start"
            ):
                cur[dev] += -nbytes if op == 1 else nbytes
                if cur[dev] > aux.peak_mem.get(dev, 0):
                    aux.peak_mem[dev] = cur[dev]
    finally:
        db.conn.close()
    return aux


def _nvtx(db: _Db, aux: _Aux) -> None:
    if not db.has(NVTX, "start", "end", "eventType"):
        aux.missing.append(NVTX)
        return
    cols = db.cols(NVTX)
    text = "n.text" if "text" in cols else "NULL"
    if "textId" in cols and "StringIds" in db.tables:
        name = f"coalesce({text}, s.value)"
        join = "LEFT JOIN StringIds s ON s.id = n.textId"
    else:
        name, join = text, ""
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    base = (
        f'FROM {NVTX} n {join} WHERE n.eventType IN ({types}) AND n."end" IS NOT NULL'
        f' AND n."end" >= n.start'
    )
    rows = db.q(
        f'SELECT {name} AS nm, count(*), sum(n."end" - n.start), min(n."end" - n.start),'
        f' max(n."end" - n.start) {base} GROUP BY nm'
    )
    stats = [
        RangeStat(
            name=str(nm if nm is not None else "(unnamed)"),
            count=int(c),
            total_ns=int(t),
            mean_ns=t / c,
            min_ns=int(lo),
            max_ns=int(hi),
        )
        for nm, c, t, lo, hi in rows
    ]
    stats.sort(key=lambda r: -r.total_ns)
    aux.ranges = core.group_step_ranges(stats)[:TOP_RANGES]
    # the rows of step ranges (step times) and data-wait ranges (their union: nested ranges,
    # `data` around `enumerate(DataLoader)...`, count once, and it is clipped to the span later)
    steps = {str(nm) for nm, *_ in rows if nm is not None and core.step_family(str(nm)) is not None}
    data = {str(nm) for nm, *_ in rows if nm is not None and core.is_data_wait(str(nm))}
    ds: list[int] = []
    de: list[int] = []
    select = f'SELECT {name} AS nm, n.start, n."end" {base}'
    for nm, s0, e0 in _named_rows(db, select, sorted(steps | data)):
        key = str(nm)
        if key in steps:
            aux.step_ranges.append((key, int(s0), int(e0) - int(s0)))
        if key in data:
            ds.append(int(s0))
            de.append(int(e0))
    aux.data_ranges = core.merge_intervals(ds, de)


def _named_rows(db: _Db, select: str, names: list[str]) -> Iterator[tuple[Any, ...]]:
    """Rows of `select` (a query with a WHERE clause and a column `nm`) whose nm is in names,
    in one scan: the names travel as one JSON array (`json_each`, in SQLite since 3.38); where
    that is missing, in chunks of 500 parameters (one scan per chunk)."""
    if not names:
        return
    cur = None
    if USE_JSON_EACH:
        try:
            cur = db.conn.execute(
                f"{select} AND nm IN (SELECT value FROM json_each(?))", (json.dumps(names),)
            )
        except sqlite3.OperationalError:  # no JSON functions in this SQLite build
            cur = None
    if cur is not None:
        yield from cur
        return
    for i in range(0, len(names), 500):
        chunk = names[i : i + 500]
        yield from db.conn.execute(f"{select} AND nm IN ({','.join('?' * len(chunk))})", chunk)


def _cuda_pids(db: _Db) -> set[int]:
    """Processes that own CUDA contexts or streams: the ones whose GPU work the export holds."""
    pids: set[int] = set()
    for table in ("TARGET_INFO_CUDA_CONTEXT_INFO", "TARGET_INFO_CUDA_STREAM"):
        if db.has(table, "processId"):
            pids |= {int(p) for (p,) in db.q(f"SELECT DISTINCT processId FROM {table}") if p}
    return pids


def _traced_pids(db: _Db) -> set[int]:
    """Processes the trace recorded calls of (OS runtime, NVTX, CUDA API, CUDA contexts).

    Real exports name far more than those: with CPU sampling or context-switch tracing,
    ThreadNames lists every thread of the machine (kernel workers, shells, nsys's own daemons,
    other users' python3 processes: measured with nsys 2022.4 and 2023.4), so threads and the
    main thread are looked for among the traced processes only."""
    pids = _cuda_pids(db)
    for table, col in (
        (OSRT, "globalTid"),
        (NVTX, "globalTid"),
        (RUNTIME, "globalTid"),
        (KERNEL, "globalPid"),
        (MEMCPY, "globalPid"),
        (MEMSET, "globalPid"),
    ):
        if db.has(table, col):
            pids |= {
                int(p)
                for (p,) in db.q(f"SELECT DISTINCT ({col} >> 24) & 16777215 FROM {table}")
                if p
            }
    return pids


def _pid_tid(gtid: int) -> tuple[int, int]:
    """(pid, tid) of a serialized nsys GlobalId: `(vmId << 48) | (pid << 24) | tid`."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


def main_thread(
    gtids: Iterable[int], names: dict[int, str], cuda_pids: set[int]
) -> tuple[int, str] | None:
    """The process's main thread (globalTid, rule), or None when nothing singles one out.

    Linux gives a process's first thread tid == pid; among those, the one of the process that
    owns the CUDA streams; else the only such thread; else the one named like a Python main
    thread (`core.MAIN_THREAD_NAMES`). Never "the busiest thread": a helper thread such as
    cuda-EvtHandlr polls for the whole capture and would pass for a waiting main thread."""
    every = sorted(set(gtids))
    mains = [g for g in every if _pid_tid(g)[0] == _pid_tid(g)[1]]
    if cuda_pids:
        in_cuda = [g for g in mains if _pid_tid(g)[0] in cuda_pids]
        if len(in_cuda) == 1:
            return in_cuda[0], "tid == pid in the process owning the CUDA streams"
        mains = in_cuda or mains
    elif len(mains) == 1:
        return mains[0], "tid == pid (the only process)"
    named = [g for g in (mains or every) if names.get(g) in core.MAIN_THREAD_NAMES]
    if len(named) == 1:
        return named[0], f"named {names[named[0]]}"
    return None


def _threads(db: _Db, aux: _Aux) -> None:
    tnames: dict[int, str] = {}
    if db.has("ThreadNames", "nameId", "globalTid"):
        rows = db.q("SELECT globalTid, nameId FROM ThreadNames")
        strs = db.strings(r[1] for r in rows)
        for gtid, nid in rows:
            tnames.setdefault(int(gtid), strs.get(nid, ""))
    per: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    wait_ids: set[int] = set()
    if db.has(OSRT, "globalTid", "nameId"):
        rows = db.q(
            f'SELECT globalTid, nameId, count(*), sum("end" - start) FROM {OSRT}'
            " GROUP BY globalTid, nameId"
        )
        strs = db.strings(r[1] for r in rows)
        for gtid, nid, cnt, tot in rows:
            fname = strs.get(nid, str(nid))
            per[int(gtid or 0)].append((fname, int(cnt), int(tot or 0)))
            if core.is_blocking_wait(fname):
                wait_ids.add(int(nid))
    else:
        aux.missing.append(OSRT)
    traced = _traced_pids(db)
    if traced:
        tnames = {g: n for g, n in tnames.items() if _pid_tid(g)[0] in traced}
    found = main_thread(set(tnames) | set(per), tnames, _cuda_pids(db))
    if found is not None:
        gmain, aux.main_rule = found
        aux.main_thread = tnames.get(gmain, f"thread {_pid_tid(gmain)[1]}")
        if per:  # OS-runtime rows exist: the main thread's blocking waits, as intervals
            ws: list[int] = []
            we: list[int] = []
            if wait_ids and gmain in per:
                marks = ",".join("?" * len(wait_ids))
                for s0, e0 in db.conn.execute(
                    f'SELECT start, "end" FROM {OSRT} WHERE globalTid = ? AND nameId IN ({marks})',
                    (gmain, *sorted(wait_ids)),
                ):
                    ws.append(int(s0))
                    we.append(int(e0))
            aux.main_waits = core.merge_intervals(ws, we)
    threads = []
    for gtid in set(tnames) | set(per):
        funcs = sorted(
            (FunctionStat(name=n, count=c, total_ns=t) for n, c, t in per.get(gtid, [])),
            key=lambda f: -f.total_ns,
        )
        threads.append(
            ThreadStat(
                tid=gtid & 0xFFFFFF,
                pid=_pid_tid(gtid)[0],
                name=tnames.get(gtid, f"thread {gtid & 0xFFFFFF}"),
                osrt_calls=sum(f.count for f in funcs),
                osrt_ns=sum(f.total_ns for f in funcs),
                functions=funcs[:10],
            )
        )
    threads.sort(key=lambda t: (-t.osrt_ns, t.name))
    aux.threads = threads[:TOP_THREADS]


def _gpu_rows(db: _Db, device: int | None, name_col: str | None) -> Iterator[tuple[int, int, int]]:
    """(start, end, tag) of all GPU activity of one device, sorted by start (no-numpy path)."""
    parts = []
    params: list[int] = []
    dev_clause = " AND deviceId = ?" if device is not None else ""
    for table, tag in ((KERNEL, name_col), (MEMCPY, "-1"), (MEMSET, "-2")):
        if tag is None or not db.has(table, "start", "end"):
            continue
        if device is not None and "deviceId" not in db.cols(table):
            continue
        parts.append(f'SELECT start, "end", {tag} FROM {table} WHERE "end" >= start{dev_clause}')
        if device is not None:
            params.append(device)
    if not parts:
        return iter(())
    sql = " UNION ALL ".join(parts) + " ORDER BY 1"
    return iter(db.conn.execute(sql, params))


FETCH_CHUNK_ROWS = 500_000


def _fetch_columns(path: Path, table: str, exprs: list[str]) -> list[Any]:
    """Columns of a whole table as numpy int64 arrays, without a Python object per row.

    `group_concat` builds comma-separated text inside SQLite (C speed, GIL released) for one
    rowid range of `FETCH_CHUNK_ROWS` rows at a time and numpy parses it into preallocated
    arrays, so only one chunk's text is alive at a time."""
    conn = connect_ro(path)
    try:
        (max_rowid,) = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()
        cap = int(max_rowid or 0)
        cols = [np.empty(cap, dtype=np.int64) for _ in exprs]
        aggs = ", ".join(f"group_concat(coalesce({e}, -1))" for e in exprs)
        n = 0
        for lo in range(0, cap + 1, FETCH_CHUNK_ROWS):
            texts = conn.execute(
                f'SELECT {aggs} FROM {table} WHERE rowid >= ? AND rowid < ? AND "end" >= start',
                (lo, lo + FETCH_CHUNK_ROWS),
            ).fetchone()
            if texts[0] is None:
                continue
            k = 0
            for i, text in enumerate(texts):
                part = np.fromstring(text, sep=",", dtype=np.int64)
                k = part.size
                cols[i][n : n + k] = part
            n += k
            del texts
    finally:
        conn.close()
    return [c[:n] for c in cols]


@dataclass
class _DeviceGpu:
    """Per-device results of the GPU-activity pass."""

    union: core.UnionResult
    kernels: list[tuple[str, int, int]]


Summaries = dict[int, dict[str, tuple[int, int]]]
CopySummaries = dict[int, dict[int, tuple[int, int, int]]]


def _group(keys: Any) -> tuple[Any, Any]:
    """(distinct keys, each row's index into them), like `np.unique(..., return_inverse=True)`
    but without its sort when the keys are small non-negative integers (string ids, device ids,
    copy kinds): a bincount and a lookup table, linear in the rows."""
    if keys.size and int(keys.min()) >= 0 and int(keys.max()) < 1 << 24:
        present = np.flatnonzero(np.bincount(keys))
        lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        return present, lookup[keys]
    return np.unique(keys, return_inverse=True)


def _distinct(keys: Any) -> list[int]:
    """The distinct values of an integer column (a bincount for small non-negative ones)."""
    if keys.size and int(keys.min()) >= 0 and int(keys.max()) < 1 << 24:
        return [int(k) for k in np.flatnonzero(np.bincount(keys))]
    return [int(k) for k in np.unique(keys)]


def _gpu_numpy(
    db: _Db, path: Path, pool: ThreadPoolExecutor
) -> tuple[dict[int, _DeviceGpu], Summaries, CopySummaries]:
    """Per-device union, kernels by name, and the activity/copy summaries, all from one fetch of
    each GPU table (the SQL GROUP BYs of `_summaries` would read the same rows again)."""
    name_col = db.kernel_name_col()
    k_fut = None
    fetched: set[str] = set()
    if name_col and db.has(KERNEL, "start", "end", "deviceId"):
        k_fut = pool.submit(_fetch_columns, path, KERNEL, ["start", '"end"', "deviceId", name_col])
        fetched.add(KERNEL)
    empty = np.zeros(0, dtype=np.int64)
    copy_cols = db.has(MEMCPY, "copyKind", "bytes")
    cp: list[Any] = [empty] * 5
    if db.has(MEMCPY, "start", "end", "deviceId"):
        extra = ["copyKind", "coalesce(bytes, 0)"] if copy_cols else []
        cp = _fetch_columns(path, MEMCPY, ["start", '"end"', "deviceId", *extra])
        if copy_cols:
            fetched.add(MEMCPY)
        else:
            cp += [empty, empty]
    ss, se, sd = empty, empty, empty
    if db.has(MEMSET, "start", "end", "deviceId"):
        ss, se, sd = _fetch_columns(path, MEMSET, ["start", '"end"', "deviceId"])
        fetched.add(MEMSET)
    cs, ce, cd, ck, cb = cp
    summ, copies = _summaries(db, skip=fetched)
    if copy_cols:
        for dev, kind, cnt, tot, nbytes in _copy_groups(cd, ck, ce - cs, cb):
            copies[dev][kind] = (cnt, tot, nbytes)
            c0, t0 = summ[dev].get("memcpy", (0, 0))
            summ[dev]["memcpy"] = (c0 + cnt, t0 + tot)
    s_keys, s_inv = _group(sd)
    for j, dev in enumerate(s_keys.tolist()):
        sel = s_inv == j
        summ[int(dev)]["memset"] = (int(sel.sum()), int((se[sel] - ss[sel]).sum()))
    ks, ke, kd, kn = k_fut.result() if k_fut else [empty] * 4
    del k_fut
    ms = np.concatenate([cs, ss])
    me = np.concatenate([ce, se])
    md = np.concatenate([cd, sd])
    del cp, cs, ce, cd, ck, cb, ss, se, sd
    out: dict[int, _DeviceGpu] = {}
    strs = db.strings(_distinct(kn)) if name_col != "name" else {}
    k_devs = _distinct(kd)
    devices = sorted(set(k_devs) | set(_distinct(md)))
    for dev in devices:
        one = len(devices) == 1
        km = slice(None) if one else kd == dev
        mm = slice(None) if one else md == dev
        k_start, k_end = ks[km], ke[km]
        k_dur = k_end - k_start
        if dev in k_devs:
            summ[dev]["kernel"] = (int(k_dur.size), int(k_dur.sum()))
        d_names, inv = _group(kn[km])
        counts = np.bincount(inv, minlength=d_names.size)
        totals = np.bincount(inv, weights=k_dur, minlength=d_names.size)
        label = [strs.get(int(n), str(int(n))) for n in d_names]
        comp_names = np.array([core.is_compute(x) for x in label], dtype=bool)
        comp = np.zeros(inv.size + me[mm].size, dtype=bool)
        comp[: inv.size] = comp_names[inv] if d_names.size else False
        del inv, k_dur
        starts = np.concatenate([k_start, ms[mm]])
        ends = np.concatenate([k_end, me[mm]])
        del k_start, k_end
        if one:
            del ks, ke, kn, kd
        out[dev] = _DeviceGpu(
            union=core.union_arrays(starts, ends, comp),
            kernels=[(label[i], int(counts[i]), round(totals[i])) for i in range(d_names.size)],
        )
    return out, summ, copies


def _copy_groups(
    dev: Any, kind: Any, dur: Any, nbytes: Any
) -> list[tuple[int, int, int, int, int]]:
    """(device, copyKind, count, summed duration, summed bytes) per device and copy kind."""
    out = []
    d_keys, d_inv = _group(dev)
    for j, d in enumerate(d_keys.tolist()):
        sel = d_inv == j
        k_keys, k_inv = _group(kind[sel])
        cnt = np.bincount(k_inv, minlength=k_keys.size)
        tot = np.bincount(k_inv, weights=dur[sel], minlength=k_keys.size)
        byt = np.bincount(k_inv, weights=nbytes[sel], minlength=k_keys.size)
        for i, k in enumerate(k_keys.tolist()):
            out.append((int(d), int(k), int(cnt[i]), round(tot[i]), round(byt[i])))
    return out


def _gpu_streaming(
    db: _Db, devices: list[int], aux_kernels: dict[int, list[tuple[str, int, int]]]
) -> dict[int, _DeviceGpu]:
    name_col = db.kernel_name_col()
    names_cache: dict[int, bool] = {}

    def compute_of(tag: int) -> bool:
        if tag not in names_cache:
            nm = db.strings([tag]).get(tag, "") if name_col != "name" else str(tag)
            names_cache[tag] = core.is_compute(nm)
        return names_cache[tag]

    return {
        dev: _DeviceGpu(
            union=core.union_pass(
                _gpu_rows(db, dev if len(devices) > 1 else None, name_col), compute_of
            ),
            kernels=aux_kernels.get(dev, []),
        )
        for dev in devices
    }


def _summaries(
    db: _Db, skip: frozenset[str] | set[str] = frozenset()
) -> tuple[Summaries, CopySummaries]:
    """Count and summed duration per device of kernels and memsets, and per device and copy
    kind of memcpys (with bytes), by SQL; tables in `skip` are left to the caller."""
    summ: Summaries = defaultdict(dict)
    copies: CopySummaries = defaultdict(dict)
    for table, key in ((KERNEL, "kernel"), (MEMSET, "memset")):
        if table not in skip and db.has(table, "deviceId", "start", "end"):
            for dev, cnt, tot in db.q(
                f'SELECT deviceId, count(*), sum("end" - start) FROM {table}'
                ' WHERE "end" >= start GROUP BY deviceId'
            ):
                summ[int(dev)][key] = (int(cnt), int(tot or 0))
    if MEMCPY not in skip and db.has(MEMCPY, "deviceId", "start", "end", "copyKind", "bytes"):
        for dev, kind, cnt, tot, nbytes in db.q(
            f'SELECT deviceId, copyKind, count(*), sum("end" - start), sum(bytes)'
            f' FROM {MEMCPY} WHERE "end" >= start GROUP BY deviceId, copyKind'
        ):
            copies[int(dev)][int(kind)] = (int(cnt), int(tot or 0), int(nbytes or 0))
            c0, t0 = summ[int(dev)].get("memcpy", (0, 0))
            summ[int(dev)]["memcpy"] = (c0 + int(cnt), t0 + int(tot or 0))
    return summ, copies


def read_nsys(path: Path, rank: int, rank_rule: str) -> tuple[Source, list[RankMetrics]]:
    """Read one nsys SQLite export; one RankMetrics per GPU with activity."""
    db = _Db(path)
    fast = core.HAVE_NUMPY
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        aux_fut = pool.submit(_aux_queries, path, not fast, not fast)
        version = None
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if db.has(meta, "name", "value"):
                r = db.q(f"SELECT value FROM {meta} WHERE name = 'EXPORT_PRODUCT_VERSION'")
                version = str(r[0][0]) if r else None
                break
        missing = [t for t in (KERNEL, MEMCPY, MEMSET) if t not in db.tables]
        gpu_names: dict[int, str] = {}
        if db.has("TARGET_INFO_GPU", "id", "name"):
            gpu_names = {int(i): str(n) for i, n in db.q("SELECT id, name FROM TARGET_INFO_GPU")}
        if fast:
            gpu, summ, copies = _gpu_numpy(db, path, pool)
            aux = aux_fut.result()
            aux.summ, aux.copies = dict(summ), dict(copies)
        else:
            aux = aux_fut.result()
            gpu = _gpu_streaming(db, sorted(aux.summ), aux.kernels)
    finally:
        pool.shutdown()
        db.conn.close()
    source = Source(
        path=str(path),
        kind="nsys-sqlite",
        tool_version=version,
        rank=rank,
        rank_rule=rank_rule,
        missing=sorted(set(missing + aux.missing)),
    )
    devices = sorted(set(gpu) | set(aux.summ))
    if not devices:
        return source, [_rank_metrics(path, rank, None, True, None, [], {}, {}, gpu_names, aux)]
    out = []
    for i, dev in enumerate(devices):
        g = gpu.get(dev)
        out.append(
            _rank_metrics(
                path,
                rank,
                dev,
                i == 0,
                g.union if g else None,
                g.kernels if g else [],
                aux.summ.get(dev, {}),
                aux.copies.get(dev, {}),
                gpu_names,
                aux,
            )
        )
    return source, out


def _rank_metrics(
    path: Path,
    rank: int,
    dev: int | None,
    first: bool,
    u: core.UnionResult | None,
    kernels: list[tuple[str, int, int]],
    summ: dict[str, tuple[int, int]],
    copies: dict[int, tuple[int, int, int]],
    gpu_names: dict[int, str],
    aux: _Aux,
) -> RankMetrics:
    u = u or core.UnionResult()
    kc, kt = summ.get("kernel", (0, 0))
    cc, ct = summ.get("memcpy", (0, 0))
    mc, mt = summ.get("memset", (0, 0))
    total = kt + ct + mt
    activity = Activity(
        kernel_count=kc,
        memcpy_count=cc,
        memset_count=mc,
        kernel_ns=kt,
        memcpy_ns=ct,
        memset_ns=mt,
        kernel_pct=core.pct(kt, total),
        memcpy_pct=core.pct(ct, total),
        memset_pct=core.pct(mt, total),
    )
    directions = []
    um = UnifiedMemory()
    um_count = um_time = 0
    for kind, (cnt, tot, nbytes) in sorted(copies.items()):
        directions.append(
            CopyDirection(
                direction=COPY_KIND.get(kind, f"kind {kind}"),
                count=cnt,
                bytes=nbytes,
                total_ns=tot,
                bandwidth_gb_s=nbytes / tot if tot else None,
            )
        )
        if kind in UM_KINDS:
            um_count += cnt
            um_time += tot
            setattr(
                um,
                f"migrated_{UM_KINDS[kind]}_bytes",
                getattr(um, f"migrated_{UM_KINDS[kind]}_bytes") + nbytes,
            )
    um.migrations = um_count
    um.migration_ns = um_time
    um.share_of_memory_ops_pct = core.pct(um_count, cc + mc)
    um.share_of_memory_time_pct = core.pct(um_time, ct + mt)
    if first:
        um.cpu_page_faults = aux.cpu_faults
    if dev is not None and UM_GPU not in aux.missing:
        groups, faults = aux.gpu_faults.get(dev, (0, 0))
        um.gpu_page_faults = faults
        um.gpu_fault_groups = groups
    top, fp32, tc, names = _kernel_stats(kernels, kt)
    span = u.span
    idle = span - u.busy
    # CPU-side waits count once (union) and only inside this device's span, so their share of
    # the span is at most 100 %
    data_wait = core.union_in_span(*aux.data_ranges, u.start, u.end)
    main_wait = None
    if aux.main_waits is not None:
        # like the data wait: inside the span, or all of it when the trace has no GPU activity
        # (a CPU-only real export measured 0 here while its main thread waited 100+ ms)
        main_wait = core.union_in_span(*aux.main_waits, u.start, u.end)
    sync_wall = core.union_in_span(*aux.sync_ranges, u.start, u.end)
    return RankMetrics(
        rank=rank,
        devices=[dev] if dev is not None else [],
        device_name=gpu_names.get(dev) if dev is not None else None,
        source=str(path),
        span_start_ns=u.start,
        span_end_ns=u.end,
        span_ns=span,
        busy_ns=u.busy,
        idle_ns=idle,
        busy_pct=core.pct(u.busy, span),
        idle_pct=core.pct(idle, span),
        idle_gaps=core.gap_stats(u.gap_starts, u.gap_ends),
        temporal=u.temporal("all kernels, memcpys and memsets of the device (nsys)"),
        activity=activity,
        copies=directions,
        unified_memory=um,
        top_kernels=top,
        kernel_names=names,
        fp32_gemm_pct=fp32,
        tensor_core_gemm_pct=tc,
        nvtx=aux.ranges if first else [],
        steps=core.step_stats(aux.step_ranges) if first else None,
        data_wait_ns=data_wait if first else 0,
        main_thread=aux.main_thread if first else None,
        main_thread_rule=aux.main_rule if first else None,
        main_thread_wait_ns=main_wait if first else None,
        threads=aux.threads if first else [],
        sync=SyncStats(
            calls=sum(f.count for f in aux.sync),
            total_ns=sum(f.total_ns for f in aux.sync),
            wall_ns=sync_wall,
            functions=aux.sync,
        )
        if first
        else SyncStats(),
        peak_gpu_memory_bytes=aux.peak_mem.get(dev) if dev is not None else None,
        peak_gpu_memory_source=(
            "nsys CUDA_GPU_MEMORY_USAGE_EVENTS (allocations - frees, trace window)"
            if dev is not None and dev in aux.peak_mem
            else None
        ),
        timeline=core.timeline(u.gap_starts, u.gap_ends, u.start, u.end),
    )


def _kernel_stats(
    kernels: list[tuple[str, int, int]], kernel_ns: int
) -> tuple[list[KernelStat], float, float, int]:
    """Top kernels plus fp32-GEMM and tensor-core-GEMM shares of kernel time."""
    fp32 = tc = 0
    merged: dict[str, list[int]] = {}
    for name, cnt, tot in kernels:
        m = merged.setdefault(name, [0, 0])
        m[0] += cnt
        m[1] += tot
    for name, (_, tot) in merged.items():
        prec = core.gemm_precision(name)
        if prec == "fp32":
            fp32 += tot
        elif prec == "tensor-core":
            tc += tot
    ranked = sorted(merged.items(), key=lambda kv: -kv[1][1])[:TOP_KERNELS]
    top = [
        KernelStat(
            name=name,
            count=cnt,
            total_ns=tot,
            mean_ns=tot / cnt if cnt else 0.0,
            share_pct=core.pct(tot, kernel_ns),
            compute=core.is_compute(name),
        )
        for name, (cnt, tot) in ranked
    ]
    return top, core.pct(fp32, kernel_ns), core.pct(tc, kernel_ns), len(merged)
