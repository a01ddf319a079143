"""The host side of one rank: annotation / NVTX ranges, training steps, data waits, CPU threads,
the main thread and its blocking waits, CUDA synchronisation calls, and the activation-offloading
pattern (docs/metrics.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from orchestrator.analysis.families.stats import quantile
from orchestrator.analysis.metrics import (
    FunctionStat,
    RangeStat,
    StepStats,
    SyncStats,
    ThreadStat,
)
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals, union_in_span, union_of_sorted
from orchestrator.analysis.timeline.step_names import is_data_wait, step_family, step_pattern
from orchestrator.analysis.timeline.step_names import step_rows as step_rows

TOP_RANGES = 50
TOP_THREADS = 40
TOP_FUNCTIONS = 10
SYNC_RE = re.compile(r"(?i)^cu(da)?\w*(Synchronize|StreamWaitEvent)")
_FORWARD_RE = re.compile(r"(?i)(?<![a-z])(?:forward|fwd)(?![a-z])")
_BACKWARD_RE = re.compile(r"(?i)(?<![a-z])(?:backward|bwd)(?![a-z])")
# activation offloading moves whole activation tensors (MiBs each step); a scalar read back by
# `.item()` inside forward is bytes: below this the pattern is not evidence of offloading
OFFLOAD_MIN_BYTES = 1 << 20
# Blocking synchronisation waits: the thread sleeps until another thread signals it (a
# DataLoader's queue, a condition variable, a lock). poll/select/epoll/read are not counted:
# helper threads (cuda-EvtHandlr, NCCL proxies) sit in them for the whole capture, and for the
# main thread they are I/O, not evidence of waiting for another thread.
BLOCKING_WAITS = frozenset(
    {
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "pthread_cond_clockwait",
        "sem_wait",
        "sem_timedwait",
        "sem_clockwait",
        "pthread_mutex_lock",
        "pthread_mutex_timedlock",
        "pthread_join",
    }
)
# names a Python training process gives its main thread (PyTorch renames it pt_main_thread)
MAIN_THREAD_NAMES = ("pt_main_thread", "python", "python3", "MainThread")


def is_blocking_wait(func: str) -> bool:
    """True for OS-runtime functions in BLOCKING_WAITS (symbol versions like `@GLIBC_2.3.2`
    ignored)."""
    return func.split("@", 1)[0] in BLOCKING_WAITS


def _per_name(ids: Any, dur: Any) -> list[tuple[int, int, int, int, int]]:
    """(name id, count, total, min, max) per name id of the rows."""
    if ids.size == 0:
        return []
    order = np.argsort(ids, kind="stable")
    ids, dur = ids[order], dur[order]
    idx = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    counts = np.diff(np.r_[idx, ids.size])
    return list(
        zip(
            ids[idx].tolist(),
            counts.tolist(),
            np.add.reduceat(dur, idx).tolist(),
            np.minimum.reduceat(dur, idx).tolist(),
            np.maximum.reduceat(dur, idx).tolist(),
            strict=True,
        )
    )


def group_step_ranges(stats: list[RangeStat]) -> list[RangeStat]:
    """Per-name range table with numbered step ranges folded into one `step_*` row each (count,
    total, min and max over the steps); the order is by total time, largest first."""
    folded = _fold_steps([(r.name, [r.count, r.total_ns, r.min_ns, r.max_ns]) for r in stats])
    return [_stat(name, g) for name, g in folded]


def _fold_steps(rows: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
    """(name, [count, total, min, max]) rows with numbered step ranges folded into one row a
    family, by total, largest first (ties in the rows' order). Plain lists, not models: a trace
    of a million distinct range names builds a model only for the rows it shows."""
    out: dict[str, list[int]] = {}
    for name, (c, t, lo, hi) in rows:
        key = step_pattern(name) or name
        g = out.get(key)
        out[key] = [c, t, lo, hi] if g is None else [
            g[0] + c, g[1] + t, min(g[2], lo), max(g[3], hi)
        ]  # fmt: skip
    return sorted(out.items(), key=lambda kv: -kv[1][1])


def _stat(name: str, g: list[int]) -> RangeStat:
    c, t, lo, hi = g
    return RangeStat(name=name, count=c, total_ns=t, mean_ns=t / c, min_ns=lo, max_ns=hi)


def ranges(tl: T.RankTimeline, gpu_rows: T.GpuTable) -> list[RangeStat]:
    """Annotation / NVTX ranges per name (GPU-side annotations suffixed ` [gpu]`), numbered
    step ranges folded into one row, the TOP_RANGES largest by total."""
    h = tl.host
    m = (h.kind == T.ANNOTATION) & (h.end >= h.start)
    stats: dict[str, list[int]] = {}
    ga = gpu_rows.kind == T.GPU_ANNOTATION  # durations of the selected rows only
    for suffix, ids, dur in (
        ("", h.name[m], h.end[m] - h.start[m]),
        (" [gpu]", gpu_rows.name[ga], gpu_rows.end[ga] - gpu_rows.start[ga]),
    ):
        for i, c, tot, lo, hi in _per_name(ids, dur):
            key = tl.names[i] + suffix
            g = stats.get(key)
            if g is None:
                stats[key] = [c, tot, lo, hi]
            else:
                stats[key] = [g[0] + c, g[1] + tot, min(g[2], lo), max(g[3], hi)]
    by_total = sorted(stats.items(), key=lambda kv: -kv[1][1])
    return [_stat(name, g) for name, g in _fold_steps(by_total)[:TOP_RANGES]]


def family_rows(rows: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The rows of the step family `steps` picks (most ranges, then largest total), by start:
    a trace may hold two nested families (Kineto's `ProfilerStep#N` around a `step_N`)."""
    fams: dict[str, list[tuple[str, int, int]]] = {}
    for row in rows:
        fam = step_family(row[0])
        if fam is not None:
            fams.setdefault(fam, []).append(row)
    if not fams:
        return []
    _, items = max(fams.items(), key=lambda kv: (len(kv[1]), sum(r[2] for r in kv[1])))
    return sorted(items, key=lambda r: (r[1], r[2]))


def steps(rows: Iterable[tuple[str, int, int]]) -> StepStats | None:
    """Step-time statistics from (name, start, duration) ranges; the largest family wins."""
    fams: dict[str, list[tuple[int, int]]] = {}
    for name, start, dur in rows:
        fam = step_family(name)
        if fam is not None:
            fams.setdefault(fam, []).append((start, dur))
    if not fams:
        return None
    fam, items = max(fams.items(), key=lambda kv: (len(kv[1]), sum(d for _, d in kv[1])))
    items.sort()
    durs = [d for _, d in items]
    s = sorted(durs)
    if len(durs) > 5000:  # keep the JSON small: an even sample in time order
        step = len(durs) / 5000
        durs = [durs[int(i * step)] for i in range(5000)]
    return StepStats(
        family=fam,
        count=len(s),
        total_ns=sum(s),
        mean_ns=sum(s) / len(s),
        p50_ns=quantile(s, 0.5),
        p90_ns=quantile(s, 0.9),
        min_ns=s[0],
        max_ns=s[-1],
        durations_ns=durs,
    )


def data_wait(tl: T.RankTimeline, lo: int, hi: int) -> int:
    """Union of the host ranges that say the step waits for data, inside [lo, hi) (the span;
    all of it without a span)."""
    h = tl.host
    ann = h.kind == T.ANNOTATION
    is_data = tl.name_mask(is_data_wait, h.name[ann])
    m = ann & is_data[h.name] if h.size else None
    if m is None or not bool(m.any()):
        return 0
    ms, me = merge_intervals(h.start[m], h.end[m])
    return union_in_span(ms, me, lo, hi)


def threads(tl: T.RankTimeline, main: tuple[int, int] | None = None) -> list[ThreadStat]:
    """Listed threads (`RankTimeline.threads`) and every thread with OS-runtime calls or CPU
    operators: OS-runtime time and calls by function, union of CPU-operator time; `main` (the
    main thread's (pid, tid)) is flagged, since its name may be shared (nsys names it and
    every OpenMP worker after the process, e.g. `python3`)."""
    h = tl.host
    out: dict[tuple[int, int], ThreadStat] = {}

    def stat(key: tuple[int, int]) -> ThreadStat:
        t = out.get(key)
        if t is None:
            pid, tid = key
            label = tl.threads.get(key, f"thread {tid if tid != T.NONE else 0}")
            t = out[key] = ThreadStat(
                tid=tid if tid != T.NONE else 0, pid=pid if pid != T.NONE else None, name=label
            )
        return t

    for key in tl.threads:
        stat(key)
    osrt = h.kind == T.OSRT
    if bool(osrt.any()):
        keys, inv = thread_groups(h.pid[osrt], h.tid[osrt])
        ids = h.name[osrt]
        dur = (h.end - h.start)[osrt]
        for j, key in enumerate(keys):
            sel = inv == j
            funcs = [
                FunctionStat(name=tl.names[i], count=c, total_ns=t)
                for i, c, t, _, _ in _per_name(ids[sel], dur[sel])
            ]
            funcs.sort(key=lambda f: (-f.total_ns, f.name))
            t = stat(key)
            t.osrt_calls = sum(f.count for f in funcs)
            t.osrt_ns = sum(f.total_ns for f in funcs)
            t.functions = funcs[:TOP_FUNCTIONS]
    ops = h.kind == T.CPU_OP
    if bool(ops.any()):
        keys, inv = thread_groups(h.pid[ops], h.tid[ops])
        os_, oe = h.start[ops], h.end[ops]
        for j, key in enumerate(keys):
            sel = inv == j
            s, e = os_[sel], oe[sel]
            keep = e >= s
            s, e = s[keep], e[keep]
            if s.size > 1 and not bool((s[1:] >= s[:-1]).all()):  # rows come in start order
                order = np.argsort(s, kind="stable")
                s, e = s[order], e[order]
            stat(key).cpu_op_ns = union_of_sorted(s, e).busy
    if main is not None:
        stat(main).main = True
    ranked = sorted(out.values(), key=lambda t: (-(t.osrt_ns + t.cpu_op_ns), t.name, t.tid))
    return ranked[:TOP_THREADS]


def thread_groups(pid: Any, tid: Any) -> tuple[list[tuple[int, int]], Any]:
    """Distinct (pid, tid) pairs and each row's index into them."""
    if pid.size and int(pid.min()) >= 0 and int(tid.min()) >= 0 and int(tid.max()) < 1 << 31:
        packed = (pid.astype(np.int64) << 31) | tid
        lo, hi = int(packed.min()), int(packed.max())
        if lo == hi:  # one thread (a PyTorch run's operators): no sort of a million rows
            return [(lo >> 31, lo & ((1 << 31) - 1))], np.zeros(packed.size, dtype=np.intp)
        keys, inv = np.unique(packed, return_inverse=True)
        return [(k >> 31, k & ((1 << 31) - 1)) for k in keys.tolist()], inv.reshape(-1)
    pairs, inv = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
    return [(int(p), int(t)) for p, t in pairs.tolist()], inv.reshape(-1)


def thread_keys(pid: Any, tid: Any, few: int = 64) -> set[tuple[int, int]]:
    """The distinct (pid, tid) pairs of the rows (`thread_groups`' keys): peeled one thread at a
    time while they are few (a million operator rows on a handful of threads need no sort)."""
    out: set[tuple[int, int]] = set()
    while pid.size:
        if len(out) >= few:
            return out | set(thread_groups(pid, tid)[0])
        out.add((int(pid[0]), int(tid[0])))
        other = (pid != pid[0]) | (tid != tid[0])
        pid, tid = pid[other], tid[other]
    return out


def main_thread(tl: T.RankTimeline) -> tuple[tuple[int, int], str] | None:
    """The process's main thread ((pid, tid), rule), or None when nothing singles one out.

    Linux gives a process's first thread tid == pid; among those, the one of the process that
    owns the CUDA streams (nsys `TARGET_INFO_CUDA_STREAM`); else the only such thread; else the
    one named like a Python main thread (`MAIN_THREAD_NAMES`). Never "the busiest thread":
    a helper thread such as cuda-EvtHandlr polls for the whole capture."""
    h = tl.host
    keys = set(tl.threads)
    m = np.isin(h.kind, (T.OSRT, T.CPU_OP))
    if bool(m.any()):
        keys |= thread_keys(h.pid[m], h.tid[m])
    every = sorted(k for k in keys if k[0] != T.NONE)
    mains = [k for k in every if k[0] == k[1]]
    if tl.cuda_pids:
        in_cuda = [k for k in mains if k[0] in tl.cuda_pids]
        if len(in_cuda) == 1:
            return in_cuda[0], "tid == pid in the process owning the CUDA streams"
        mains = in_cuda or mains
    elif len(mains) == 1:
        return mains[0], tl.single_main_rule
    named = [k for k in (mains or sorted(keys)) if tl.threads.get(k) in MAIN_THREAD_NAMES]
    if len(named) == 1:
        return named[0], f"named {tl.threads[named[0]]}"
    return None


def main_thread_wait(tl: T.RankTimeline, key: tuple[int, int], lo: int, hi: int) -> int | None:
    """Union of the main thread's blocking waits inside [lo, hi); None without OS-runtime rows."""
    h = tl.host
    osrt = h.kind == T.OSRT
    if not tl.osrt_traced or not bool(osrt.any()):
        return None
    blocking = tl.name_mask(is_blocking_wait, h.name[osrt])
    m = osrt & (h.pid == key[0]) & (h.tid == key[1]) & blocking[h.name]
    ms, me = merge_intervals(h.start[m], h.end[m])
    # like the data wait: inside the span, or all of it when the trace has no GPU activity (a
    # real CPU-only export measured 0 here while its main thread waited 100+ ms)
    return union_in_span(ms, me, lo, hi)


def sync(tl: T.RankTimeline, lo: int, hi: int, idle_wall_ns: int = 0) -> SyncStats:
    """CUDA synchronisation calls: count and summed time per function, and their wall time
    (union of every thread's calls inside [lo, hi)); `idle_wall_ns`: the part of it while the
    GPU was idle (`idle_causes.sync_while_idle`)."""
    h = tl.host
    api = h.kind == T.CUDA_API
    is_sync = tl.name_mask(SYNC_RE.match, h.name[api])
    m = api & is_sync[h.name] if h.size else None
    if m is None or not bool(m.any()):
        return SyncStats()
    funcs = [
        FunctionStat(name=tl.names[i], count=c, total_ns=t)
        for i, c, t, _, _ in _per_name(h.name[m], (h.end - h.start)[m])
    ]
    funcs.sort(key=lambda f: (-f.total_ns, f.name))
    ss, se = merge_intervals(h.start[m], h.end[m])
    return SyncStats(
        calls=sum(f.count for f in funcs),
        total_ns=sum(f.total_ns for f in funcs),
        wall_ns=union_in_span(ss, se, lo, hi),
        idle_wall_ns=idle_wall_ns,
        functions=funcs,
    )


def _inside(s: Any, e: Any, x: Any) -> Any:
    """Mask of the points x that lie inside one of the merged intervals [s, e)."""
    if s.size == 0:
        return np.zeros(x.size, dtype=bool)
    i = np.searchsorted(s, x, side="right") - 1
    return (i >= 0) & (x < e[np.maximum(i, 0)])


def offload_pattern(tl: T.RankTimeline, rows: T.GpuTable) -> tuple[bool | None, str | None]:
    """(True, evidence) when the trace shows activation offloading: most DtoH bytes launched
    inside `forward` ranges (saved activations leave the GPU) and most HtoD bytes launched inside
    `backward` ranges (they come back), each at least OFFLOAD_MIN_BYTES; else (None, None), as
    the absence of the pattern does not prove offloading was off. A copy's launch is the start of
    the host call that enqueued it (copies run asynchronously)."""
    c = rows.kind == T.MEMCPY
    if not bool(c.any()):
        return None, None
    h = tl.host
    ann = h.kind == T.ANNOTATION

    def merged(rx: re.Pattern[str]) -> tuple[Any, Any]:
        m = (
            ann & tl.name_mask(rx.search, h.name[ann])[h.name]
            if h.size
            else np.zeros(0, dtype=bool)
        )
        return merge_intervals(h.start[m], h.end[m])

    launch = rows.launch[c]
    found = launch != T.NONE
    code = rows.copy[c]
    nbytes = rows.nbytes[c]
    dtoh, htod = code == T.COPY_CODES["DtoH"], code == T.COPY_CODES["HtoD"]
    in_fwd = found & _inside(*merged(_FORWARD_RE), launch)
    in_bwd = found & _inside(*merged(_BACKWARD_RE), launch)
    dtoh_all, dtoh_fwd = int(nbytes[dtoh].sum()), int(nbytes[dtoh & in_fwd].sum())
    htod_all, htod_bwd = int(nbytes[htod].sum()), int(nbytes[htod & in_bwd].sum())
    if (
        dtoh_fwd >= OFFLOAD_MIN_BYTES
        and htod_bwd >= OFFLOAD_MIN_BYTES
        and 2 * dtoh_fwd >= dtoh_all
        and 2 * htod_bwd >= htod_all
    ):
        return True, (
            f"trace: {100 * dtoh_fwd / dtoh_all:.0f}% of DtoH bytes launched in forward ranges,"
            f" {100 * htod_bwd / htod_all:.0f}% of HtoD bytes in backward ranges"
        )
    return None, None
