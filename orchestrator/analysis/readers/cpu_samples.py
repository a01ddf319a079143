"""What the host threads ran inside given time windows, from an nsys export's CPU samples
(issue 28 item 2): `COMPOSITE_EVENTS` (time, thread, state) and `SAMPLING_CALLCHAINS` (the
frames, top first, their symbol and module names in `StringIds`).

Read only for the windows asked (the GPU-idle intervals `idle_causes` examines, and a bounded
sample of the rest for the launch path), straight from the file: the timeline does not carry
samples, so an analysis that never asks (Kineto, exports recorded without `--sample`) costs one
look at the schema. The callchains of at most `MAX_SAMPLES` samples are read, by primary key.

Python frames: nsys 2024.2's Python sampling exports NVTX marks without a link to frames (see
tests/data/unannotated/README.md), so the frames read are the native ones; where a later export
puts Python function names in the callchains they are matched by the same name rules.

Each sample is put in one group by its frames (`group`), first that matches:
- `sync`: a CUDA synchronisation (`cuStreamSynchronize`, `cudaDeviceSynchronize`, ...);
- `wait`: blocked on a queue, lock or I/O (`futex`, `pthread_cond_wait`, `sem_wait`, `poll`,
  `PyThread_acquire_lock`, a Python `Queue.get`);
- `comm`: communication (MPI, NCCL, libfabric's `cxip_`/`fi_`, UCX, gloo, `c10d::`);
- `launch`: the launch path (`cuLaunchKernel`, `cudaLaunchKernel`, `cudaMemcpyAsync`, any frame
  in the CUDA driver or runtime, torch's CUDA libraries); torch's dispatcher without them runs a
  CPU operator (`other`);
- `data`: data-loading frames (the DataLoader, Dataset, collate and pin-memory paths where frames
  name Python functions; tokenisers, PIL, libjpeg/libpng and other decoders); never numpy or
  BLAS, which a loss's logging runs as readily as an augmentation;
- `interpreter`: every frame in the Python interpreter or the C library (libpython, the python
  binary, libc, libm, libz, the vDSO): Python code running, no framework below it;
- `other`: anything else (the framework's CPU kernels, the application's own native code).
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.readers import export_tables
from orchestrator.analysis.readers.sql_integers import a_time, int_or, integral

MAX_SAMPLES = 20_000  # callchains read per export
DEPTH = 48  # frames read per sample, top first
CHUNK = 500  # ids per IN (...) query
GROUPS = ("sync", "wait", "comm", "launch", "data", "interpreter", "other")
SYNC = re.compile(
    r"cu(da)?(Stream|Device|Ctx|Event)Synchroni[sz]e|_local_scalar_dense|cuStreamQuery"
)
WAIT = re.compile(
    r"(?i)^(__)?futex|futex_wait|pthread_cond_(timed)?wait|^sem_(timed|clock)?wait|^(__)?(p)?poll"
    r"|^epoll_p?wait|^(p)?select$|PyThread_acquire_lock|acquire_timed|lock_PyThread"
    r"|Queue\.get|queue_get|_queue|^__?libc_recv|^recv(from|msg)?$|^(__)?libc_read$|^read$"
    r"|connection\.py|_recv_bytes|_poll\b"
)
COMM = re.compile(
    r"(?i)^P?MPI_|^MPI[A-Z]+_|^ompi_|nccl|^cxip_|^fi_|^ofi_|^ucp_|^uct_|^ucs_|^psm2_|gloo|c10d::"
)
# the launch path reaches the CUDA libraries: torch's dispatcher alone runs CPU operators too
LAUNCH = re.compile(
    r"cuLaunchKernel|cudaLaunchKernel|cuLaunchCooperative|cudaLaunchCooperative|cuGraphLaunch"
    r"|cudaGraphLaunch|cudaMemcpyAsync|cuMemcpy|\[libcudart[^\]]*\]|\[libcuda\.so[^\]]*\]"
    r"|\[libtorch_cuda[^\]]*\]|\[libc10_cuda[^\]]*\]"
)
# data loading: the DataLoader/Dataset/collate/pin-memory paths (where frames name Python
# functions) and the libraries that decode or tokenise samples; never numerical libraries
# (numpy, BLAS), which a loss's logging runs as readily as an augmentation
DATA = re.compile(
    r"(?i)dataloader|_next_data|collate|__getitem__|_worker_loop|pin_memory_loop|_pin_memory"
    # a tensor built from Python data (torch.tensor of a list): a Dataset's item, a collate
    r"|torch::utils::tensor_ctor|internal_new_from_data"
    r"|get_batch|next_batch|tokeni[sz]|PIL\b|_imaging|ImagingCore|\[libjpeg|\[libpng"
    r"|\[libturbojpeg|\[libwebp|\[libavcodec|\[libsndfile|\[tokenizers"
)
INTERPRETER = re.compile(
    r"\[(libpython[\d.]*\.so[\d.]*|python[\d.]*|libc\.so[\d.]*|libm\.so[\d.]*|libz\.so[\d.]*"
    r"|ld-linux[^\]]*|\[vdso\]|linux-vdso[^\]]*|libpthread[^\]]*)\]$"
)
WORKER_THREAD = re.compile(r"(?i)pt_data_worker|pt_data_pin|pin_memory|dataloader|data_worker")
TEMPLATE = re.compile(r"<[^<>]*>")
NAME_CHARS = 80
# no frame of the workload's: an address, nsys's markers, nsys's own wrappers of OS-runtime calls
ADDRESS = re.compile(r"^0x[0-9a-f]+$|^\[Broken backtraces\]$|^\[Unknown\]$|^NSYS_")


@dataclass
class Samples:
    """CPU samples (sorted by time) of an export's threads inside some windows."""

    start: Any  # int64 ns
    pid: Any  # int64
    tid: Any  # int64
    group: Any  # int8: index into GROUPS
    leaf: list[str]  # per sample: its top named frame ('' when none has a name)
    # per sample: the named frames that made its group (data, wait, launch, sync), for evidence
    marks: list[str] = field(default_factory=list)


