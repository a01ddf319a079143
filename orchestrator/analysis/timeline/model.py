"""The timeline model: what every reader produces and every metric reads.

One `RankTimeline` per rank (a Kineto trace file, or one process of an nsys export), columnar:
numpy arrays with one row per event, strings interned once in `names`. Two tables:

- `GpuTable`: work that ran on a GPU: kernels, memory copies, memsets, and (Kineto) GPU-side
  annotations and any other event the trace puts on a GPU stream. Columns: start and end (ns,
  end exclusive), device, stream, kind (`KERNEL`, `MEMCPY`, `MEMSET`, `GPU_ANNOTATION`,
  `GPU_OTHER`), name, correlation id, launch (start of the host call that enqueued it, when
  the source records that call; -1 otherwise), bytes, copy (direction code, `COPY_NAMES`).
- `HostTable`: host-side intervals: CPU operators (`CPU_OP`), annotations and NVTX ranges
  (`ANNOTATION`), CUDA API calls (`CUDA_API`: every call a Kineto trace holds; the
  synchronisation calls of an nsys export, whose launches live in `GpuTable.launch`), and
  OS-runtime calls (`OSRT`). Columns: start, end, pid, tid, kind, name.

Besides the tables: process and thread names, the processes that own CUDA work, device names,
Unified-Memory fault counts and migrations by cause, peak GPU memory per device (pinned host and
managed memory apart), and how HTA sees the source (`HtaClock`). Times are integer nanoseconds
everywhere; a Kineto trace's microseconds are rounded to the nearest nanosecond when read (Kineto
writes three decimals, so nothing is lost).

The metric families (`gpu_time`, `breakdown`, `communication`, `kernels`, `memory`, `host`,
`cross_rank`) take a timeline and return parts of `RankMetrics`; `rank_metrics.compute` puts
them together. Nothing downstream of this module knows which reader produced a timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# GpuTable.kind
KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, GPU_OTHER = 0, 1, 2, 3, 4
# the kinds that are GPU activity in gh-run's own metrics (span, busy, idle, activity)
ACTIVITY_KINDS = (KERNEL, MEMCPY, MEMSET)


def is_activity(kind: Any) -> Any:
    """Mask of the rows of ACTIVITY_KINDS (the kinds below GPU_ANNOTATION)."""
    return kind < GPU_ANNOTATION


# HostTable.kind; LIBRARY_ANNOTATION: NVTX ranges a library or nsys emitted (CUB, NCCL, cuBLAS,
# other domains: `library_ranges`), kept apart from the workload's own ANNOTATION rows
CPU_OP, ANNOTATION, CUDA_API, OSRT, LIBRARY_ANNOTATION = 0, 1, 2, 3, 4

# GpuTable.copy: nsys `copyKind` numbering (ENUM_CUDA_MEMCPY_OPER); Kineto copies map to it by
# the direction in their name. COPY_OTHER: a copy whose direction the source does not say.
COPY_NONE, COPY_OTHER = 0, -1
COPY_NAMES = {
    COPY_OTHER: "other",
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
COPY_CODES = {v: k for k, v in COPY_NAMES.items()}
UM_COPIES = {11: "htod", 12: "dtoh", 13: "dtod"}
# why a Unified-Memory page moved: nsys `CUPTI_ACTIVITY_KIND_MEMCPY.migrationCause`
# (ENUM_CUDA_UNIF_MEM_MIGRATION; CUPTI's "coherence" is the page-fault-driven migration)
UM_CAUSES = {
    0: "unknown",
    1: "user prefetch",
    2: "page fault",
    3: "speculative prefetch",
    4: "eviction",
    5: "access counters",
}
# the access that raised a GPU page fault (ENUM_CUDA_UNIF_MEM_ACCESS_TYPE)
UM_ACCESS = {0: "unknown", 1: "read", 2: "write", 3: "atomic", 4: "prefetch"}

I64 = np.int64
NONE = -1  # "absent" in integer columns (stream, corr, launch, pid, tid)


def copy_name(code: int) -> str:
    """The direction label of a copy code (`kind 42` for codes nsys may add later)."""
    return COPY_NAMES.get(code, f"kind {code}")


@dataclass
class GpuTable:
    """Columns of GPU work (see the module docstring)."""

    start: Any
    end: Any
    device: Any
    stream: Any
    kind: Any
    name: Any
    corr: Any
    launch: Any
    nbytes: Any
    copy: Any

    @classmethod
    def empty(cls) -> GpuTable:
        return cls(*(np.zeros(0, dtype=t) for t in GPU_DTYPES))

    @property
    def size(self) -> int:
        return int(self.start.size)

    def take(self, sel: Any) -> GpuTable:
        """The rows selected by a mask or index array (a constant column stays constant)."""
        return GpuTable(*(_take(getattr(self, c), sel) for c in GPU_COLUMNS))


def constant(value: int, n: int, dtype: Any) -> Any:
    """A read-only column of n equal values that takes no memory (a reader that has no use for
    a column, e.g. nsys correlation ids once launches are known, keeps it this way)."""
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))


def is_constant(col: Any) -> bool:
    return bool(col.ndim == 1 and col.strides == (0,))


def _take(col: Any, sel: Any) -> Any:
    if is_constant(col):  # as many rows as the selection picks, still no memory
        n = np.broadcast_to(np.False_, col.shape)[sel].size
        return constant(int(col[0]) if col.size else 0, n, col.dtype)
    return col[sel]


GPU_COLUMNS = (
    "start",
    "end",
    "device",
    "stream",
    "kind",
    "name",
    "corr",
    "launch",
    "nbytes",
    "copy",
)
# device and stream: any 64-bit id a trace holds (a stream of 2^32 + 7 is not stream 7)
GPU_DTYPES = (I64, I64, I64, I64, np.int8, np.int32, I64, I64, I64, np.int8)


@dataclass
class HostTable:
    """Columns of host-side intervals (see the module docstring)."""

    start: Any
    end: Any
    pid: Any
    tid: Any
    kind: Any
    name: Any

    @classmethod
    def empty(cls) -> HostTable:
        return cls(*(np.zeros(0, dtype=t) for t in HOST_DTYPES))

    @property
    def size(self) -> int:
        return int(self.start.size)

    def take(self, sel: Any) -> HostTable:
        return HostTable(*(getattr(self, c)[sel] for c in HOST_COLUMNS))


HOST_COLUMNS = ("start", "end", "pid", "tid", "kind", "name")
HOST_DTYPES = (I64, I64, I64, I64, np.int8, np.int32)


def concat_host(parts: list[HostTable]) -> HostTable:
    if not parts:
        return HostTable.empty()
    cols = []
    for c, t in zip(HOST_COLUMNS, HOST_DTYPES, strict=True):
        cols.append(np.concatenate([getattr(p, c) for p in parts]).astype(t, copy=False))
        for p in parts:
            setattr(p, c, None)
    return HostTable(*cols)


@dataclass
class HtaClock:
    """How Holistic Trace Analysis reads this source, so that HTA's numbers can be reproduced.

    `unit_ns`: HTA's time unit in ns (1000: a Kineto trace's microseconds; 1: nsys, which HTA
    does not read, is taken at its own nanosecond resolution). `rounds`: HTA rounds fractional
    microseconds (start up, end down) before any analysis. `step_filter`: HTA drops the GPU
    events launched in the last `ProfilerStep` when the trace has two or more."""

    unit_ns: int = 1
    rounds: bool = False
    step_filter: bool = False


@dataclass
class UnifiedMemoryEvents:
    """Unified-Memory faults and migrations of a rank; None = the source did not trace them."""

    cpu_faults: int | None = None
    # device -> (fault groups = rows, faults = sum of numberOfPageFaults)
    gpu_faults: dict[int, tuple[int, int]] | None = None
    # device -> access type (ENUM_CUDA_UNIF_MEM_ACCESS_TYPE, `UM_ACCESS`) -> faults
    gpu_fault_access: dict[int, dict[int, int]] = field(default_factory=dict)
    # device -> (UM copy code, migration cause (`UM_CAUSES`)) -> (count, bytes, summed ns); empty
    # when the source does not say why pages moved
    migrations: dict[int, dict[tuple[int, int], tuple[int, int, int]]] = field(default_factory=dict)

    def add_gpu_faults(self, device: int, access: int, groups: int, faults: int) -> None:
        if self.gpu_faults is None:
            self.gpu_faults = {}
        g, f = self.gpu_faults.get(device, (0, 0))
        self.gpu_faults[device] = (g + groups, f + faults)
        by_access = self.gpu_fault_access.setdefault(device, {})
        by_access[access] = by_access.get(access, 0) + faults

    def add_migrations(
        self, device: int, copy: int, cause: int, count: int, nbytes: int, ns: int
    ) -> None:
        per = self.migrations.setdefault(device, {})
        n, b, t = per.get((copy, cause), (0, 0, 0))
        per[(copy, cause)] = (n + count, b + nbytes, t + ns)


@dataclass
class SourceInfo:
    """Where a timeline came from."""

    path: str
    kind: str  # "nsys-sqlite" | "kineto-json"
    tool_version: str | None = None
    missing: list[str] = field(default_factory=list)
    parser: str = ""


@dataclass
class RankTimeline:
    """Everything one rank's trace says, as columns (see the module docstring)."""

    source: SourceInfo
    names: list[str]
    gpu: GpuTable
    host: HostTable
    rank: int = 0
    rank_rule: str = ""
    rank_note: str | None = None
    # threads to list, (pid, tid) -> name (Kineto: those with CPU operators; nsys: ThreadNames
    # and threads with OS-runtime calls); other threads get a `thread <tid>` label
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    # processes that own CUDA streams or contexts (nsys); empty when the source does not say
    cuda_pids: set[int] = field(default_factory=set)
    # the rule text for a unique tid == pid thread when cuda_pids is empty
    single_main_rule: str = "tid == pid"
    # the source traced OS-runtime calls (so a main thread's blocking waits are measurable)
    osrt_traced: bool = False
    device_names: dict[int, str] = field(default_factory=dict)
    # device -> peak bytes (nsys); Kineto: key -1 (the trace's `[memory]` events, no device)
    peak_memory: dict[int, int] = field(default_factory=dict)
    peak_memory_source: str | None = None
    # device -> peak bytes of pinned host and of managed memory (nsys memKind 1 and 4/6), kept
    # apart from peak_memory (device memory only)
    peak_pinned_memory: dict[int, int] = field(default_factory=dict)
    peak_managed_memory: dict[int, int] = field(default_factory=dict)
    um: UnifiedMemoryEvents = field(default_factory=UnifiedMemoryEvents)
    hta: HtaClock = field(default_factory=HtaClock)
    # metadata of the trace (Kineto's top-level keys other than traceEvents)
    meta: dict[str, Any] = field(default_factory=dict)
    # one entry per device (nsys: HTA would see one rank per GPU) or one for the whole trace
    # (Kineto: what HTA reads as one rank)
    split_devices: bool = False
    # the process of this rank, its index among the processes with GPU work of the same file,
    # and how many there are (nsys exports that hold several)
    pid: int | None = None
    process_index: int = 0
    processes: int = 1
    # what the reader left out or noticed (rows with non-integer times, ...)
    notes: list[str] = field(default_factory=list)
    # nsys GPU-metric samples of the export and its GPUs' UUIDs (`nsys_gpu_metrics.Samples`)
    gpu_samples: Any = None
    # the memory history the trace holds, one per device (`timeline.memory.MemoryTimeline`):
    # Kineto `[memory]` events, nsys memory-usage events; empty when it holds none
    memory: list[Any] = field(default_factory=list)
    # NCCL operations with an id every rank shares (`nsys_nccl.NcclOps`); None: the source has
    # none (collectives are then matched by position)
    nccl_ops: Any = None

    def devices(self) -> list[int]:
        """Devices with GPU activity (kernels, copies, memsets), ascending."""
        act = is_activity(self.gpu.kind)
        return sorted(int(d) for d in np.unique(self.gpu.device[act]))

    def name_mask(self, pred: Any, among: Any = None) -> Any:
        """Boolean array over `names`: pred(name) for each interned name. `among` (name ids,
        e.g. the kernels' or the CUDA calls' names): pred is asked only of the names among
        them, every other name reads False. A caller reads the mask through those rows only:
        a trace with a million distinct NVTX names then costs no regex on them where the
        question is about kernels or CUDA calls."""
        if among is None:
            n = len(self.names)
            return np.fromiter((bool(pred(x)) for x in self.names), dtype=bool, count=n)
        ids = np.unique(np.asarray(among))
        mask = np.zeros(len(self.names), dtype=bool)
        if ids.size:
            names = self.names
            mask[ids] = np.fromiter(
                (bool(pred(names[i])) for i in ids.tolist()), dtype=bool, count=ids.size
            )
        return mask


class Names:
    """A string table that interns as it goes (readers build `RankTimeline.names` with it)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, s: str) -> int:
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.ids)
        return i

    def table(self) -> list[str]:
        return list(self.ids)
