"""What the host did while the GPU waited, as evidence per GPU-idle interval (issue 35 item 1).

For each interval [a, b) the host's part ends where the work that ends the gap was launched:
the host window is [a, h), h = that launch (HTA's critical-path edge from a launch to its
kernel); the rest [h, b) is the launch's latency. Where the work was launched before the GPU
went idle (h <= a) the GPU waited for something else (another stream's event, a copy being
staged), not for the host: the window is empty and `launched_early` says so.

The window is then covered, nanosecond by nanosecond, by the most direct evidence there is
about the main thread (`LABELS`, highest first; a lower label counts only where no higher one
does):
1. the workload's ranges and operators: data loading (`step_names.is_data_wait`, DataLoader
   operators, collate, pin_memory), a tensor built from Python data (`aten::lift_fresh`),
   collectives;
2. CUDA synchronisation calls of the main thread, and its CUDA calls that issue a copy from or
   to pageable memory (`pageable_copies`: the driver stages it through a bounce buffer while
   the call lasts);
3. its OS-runtime calls and what their stacks say they wait for (`osrt_stacks`): autograd's
   engine (the backward pass on autograd's threads), a CUDA sync, a collective, a sleep, a read,
   a lock or pipe of the Python interpreter, another lock; and the release of a tensor storage
   mapped from shared memory (`munmap` under `at::MapAllocator`) that starts within
   `RELEASE_AFTER_NS` of a pageable copy's call returning on that thread: the host dropping the
   pageable batch it has just copied (a DataLoader worker's batch, which `pin_memory=True`
   releases on the pinning thread instead);
4. its CPU samples (`cpu_samples`), each standing for the sampling period around it: in a CUDA
   sync, a collective, data-loading code (Python frames of the DataLoader/Dataset/collate/pin-
   memory paths, decoders and tokenisers), the launch path (cuLaunchKernel and the CUDA
   libraries), blocked, or running other host code (the interpreter, numerical libraries,
   torch's CPU operators: `host`);
5. other ranges and operators of the workload on the main thread (Kineto's `cpu_op`s, NVTX);
6. its scheduling (`sched_events`): on a CPU (running host code nobody sampled) or off it;
7. in a Kineto trace that records CPU operators, a stretch of `UNRECORDED_NS` or more in which
   no thread of the process recorded anything (no operator, range or CUDA call): Kineto
   records every PyTorch operator and CUDA call and nothing else, so the process ran code
   outside PyTorch (the loop's own Python, a library that does not call torch: a tokeniser,
   numpy) or waited (`unrecorded`), what nsys's samples show as host code. Shorter stretches (a
   model's Python between two operators, µs) and time another thread recorded work in (the
   main thread waiting in backward() while autograd's thread runs) are not.
What no label covers is unobserved.

Besides: the samples of DataLoader worker threads in the interval (the loader working while the
main thread waits on it); what autograd's threads (`pt_autograd_*`) did meanwhile, for the time
the main thread waits for them; and the batch copy the interval precedes (the first
host-to-device copy launched from the interval's start to `BATCH_AFTER` after its end), which
`idle_classes` reads with the steps' recurrence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.families import host
from orchestrator.analysis.readers import cpu_samples, osrt_stacks, pageable_copies, sched_events
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.group_rows import first_per_group
from orchestrator.analysis.timeline.intervals import merge_intervals
from orchestrator.analysis.timeline.step_names import is_data_wait, step_family
from orchestrator.analysis.timeline.step_rules import GENERIC, MAX_INTERLEAVE, SPECIFIC

LABELS = (
    "range-data",
    "range-tensor",
    "range-comm",
    "cuda-sync",
    "copy-pageable",
    "wait-autograd",
    "wait-sync",
    "wait-comm",
    "sleep",
    "io",
    "release",
    "wait-python",
    "wait-lock",
    "s-sync",
    "s-comm",
    "s-data",
    "s-launch",
    "s-wait",
    "s-host",
    "range-op",
    "running",
    "off-cpu",
    "unrecorded",
)
L = {name: i for i, name in enumerate(LABELS)}
# samples group (cpu_samples.GROUPS) -> label
SAMPLE_LABEL = {"sync": "s-sync", "wait": "s-wait", "comm": "s-comm", "launch": "s-launch",
                "data": "s-data", "interpreter": "s-host", "other": "s-host"}  # fmt: skip
# osrt_stacks.TARGETS -> label
CALL_LABEL = {
    "autograd": "wait-autograd",
    "sync": "wait-sync",
    "comm": "wait-comm",
    "sleep": "sleep",
    "io": "io",
    "python": "wait-python",
    "lock": "wait-lock",
    "release": "release",
}
DATA_OPS = re.compile(
    r"(?i)dataloader|_next_data|collate|__getitem__|pin_memory|get_batch|next_batch"
)
# a tensor built from Python data (torch.tensor of a list: `aten::lift_fresh`), the operator of
# what CPU samples show as `tensor_ctor` (`cpu_samples.DATA`): loading evidence of its own, under
# the DataLoader's ranges, which name the loading better where there are some
TENSOR_OPS = re.compile(r"^aten::lift_fresh$")
COMM_OPS = re.compile(
    r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|c10d::|gloo|alltoall"
)
AUTOGRAD_THREAD = re.compile(r"(?i)^pt_autograd")
BATCH_AFTER = 2_000_000  # ns after an interval in which its batch's copy is looked for
# the shortest stretch with nothing recorded that counts as the process's own code (7. above):
# as long as critical_path.GRAPH_HOST_NS, the host work a CUDA graph leaves in the step
UNRECORDED_NS = 1_000_000
RELEASE_AFTER_NS = 1_000_000  # a release this soon after a pageable copy's call is its batch's
MIN_CALL_NS = 20_000  # OS-runtime calls read with their stacks: those at least this long
NAMED = 50  # intervals whose ranges, calls and frames are named in the evidence
PERIOD_RANGE = (50_000, 20_000_000)  # a sampling period, ns, is taken inside this range
ROW_NAMES = 32  # names of ranges kept per interval and label (the first ones, in row order)


@dataclass
class Evidence:
    """Per interval i (the `a`, `b` given): the host window, nanoseconds per label, and what
    else was seen. Arrays over intervals unless said."""

    a: Any
    b: Any
    h: Any  # end of the host window (the launch of the work that ends the gap)
    launched_early: Any  # bool: the work was launched before the GPU went idle
    ns: Any  # [intervals, LABELS]
    batch: Any  # index of the interval's batch copy in the entry's rows, -1: none
    batch_bytes: Any
    workers: Any  # DataLoader worker-thread samples in the interval
    # autograd's threads while the main thread waits for them: ns per class-like kind
    autograd: Any  # [intervals, len(AUTOGRAD_KINDS)]
    sources: list[str] = field(default_factory=list)  # what was read ("OS-runtime stacks", ...)
    # (interval, label) -> names seen (frames, functions, ranges), for the evidence text
    names: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    samples: Any = None  # [intervals]: main-thread samples
    next_kind: list[str] = field(default_factory=list)  # per interval: "HtoD copy", "kernel", ...
    # per interval: the GPU idled between two kernels of one optimizer step (`optimizer_spans`)
    in_optimizer: Any = None


AUTOGRAD_KINDS = ("launch", "sync", "comm", "host", "waiting")


class Cover:
    """A union of intervals, for how much of many windows it covers at once."""

    def __init__(self, s: Any, e: Any) -> None:
        self.s, self.e = merge_intervals(s, e)
        self.before = np.r_[0, np.cumsum(self.e - self.s)]

    def _until(self, x: Any) -> Any:
        if self.s.size == 0:
            return np.zeros(np.shape(x), dtype=np.int64)
        k = np.searchsorted(self.s, x, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(x - self.s[kk], 0, self.e[kk] - self.s[kk])
        return np.where(k >= 0, self.before[kk] + part, 0)

    def cover(self, a: Any, b: Any) -> Any:
        """Covered ns inside each [a[i], b[i]) (b >= a)."""
        return self._until(b) - self._until(a)


def _period(t: Any) -> int:
    """The sampling period of one thread's samples: the median spacing of consecutive ones
    inside PERIOD_RANGE (a thread off its CPU leaves longer gaps), else 1 ms."""
    if t.size < 3:
        return 1_000_000
    d = np.diff(np.sort(t))
    d = d[(d >= PERIOD_RANGE[0]) & (d <= PERIOD_RANGE[1])]
    return int(np.median(d)) if d.size else 1_000_000


def collect(
    tl: T.RankTimeline, rows: T.GpuTable, a: Any, b: Any, main: tuple[int, int] | None
) -> Evidence:
    """The evidence of the intervals [a[i], b[i]) (disjoint; any order) of one entry."""
    n = int(a.size)
    h_all = tl.host
    names = tl.names
    # the work that ends each gap, and when it was launched
    j = np.searchsorted(rows.start, b)
    last = max(rows.size - 1, 0)
    nxt = np.full(n, -1, dtype=np.int64)
    for k in range(8):  # past GPU-side annotations to the first activity
        at = np.minimum(j + k, last)
        hit = (nxt < 0) & (j + k < rows.size) & T.is_activity(rows.kind[at])
        nxt[hit] = at[hit]
    launch = np.where(nxt >= 0, rows.launch[np.maximum(nxt, 0)], -1)
    known = launch >= 0
    early = known & (launch <= a)
    h = np.where(known, np.clip(launch, a, b), b)
    next_kind = [_kind(rows, int(x)) for x in nxt.tolist()]
    # the batch copy: the first host-to-device copy launched from a to BATCH_AFTER after b
    batch, batch_bytes = _batch(rows, a, b)
    ns = np.zeros((n, len(LABELS)), dtype=np.int64)
    ev = Evidence(
        a, b, h, early, ns, batch, batch_bytes, np.zeros(n, dtype=np.int64),
        np.zeros((n, len(AUTOGRAD_KINDS)), dtype=np.int64), next_kind=next_kind,
    )  # fmt: skip
    ev.samples = np.zeros(n, dtype=np.int64)
    ev.in_optimizer = inside_optimizer(tl, rows, a, b)
    if main is None or n == 0:
        return ev
    on_main = (h_all.pid == main[0]) & (h_all.tid == main[1])
    layers: dict[str, list[tuple[Any, Any]]] = {name: [] for name in LABELS}
    is_step = tl.name_mask(lambda s: step_family(s) is not None)
    is_data = tl.name_mask(lambda s: is_data_wait(s) or DATA_OPS.search(s) is not None)
    is_comm = tl.name_mask(COMM_OPS.search)
    # comparisons, not np.isin: a million rows against two or three kinds
    ops = ((h_all.kind == T.CPU_OP) | (h_all.kind == T.ANNOTATION)) & ~is_step[h_all.name]
    data_m = on_main & ops & is_data[h_all.name]
    layers["range-data"].append((h_all.start[data_m], h_all.end[data_m]))
    tensor_m = on_main & ops & tl.name_mask(TENSOR_OPS.search)[h_all.name]
    layers["range-tensor"].append((h_all.start[tensor_m], h_all.end[tensor_m]))
    comm_m = (h_all.kind == T.CPU_OP) | (h_all.kind == T.ANNOTATION)
    comm_m |= h_all.kind == T.LIBRARY_ANNOTATION
    comm_m &= is_comm[h_all.name]
    layers["range-comm"].append((h_all.start[comm_m], h_all.end[comm_m]))
    api = h_all.kind == T.CUDA_API
    sync_m = on_main & api & tl.name_mask(host.SYNC_RE.match, h_all.name[api])[h_all.name]
    layers["cuda-sync"].append((h_all.start[sync_m], h_all.end[sync_m]))
    op_m = on_main & ops & ~is_data[h_all.name] & ~is_comm[h_all.name]
    layers["range-op"].append((h_all.start[op_m], h_all.end[op_m]))
    _name_rows(ev, tl, data_m, "range-data")
    _name_rows(ev, tl, tensor_m, "range-tensor")
    _name_rows(ev, tl, op_m, "range-op")
    autograd = {k for k, v in tl.threads.items() if k[0] == main[0] and AUTOGRAD_THREAD.search(v)}
    nsys = tl.source.kind == "nsys-sqlite"
    # the main thread's calls of copies from or to pageable memory
    paged = _pageable_calls(tl, main, a, h) if nsys else None
    if paged is not None:
        layers["copy-pageable"].append(paged)
        if paged[0].size:
            ev.sources.append("copies' memory kinds and their calls")
    # OS-runtime calls with what they wait for
    if nsys and tl.osrt_traced:
        calls = osrt_stacks.read(tl.source.path, a, h, {main} | autograd, MIN_CALL_NS)
        if calls is not None:
            ev.sources.append("OS-runtime calls and their stacks")
            mine = (calls.pid == main[0]) & (calls.tid == main[1])
            release = calls.target == osrt_stacks.TARGETS.index("release")
            for t, lab in CALL_LABEL.items():
                sel = mine & (calls.target == osrt_stacks.TARGETS.index(t))
                if t == "release":
                    sel &= _follows(calls.start, paged)
                layers[lab].append((calls.start[sel], calls.end[sel]))
            _name_calls(ev, calls, mine & (~release | _follows(calls.start, paged)))
            waiting = ~mine & ~release  # autograd's own threads in their engine's queue: idle
            ag_wait = (calls.start[waiting], calls.end[waiting])
        else:
            ag_wait = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    else:
        # no stacks (a Kineto trace has no OS-runtime rows; an export without them): the calls'
        # names alone
        ag_wait = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        osrt = on_main & (h_all.kind == T.OSRT)
        base = [nm.split("@", 1)[0] for nm in names]
        for lab, funcs in (("sleep", osrt_stacks.SLEEPS), ("io", osrt_stacks.IO),
                           ("wait-lock", osrt_stacks.WAITS)):  # fmt: skip
            fm = np.fromiter((x in funcs for x in base), dtype=bool, count=len(base))
            sel = osrt & fm[h_all.name]
            layers[lab].append((h_all.start[sel], h_all.end[sel]))
    # CPU samples: the main thread's, the loader's workers', autograd's threads'
    smp = cpu_samples.read(tl.source.path, a, h) if nsys else None
    if smp is not None and smp.start.size:
        ev.sources.append("CPU samples")
        _samples(ev, smp, main, autograd, ag_wait, layers, tl)
    # scheduling of the main thread
    if nsys:
        lo, hi = int(a.min()), int(h.max())
        on = sched_events.on_cpu(tl.source.path, main, lo, hi) if hi > lo else None
        if on is not None:
            ev.sources.append("thread scheduling")
            layers["running"].append(on)
            off_s = np.r_[lo, on[1]]
            off_e = np.r_[on[0], hi]
            layers["off-cpu"].append((off_s, off_e))
    # only where the trace records operators at all (a CUDA-only trace leaves every host stretch
    # unrecorded, a DataLoader wait as much as the loop's own code)
    if tl.source.kind == "kineto-json" and bool((h_all.kind == T.CPU_OP).any()):
        layers["unrecorded"].append(_unrecorded(tl, is_step, a, h))
    # priority: each label counts where no earlier one does
    acc_s: list[Any] = []
    acc_e: list[Any] = []
    covered = np.zeros(n, dtype=np.int64)
    for i, name in enumerate(LABELS):
        parts = layers[name]
        if not parts or all(p[0].size == 0 for p in parts):
            continue
        acc_s += [p[0] for p in parts]
        acc_e += [p[1] for p in parts]
        now = Cover(np.concatenate(acc_s), np.concatenate(acc_e)).cover(a, h)
        ns[:, i] = now - covered
        covered = now
    return ev


def _unrecorded(tl: T.RankTimeline, is_step: Any, a: Any, h: Any) -> tuple[Any, Any]:
    """(starts, ends) of the stretches of UNRECORDED_NS or more inside the windows' range in
    which no thread recorded an operator, a range (the steps' own aside) or a CUDA call."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if a.size == 0:
        return none
    x = tl.host
    m = (x.kind == T.CPU_OP) | (x.kind == T.ANNOTATION) | (x.kind == T.CUDA_API)
    m &= ~is_step[x.name]
    lo, hi = int(a.min()), int(h.max())
    m &= (x.end > lo) & (x.start < hi)
    s, e = merge_intervals(x.start[m], x.end[m])
    s = np.r_[np.asarray(s, dtype=np.int64), hi]
    e = np.r_[lo, np.asarray(e, dtype=np.int64)]
    keep = s - e >= UNRECORDED_NS  # the holes between recorded stretches
    return e[keep], s[keep]


def _pageable_calls(
    tl: T.RankTimeline, main: tuple[int, int], a: Any, h: Any
) -> tuple[Any, Any] | None:
    """(starts, ends) of the main thread's CUDA calls that issued a copy from or to pageable
    memory, over the windows' whole range (and the release's reach before it); None where the
    export cannot say."""
    if a.size == 0:
        return None
    got = pageable_copies.read(
        tl.source.path, int(a.min()) - RELEASE_AFTER_NS, int(h.max()), (a, h, RELEASE_AFTER_NS)
    )
    if got is None:
        return None
    m = (got.pid == main[0]) & (got.tid == main[1])
    return got.call_start[m], got.call_end[m]


def _follows(t: Any, paged: tuple[Any, Any] | None) -> Any:
    """Per time t: a pageable copy's call returned at most RELEASE_AFTER_NS before it."""
    if paged is None or paged[1].size == 0:
        return np.zeros(np.shape(t), dtype=bool)
    e = np.sort(paged[1])
    k = np.searchsorted(e, t, side="right") - 1
    return (k >= 0) & (t - e[np.maximum(k, 0)] <= RELEASE_AFTER_NS)


def optimizer_spans(tl: T.RankTimeline, rows: T.GpuTable) -> tuple[Any, Any]:
    """(starts, ends) of the optimizer's steps on the GPU: its kernels (`step_rules`' optimizer
    families and multi-tensor `foreach` kernels) grouped where fewer other kernels than
    MAX_INTERLEAVE, or than half the longest distance between two of them, lie between: an eager
    optimizer runs several bursts a step, split by per-parameter kernels, while the forward and
    backward (the longest distance) separate two steps."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    k = np.flatnonzero(rows.kind == T.KERNEL)
    if k.size == 0:
        return none
    k = k[np.argsort(rows.start[k], kind="stable")]
    is_opt = tl.name_mask(
        lambda x: SPECIFIC.search(x) is not None or GENERIC.search(x) is not None, rows.name[k]
    )
    idx = np.flatnonzero(is_opt[rows.name[k]])
    if idx.size < 2:
        return none
    d = np.diff(idx)
    limit = max(MAX_INTERLEAVE + 1, int(d.max()) // 2)
    cut = np.flatnonzero(d > limit)
    first = idx[np.r_[0, cut + 1]]
    last = idx[np.r_[cut, idx.size - 1]]
    return rows.start[k[first]], np.maximum.accumulate(rows.end[k])[last]


def inside_optimizer(tl: T.RankTimeline, rows: T.GpuTable, a: Any, b: Any) -> Any:
    """Per interval [a, b): the GPU idled inside one optimizer step (`optimizer_spans`): after
    one of its kernels began and before its last one ended."""
    s, e = optimizer_spans(tl, rows)
    if s.size == 0 or a.size == 0:
        return np.zeros(a.size, dtype=bool)
    j = np.searchsorted(s, a, side="right") - 1
    jj = np.maximum(j, 0)
    return (j >= 0) & (a >= s[jj]) & (b <= e[jj])


def _kind(rows: T.GpuTable, i: int) -> str:
    if i < 0:
        return "none"
    k = int(rows.kind[i])
    if k == T.MEMCPY:
        return f"{T.copy_name(int(rows.copy[i]))} copy"
    return "memset" if k == T.MEMSET else "kernel"


def _batch(rows: T.GpuTable, a: Any, b: Any) -> tuple[Any, Any]:
    """(row index, bytes) of the first host-to-device copy launched in [a, b + BATCH_AFTER)
    per interval; -1 and 0 where none was."""
    n = a.size
    out = np.full(n, -1, dtype=np.int64)
    nb = np.zeros(n, dtype=np.int64)
    m = (rows.kind == T.MEMCPY) & (rows.copy == T.COPY_CODES["HtoD"]) & (rows.launch >= 0)
    idx = np.flatnonzero(m)
    if idx.size == 0 or n == 0:
        return out, nb
    order = idx[np.argsort(rows.launch[idx], kind="stable")]
    ls = rows.launch[order]
    k = np.searchsorted(ls, a, side="left")
    ok = (k < ls.size) & (ls[np.minimum(k, ls.size - 1)] < b + BATCH_AFTER)
    out[ok] = order[k[ok]]
    nb[ok] = rows.nbytes[out[ok]]
    return out, nb


def _named(ev: Evidence) -> Any:
    """The intervals whose names are looked up: the `NAMED` longest (names are evidence text;
    a launch-bound trace has thousands of intervals with millions of rows in them)."""
    out = np.zeros(ev.a.size, dtype=bool)
    out[np.argsort(-(ev.b - ev.a), kind="stable")[:NAMED]] = True
    return out


def _name_rows(ev: Evidence, tl: T.RankTimeline, m: Any, label: str) -> None:
    """The names of the rows of mask `m` per interval they overlap (the first few)."""
    h = tl.host
    idx = np.flatnonzero(m)
    if idx.size == 0:
        return
    order = np.argsort(ev.a, kind="stable")
    sa = ev.a[order]
    k = np.searchsorted(sa, h.end[idx], side="left") - 1
    ok = (k >= 0) & (ev.h[order[np.maximum(k, 0)]] > h.start[idx])
    ok &= _named(ev)[order[np.maximum(k, 0)]]
    rows, ks = idx[ok], k[ok]
    # at most the first ROW_NAMES rows of an interval are named: the rest are left out here at
    # once (a million operator rows in the named gaps), never looked at one by one
    first = first_per_group(ks, ROW_NAMES)
    for r, kk in zip(rows[first].tolist(), ks[first].tolist(), strict=True):
        got = ev.names.setdefault((int(order[kk]), L[label]), [])
        if len(got) < ROW_NAMES:
            got.append(tl.names[int(h.name[r])])


def _name_calls(ev: Evidence, calls: osrt_stacks.Calls, mine: Any) -> None:
    order = np.argsort(ev.a, kind="stable")
    sa = ev.a[order]
    k = np.searchsorted(sa, calls.end, side="left") - 1
    ok = mine & (k >= 0) & (ev.h[order[np.maximum(k, 0)]] > calls.start)
    ok &= _named(ev)[order[np.maximum(k, 0)]]
    for c, kk in zip(np.flatnonzero(ok).tolist(), k[ok].tolist(), strict=True):
        lab = L[CALL_LABEL[osrt_stacks.TARGETS[int(calls.target[c])]]]
        got = ev.names.setdefault((int(order[kk]), lab), [])
        if len(got) < 32:
            got.append(calls.frame[c] or calls.func[c])


def _samples(
    ev: Evidence,
    smp: cpu_samples.Samples,
    main: tuple[int, int],
    autograd: set[tuple[int, int]],
    ag_wait: tuple[Any, Any],
    layers: dict[str, list[tuple[Any, Any]]],
    tl: T.RankTimeline,
) -> None:
    a, h = ev.a, ev.h
    order = np.argsort(a, kind="stable")
    sa = a[order]
    k = np.searchsorted(sa, smp.start, side="right") - 1
    inside = (k >= 0) & (smp.start < h[order[np.maximum(k, 0)]])
    iv = np.where(inside, order[np.maximum(k, 0)], -1)
    is_main = (smp.pid == main[0]) & (smp.tid == main[1]) & inside
    half = _period(smp.start[is_main]) // 2
    for g, lab in SAMPLE_LABEL.items():
        sel = is_main & (smp.group == cpu_samples.GROUPS.index(g))
        t = smp.start[sel]
        layers[lab].append((t - half, t + half))
    ev.samples = np.bincount(iv[is_main], minlength=a.size)
    named = _named(ev)
    for j in np.flatnonzero(is_main & named[np.maximum(iv, 0)]).tolist():
        li = L[SAMPLE_LABEL[cpu_samples.GROUPS[int(smp.group[j])]]]
        f = smp.marks[j] or smp.leaf[j]
        got = ev.names.setdefault((int(iv[j]), li), [])
        if f and len(got) < 64:
            got.append(f)
    wanted = cpu_samples.workers(tl.threads)
    # each sample's thread looked up once per distinct thread, not once per sample
    threads, of_row = host.thread_groups(smp.pid, smp.tid) if wanted or autograd else ([], None)
    if wanted:
        w = np.array([k in wanted for k in threads], dtype=bool)[of_row] & inside
        ev.workers = np.bincount(iv[w], minlength=a.size)
    if autograd:
        ag = np.array([k in autograd for k in threads], dtype=bool)[of_row] & inside
        if bool(ag.any()):
            ahalf = _period(smp.start[ag]) // 2
            kinds = {"launch": ("launch",), "sync": ("sync",), "comm": ("comm",),
                     "host": ("interpreter", "other", "data"), "waiting": ("wait",)}  # fmt: skip
            for ki, kind in enumerate(AUTOGRAD_KINDS):
                sel = ag & np.isin(smp.group, [cpu_samples.GROUPS.index(g) for g in kinds[kind]])
                t = smp.start[sel]
                ev.autograd[:, ki] = Cover(t - ahalf, t + ahalf).cover(a, h)
            for j in np.flatnonzero(ag).tolist():
                f = smp.marks[j] or smp.leaf[j]
                got = ev.names.setdefault((int(iv[j]), -1), [])
                if f and len(got) < 64:
                    got.append(f)
        if ag_wait[0].size:
            ev.autograd[:, AUTOGRAD_KINDS.index("waiting")] = np.maximum(
                ev.autograd[:, AUTOGRAD_KINDS.index("waiting")],
                Cover(*ag_wait).cover(a, h),
            )