_TABLES = ("COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "StringIds")


def _schema(db: sqlite3.Connection) -> export_tables.Schema:
    return export_tables.read_schema(db, _TABLES)


def has_samples(path: str) -> bool:
    """Whether the export holds CPU samples with callchains (a look at its schema)."""
    try:
        with _open(path) as db:
            names = _schema(db)
    except sqlite3.Error:
        return False
    return all(t in names for t in _TABLES)


def _open(path: str) -> contextlib.closing[sqlite3.Connection]:
    """The export, read-only, closed when the `with` ends (a connection's own `with` only ends
    a transaction: every analysed file would keep its descriptor until collected)."""
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def group(frames: list[tuple[str, str]]) -> tuple[int, str]:
    """(index into GROUPS, the frame that decided) of one callchain, top first, as
    (symbol, module) pairs (module: the library's file name)."""
    texts = [f"{s} [{m}]" for s, m in frames]
    # data before launch: pinning a batch (`_pin_memory`) or a Dataset's GPU work calls the CUDA
    # libraries on the loader's behalf
    for gi, rx in ((0, SYNC), (1, WAIT), (2, COMM), (4, DATA), (3, LAUNCH)):
        for k, ((sym, _), text) in enumerate(zip(frames, texts, strict=True)):
            if rx.search(sym) or (gi in (3, 4) and rx.search(text)):
                # a module matched an unnamed frame: name the group by the next named one
                named = next((f for f, _ in frames[k:] if f and not ADDRESS.match(f)), sym)
                return gi, named
    if frames and all(INTERPRETER.search(t) for t in texts):
        return 5, ""
    return 6, ""


_FIRST = operator.itemgetter(0)


def read(
    path: str, starts: Any, ends: Any, thread: tuple[int, int] | None = None, even: bool = False
) -> Samples | None:
    """The samples inside the windows [starts[i], ends[i]) (disjoint, any order) of every
    thread, or of `thread` (pid, tid) only; None when the export holds no samples. At most
    `MAX_SAMPLES` callchains are read: the windows' samples in the order of the windows given
    (the caller passes the longest first), or (`even`) evenly spread over all of them."""
    if starts.size == 0 or not has_samples(path):
        return None
    lo, hi = int(starts.min()), int(ends.max())
    with _open(path) as db:
        name = _schema(db).name
        # a hostile export's value of another kind: its sample is left out (id, time,
        # thread), or its frame reads as unknown (symbol, module)
        whole = " AND ".join((integral("id"), a_time("start"), integral("globalTid")))
        sql = (
            f'SELECT id, start, globalTid FROM "{name("COMPOSITE_EVENTS")}"'
            f" WHERE start >= ? AND start < ? AND {whole}"
        )
        args: tuple[int, ...] = (lo, hi)
        if thread is not None:  # one thread: SQLite leaves the others' rows behind
            sql += " AND ((globalTid >> 24) & 16777215) = ? AND (globalTid & 16777215) = ?"
            args += thread
        rows = db.execute(sql, args).fetchall()
        if not rows:
            return _empty()
        arr = np.array(rows, dtype=np.int64)
        ids, t, gt = arr[:, 0], arr[:, 1], arr[:, 2]
        order = np.argsort(starts, kind="stable")
        ws, we = starts[order], ends[order]
        k = np.searchsorted(ws, t, side="right") - 1
        inside = (k >= 0) & (t < we[np.maximum(k, 0)])
        keep = np.flatnonzero(inside)
        if even and keep.size > MAX_SAMPLES:
            keep = keep[np.linspace(0, keep.size - 1, MAX_SAMPLES).astype(np.int64)]
        elif not even:
            # the first windows given keep their samples when capped
            keep = keep[np.argsort(order[k[keep]], kind="stable")][:MAX_SAMPLES]
        keep.sort()
        ids, t, gt = ids[keep], t[keep], gt[keep]
        chains: dict[int, list[tuple[int, int]]] = {}
        for i in range(0, ids.size, CHUNK):
            part = ids[i : i + CHUNK].tolist()
            marks = ",".join("?" * len(part))
            rows = db.execute(
                f"SELECT id, {int_or('symbol', -1)}, {int_or('module', -1)}"
                f' FROM "{name("SAMPLING_CALLCHAINS")}" WHERE id IN ({marks})'
                f" AND stackDepth < {DEPTH} ORDER BY id, stackDepth",
                part,
            ).fetchall()
            # one dictionary step per callchain, not per frame (ordered by id: a chain's
            # frames are consecutive)
            for cid, chain in itertools.groupby(rows, key=_FIRST):
                chains.setdefault(int(cid), []).extend([(int(s), int(m)) for _, s, m in chain])
        want = sorted({x for c in chains.values() for pair in c for x in pair})
        strings: dict[int, str] = {}
        for i in range(0, len(want), CHUNK):
            part = want[i : i + CHUNK]
            marks = ",".join("?" * len(part))
            strings.update(
                (int(a), str(b))
                for a, b in db.execute(
                    f'SELECT id, value FROM "{name("StringIds")}" WHERE id IN ({marks})'
                    " AND typeof(value) = 'text'",
                    part,
                )
            )
    groups = np.empty(ids.size, dtype=np.int8)
    leaves: list[str] = []
    decided: list[str] = []
    memo: dict[tuple[tuple[int, int], ...], tuple[int, str, str]] = {}
    for i, cid in enumerate(ids.tolist()):
        key = tuple(chains.get(cid, ()))
        got = memo.get(key)
        if got is None:
            frames = [(strings.get(s, ""), strings.get(m, "").rsplit("/", 1)[-1]) for s, m in key]
            g, why = group(frames)
            leaf = next((s for s, _ in frames if s and not ADDRESS.match(s)), "")
            got = memo[key] = (g, short(leaf), short(why))
        groups[i] = got[0]
        leaves.append(got[1])
        decided.append(got[2])
    return Samples(
        start=t,
        pid=(gt >> 24) & 0xFFFFFF,
        tid=gt & 0xFFFFFF,
        group=groups,
        leaf=leaves,
        marks=decided,
    )


def _empty() -> Samples:
    z = np.zeros(0, dtype=np.int64)
    return Samples(z, z, z, np.zeros(0, dtype=np.int8), [], [])


def strip_templates(text: str) -> str:
    """`text` without its C++ template arguments: every `<...>` that closes, nested ones
    included, as removing the innermost `<[^<>]*>` again and again until nothing changes does,
    in one pass (that loop took minutes on one 45 KB nested name: a pass per level). A `>`
    with no `<` open before it, and a `<` never closed, stay."""
    if "<" not in text:
        return text
    out: list[str] = []
    opened: list[int] = []  # where each open `<` sits in `out`
    for ch in text:
        if ch == "<":
            opened.append(len(out))
            out.append(ch)
        elif ch == ">" and opened:
            del out[opened.pop() :]
        else:
            out.append(ch)
    return "".join(out)


def short(symbol: str) -> str:
    """A frame's name without C++ template and call arguments (`at::_ops::cat::call`), at most
    `NAME_CHARS` long. Linear in the name's length."""
    out = strip_templates(symbol)
    if "(" in out[1:]:
        out = out[: out.index("(", 1)]
    out = out.removeprefix("void ").strip()
    return out[:NAME_CHARS] or symbol[:NAME_CHARS]


def workers(threads: dict[tuple[int, int], str]) -> set[tuple[int, int]]:
    """The data-loading threads among the named ones (torch names its DataLoader worker
    processes' and pin-memory threads `pt_data_worker` / `pt_data_pin`)."""
    return {k for k, name in threads.items() if WORKER_THREAD.search(name)}


def top(names: list[str], n: int = 3) -> list[str]:
    """The most frequent names (not empty, not a bare address), most frequent first."""
    return [k for k, _ in Counter(x for x in names if x and not ADDRESS.match(x)).most_common(n)]
