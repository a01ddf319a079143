"""Why the GPU waits: the idle intervals that hold most idle time, each attributed to what the
host did inside it (issue 28 item 2).

The intervals: the gaps of the GPU's busy union (kernels, copies, memsets of the entry), longest
first, until they hold `HELD` of the idle time; none shorter than `MIN_GAP_NS` (the µs gaps
between launches are not looked at one by one: they are the `short-gaps` class, whose cause is
HTA's idle breakdown), at most `MAX_GAPS`.

What the host did in each interval, from the main thread (`host.main_thread`) and the whole
process:
- the workload's ranges and CPU operators on the main thread (Kineto: `enumerate(DataLoader)#...
  __next__`, `Optimizer.step#...`; NVTX ranges of the workload's own): the one that covers most
  of the interval names it;
- the main thread's CUDA synchronisation calls (a sync while the GPU is idle blocks on nothing
  of this GPU: another device, an event, a collective);
- the main thread's OS-runtime calls: blocking waits on a condition variable, semaphore or lock
  (`host.BLOCKING_WAITS`) and waits for I/O or a queue's pipe (`IO_WAITS`);
- communication: NCCL's ranges (a library's, `library_ranges`) or collective operators.

- the main thread's CPU samples inside the interval and the DataLoader worker threads' samples
  (`cpu_samples`: nsys exports recorded with `--sample`), read after the ranges, CUDA API and
  OS-runtime calls and before the inferred rules (docs/metrics.md "Why the GPU waits" gives the
  order); each class's evidence says which of these answered it.

Classes, first that holds at least half of the interval (`COVER`):
- `input`: a data-loading range or operator (`step_names.is_data_wait`, `DATA_OPS`); or the
  main thread ran (no sync, no blocking call, no collective covers the interval) and the GPU's
  first work after the interval is a host-to-device copy (the batch arriving): data loading /
  input on the main thread;
- `communication`: a collective range or operator;
- `sync`: the main thread in a CUDA synchronisation call;
- `queue-wait`: the main thread blocked on a queue, lock or I/O (e.g. a DataLoader's queue when
  its workers fall behind);
- `host-compute`: the main thread ran without launching GPU work (Python overhead, host-side
  work) — named by the operator that covers it where the trace has operators.

Each class carries its evidence: how many intervals, what covered them, the named operators.
Costs are per step where the rank has steps (`step_rules`), else over the span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.families import host
from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import IdleBreakdown, IdleCause, IdleCauses
from orchestrator.analysis.readers import cpu_samples
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals
from orchestrator.analysis.timeline.step_names import is_data_wait, step_family

MIN_GAP_NS = 100_000
MIN_SAMPLES = 2  # main-thread CPU samples an interval needs before they may answer
# the sample groups of a main thread making a batch: data-loading frames, the interpreter and
# libc (native code of the application or the framework is host compute, not input)
COMPUTE = ("data", "interpreter")
HELD = 0.8
MAX_GAPS = 10_000
COVER = 0.5
NEXT_WORK = 3  # the first activities after an interval looked at for the batch's copy
NAMED = 50  # intervals (longest first) whose covering operator or calls are named
IO_WAITS = frozenset(
    {"poll", "ppoll", "select", "pselect", "pselect6", "epoll_wait", "epoll_pwait", "read",
     "recv", "recvfrom", "recvmsg", "futex", "nanosleep", "usleep", "sleep"}
)  # fmt: skip
DATA_OPS = re.compile(
    r"(?i)dataloader|_next_data|collate|__getitem__|pin_memory|fetch|get_batch|next_batch"
)
COMM_OPS = re.compile(
    r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|c10d::|gloo|alltoall"
)
LABELS = {
    "input": "data loading / input on the main thread",
    "queue-wait": "the host waits on a queue or lock",
    "host-compute": "host compute (Python overhead, host-side work)",
    "sync": "synchronisation while the GPU is idle",
    "communication": "communication wait",
    "short-gaps": "µs gaps between kernels (launch-bound or back-to-back work)",
}


@dataclass
class _Tally:
    ns: int = 0
    gaps: int = 0
    what: dict[str, int] = field(default_factory=dict)
    # per `what` that CPU samples answered: [samples in the class's frames, main-thread
    # samples, worker-thread samples] and the frames named
    counts: dict[str, list[int]] = field(default_factory=dict)
    frames: dict[str, list[str]] = field(default_factory=dict)

    def add(self, ns: int, what: str, counts: tuple[int, int, int] | None = None,
            frames: list[str] | None = None) -> None:  # fmt: skip
        self.ns += ns
        self.gaps += 1
        self.what[what] = self.what.get(what, 0) + ns
        if counts is not None:
            c = self.counts.setdefault(what, [0, 0, 0])
            for i, x in enumerate(counts):
                c[i] += x
            self.frames.setdefault(what, []).extend(frames or [])

    def text(self, what: str) -> str:
        """`what` with its sample counts and most frequent frames filled in."""
        c = self.counts.get(what)
        if c is None:
            return what
        named = ", ".join(f"`{f}`" for f in cpu_samples.top(self.frames.get(what, [])))
        return what.format(n=c[0], m=c[1], w=c[2], frames=f" ({named})" if named else "")


class _Cover:
    """The union of some host rows, for how much of many intervals it covers at once."""

    def __init__(self, h: T.HostTable, m: Any) -> None:
        idx = np.flatnonzero(m)
        order = np.argsort(h.start[idx], kind="stable")
        idx = idx[order]
        self.s, self.e = merge_intervals(h.start[idx], h.end[idx])
        self.before = np.r_[0, np.cumsum(self.e - self.s)]

    def _until(self, x: Any) -> Any:
        if self.s.size == 0:
            return np.zeros(x.size, dtype=np.int64)
        k = np.searchsorted(self.s, x, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(x - self.s[kk], 0, self.e[kk] - self.s[kk])
        return np.where(k >= 0, self.before[kk] + part, 0)

    def cover(self, a: Any, b: Any) -> Any:
        """Covered ns inside each [a[i], b[i])."""
        return self._until(b) - self._until(a)


def _longest(h: T.HostTable, rows: Any, names: list[str], a: int, b: int) -> str | None:
    """The name of the row (of the index array `rows`) that covers most of [a, b)."""
    cand = rows[(h.end[rows] > a) & (h.start[rows] < b)]
    if cand.size == 0:
        return None
    ns = np.minimum(h.end[cand], b) - np.maximum(h.start[cand], a)
    return names[int(h.name[cand[int(np.argmax(ns))]])]


def _base(name: str) -> str:
    return name.split("@", 1)[0]


def attribute(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gap_starts: Any,
    gap_ends: Any,
    idle_ns: int,
    step_starts: list[int],
    main: tuple[int, int] | None,
) -> IdleCauses | None:
    """The idle attribution of one entry (see the module docstring); None without idle time.
    Per step: over the steps that start inside the GPU span (`step_starts`), since the idle
    time of a step that opens before the first GPU work (a capture that opens at a step's start,
    whose wait comes before the first kernel) lies outside the span and is not seen."""
    if idle_ns <= 0 or gap_starts.size == 0:
        return None
    lens = gap_ends - gap_starts
    big = np.flatnonzero(lens >= MIN_GAP_NS)  # few: the µs launch gaps are most gaps
    order = big[np.argsort(-lens[big], kind="stable")]
    held = np.cumsum(lens[order])
    take = int(np.searchsorted(held, HELD * idle_ns)) + 1
    pick = order[: min(take, MAX_GAPS)]
    h = tl.host
    names = tl.names
    on_main = (h.pid == main[0]) & (h.tid == main[1]) if main is not None else np.ones(h.size, bool)
    is_step = tl.name_mask(lambda n: step_family(n) is not None)
    is_data = tl.name_mask(lambda n: is_data_wait(n) or DATA_OPS.search(n) is not None)
    waiting = tl.name_mask(lambda n: _base(n) in host.BLOCKING_WAITS or _base(n) in IO_WAITS)
    op_m = on_main & np.isin(h.kind, (T.CPU_OP, T.ANNOTATION)) & ~is_step[h.name]
    data_m = op_m & is_data[h.name]
    blocks_m = on_main & (h.kind == T.OSRT) & waiting[h.name]
    comm_m = np.isin(h.kind, (T.CPU_OP, T.ANNOTATION, T.LIBRARY_ANNOTATION))
    comm_m &= tl.name_mask(COMM_OPS.search)[h.name]
    sync_m = on_main & (h.kind == T.CUDA_API) & tl.name_mask(host.SYNC_RE.match)[h.name]
    a, b = gap_starts[pick], gap_ends[pick]
    half = COVER * (b - a)
    got = {
        k: _Cover(h, m).cover(a, b) >= half
        for k, m in (("data", data_m), ("ops", op_m), ("comm", comm_m), ("sync", sync_m),
                     ("block", blocks_m))
    }  # fmt: skip
    # the GPU's next work after each interval: a host-to-device copy is the batch arriving
    # (the entry's rows are sorted by start)
    htod = T.COPY_CODES["HtoD"]
    j = np.searchsorted(rows.start, b)
    batch = np.zeros(pick.size, dtype=bool)
    batch_bytes = np.zeros(pick.size, dtype=np.int64)
    seen = np.zeros(pick.size, dtype=np.int64)
    last = max(rows.size - 1, 0)
    for k in range(4 * NEXT_WORK):  # past GPU-side annotations, the first NEXT_WORK activities
        at = np.minimum(j + k, last)
        act = (j + k < rows.size) & (seen < NEXT_WORK) & T.is_activity(rows.kind[at])
        hit = act & (rows.kind[at] == T.MEMCPY) & (rows.copy[at] == htod)
        batch |= hit
        batch_bytes += np.where(hit, rows.nbytes[at], 0)
        seen += act
    gs = _gap_samples(tl, a, b, main)
    m_tot = gs.n.sum(axis=1) if gs is not None else np.zeros(pick.size, dtype=np.int64)
    dom = gs.n.argmax(axis=1) if gs is not None else np.zeros(pick.size, dtype=np.int64)
    dom_n = gs.n.max(axis=1) if gs is not None else np.zeros(pick.size, dtype=np.int64)
    wk = gs.workers if gs is not None else np.zeros(pick.size, dtype=np.int64)
    said = (m_tot >= MIN_SAMPLES) & (dom_n >= COVER * m_tot)  # the samples answer

    def s_is(*groups: str) -> Any:
        return said & np.isin(dom, [cpu_samples.GROUPS.index(g) for g in groups])

    # the main thread computing on the host: neither waiting, syncing nor launching
    comp_n = (
        gs.n[:, [cpu_samples.GROUPS.index(g) for g in COMPUTE]].sum(axis=1)
        if gs is not None
        else np.zeros(pick.size, dtype=np.int64)
    )
    computing = (m_tot >= MIN_SAMPLES) & (comp_n >= COVER * m_tot)

    cls = np.full(pick.size, "host-compute", dtype=object)
    how = np.full(pick.size, "default", dtype=object)
    unset = np.ones(pick.size, dtype=bool)
    for name, rule, m in (
        ("input", "ranges", got["data"]),
        ("communication", "comm", got["comm"]),
        ("sync", "cuda-api", got["sync"]),
        ("queue-wait", "osrt", got["block"]),
        ("input", "s-data", s_is("data")),
        ("queue-wait", "s-wait", s_is("wait")),
        ("sync", "s-sync", s_is("sync")),
        ("communication", "s-comm", s_is("comm")),
        # Python or libc running on the main thread while no data-loading worker ran, and the
        # batch arrives next: the main thread made the batch
        ("input", "s-input", computing & (wk == 0) & batch & ~got["ops"]),
        ("host-compute", "s-compute", s_is("interpreter", "launch", "other") & ~got["ops"]),
        ("input", "inferred", ~got["ops"] & batch),
    ):
        cls[unset & m] = name
        how[unset & m] = rule
        unset &= ~m
    tallies: dict[str, _Tally] = {}
    data_rows, op_rows = np.flatnonzero(data_m), np.flatnonzero(op_m)
    for i in range(pick.size):
        c, x, y, r = str(cls[i]), int(a[i]), int(b[i]), str(how[i])
        named = i < NAMED  # names are looked up for the longest intervals only
        counts: tuple[int, int, int] | None = None
        frames: list[str] = []
        workers = int(wk[i])
        if r == "s-input" and gs is not None:
            counts = (int(comp_n[i]), int(m_tot[i]), workers)
            # the data-loading frames name it where there are any
            frames = gs.frames(i, cpu_samples.GROUPS.index("data")) or [
                f for g in COMPUTE for f in gs.frames(i, cpu_samples.GROUPS.index(g))
            ]
        elif r.startswith("s-") and gs is not None:
            counts, frames = (int(dom_n[i]), int(m_tot[i]), workers), gs.frames(i, int(dom[i]))
        if r == "ranges":
            longest = _longest(h, data_rows, names, x, y) if named else None
            what = f"ranges: `{longest}`" if named else "ranges: data-loading ranges"
        elif r == "comm":
            what = "ranges: collective ranges or operators"
        elif r == "cuda-api":
            what = "CUDA API: synchronisation calls of the main thread"
        elif r == "osrt":
            what = "OS runtime: the main thread blocked"
            if named:
                inside = blocks_m & (h.end > x) & (h.start < y)
                funcs = sorted({_base(names[int(n)]) for n in h.name[inside].tolist()})
                what += " in " + ", ".join(f"`{f}`" for f in funcs[:4])
            if workers:
                counts = (0, int(m_tot[i]), workers)
                what += (
                    " while data-loading worker threads ran ({w} samples: more workers or prefetch)"
                )
        elif r == "s-data":
            what = "samples: {n} of {m} main-thread samples in data-loading frames{frames}"
        elif r == "s-wait":
            what = "samples: {n} of {m} main-thread samples blocked on a queue, lock or I/O{frames}"
            what += (
                ", data-loading worker threads busy ({w} samples): more workers or prefetch"
                if workers
                else ", no data-loading worker thread sampled"
            )
        elif r == "s-comm":
            what = "samples: {n} of {m} main-thread samples in communication libraries{frames}"
        elif r == "s-sync":
            what = "samples: {n} of {m} main-thread samples in CUDA synchronisation{frames}"
        elif r == "s-input":
            what = (
                "samples: {n} of {m} main-thread samples in data-loading frames, the Python"
                " interpreter or libc{frames}, no data-loading worker thread sampled, and the"
                " GPU's next work is a host-to-device copy (the batch)"
            )
        elif r == "s-compute":
            what = "samples: {n} of {m} main-thread samples in " + SAMPLE_WORDS[int(dom[i])]
            what += "{frames}"
        elif r == "inferred":
            what = (
                "inferred: the main thread ran (no sync, blocking call or collective) and the"
                f" GPU's next work is a host-to-device copy ({_size(int(batch_bytes[i]))}:"
                " the batch)"
            )
        elif got["ops"][i]:
            what = (
                f"ranges: `{_longest(h, op_rows, names, x, y)}`"
                if named
                else "ranges: host operators"
            )
        else:
            what = "inferred: the main thread ran without launching GPU work"
        tallies.setdefault(c, _Tally()).add(y - x, what, counts, frames)
    examined = int(lens[pick].sum()) if pick.size else 0
    rest = idle_ns - examined
    if rest > 0:
        t = tallies.setdefault("short-gaps", _Tally())
        t.ns, t.gaps = rest, int(lens.size - pick.size)
        what = "gaps shorter than the intervals examined" + _launch_path(tl, rows, a, b, main)
        t.what = {what: rest}
    lo_span = int(rows.start[0]) if rows.size else 0
    steps = sum(1 for x in step_starts if x >= lo_span) or len(step_starts)
    per = max(steps, 1)
    causes = []
    for kind, t in tallies.items():
        whats = sorted(t.what.items(), key=lambda kv: -kv[1])
        ev = "; ".join(
            f"{t.text(w)} ({100 * ns / t.ns:.0f} %)" if len(whats) > 1 else t.text(w)
            for w, ns in whats[:3]
        )
        causes.append(
            IdleCause(
                cause=kind,
                label=LABELS[kind],
                total_ns=t.ns,
                gaps=t.gaps,
                ms_per_step=t.ns / per / 1e6,
                share_of_idle_pct=pct(t.ns, idle_ns),
                evidence=f"{t.gaps} interval{'s' if t.gaps != 1 else ''}: {ev}",
            )
        )
    causes.sort(key=lambda c: -c.total_ns)
    return IdleCauses(
        steps=steps,
        idle_ns=idle_ns,
        examined_ns=examined,
        examined_gaps=int(pick.size),
        min_gap_ns=MIN_GAP_NS,
        causes=causes,
    )


def explain_short_gaps(causes: IdleCauses, idle: IdleBreakdown) -> None:
    """The short gaps' evidence from HTA's idle breakdown (host wait: launched after the previous
    work ended, i.e. launch-bound; kernel wait: back-to-back launch overhead), and the CPU
    samples' part (`_launch_path`) where the export had them."""
    for c in causes.causes:
        if c.cause == "short-gaps":
            sampled = c.evidence.split("; samples: ", 1)
            c.evidence = (
                f"{c.gaps:,} gaps shorter than the intervals examined; over all streams HTA"
                f" counts {idle.host_wait_pct:.0f} % of idle as host wait (launched late) and"
                f" {idle.kernel_wait_pct:.0f} % as kernel wait (launch overhead)"
            ) + (f"; samples: {sampled[1]}" if len(sampled) == 2 else "")


SAMPLE_WORDS = {
    cpu_samples.GROUPS.index("interpreter"): "the Python interpreter or libc",
    cpu_samples.GROUPS.index("launch"): "the framework's launch path",
    cpu_samples.GROUPS.index("other"): "native code (the application's or the framework's)",
}


@dataclass
class _GapSamples:
    """The main thread's CPU samples per examined interval and group, and the data-loading
    worker threads' samples per interval."""

    n: Any  # [intervals, groups]
    workers: Any  # [intervals]
    named: dict[tuple[int, int], list[str]]  # (interval, group) -> frames

    def frames(self, i: int, g: int) -> list[str]:
        return self.named.get((i, g), [])


def _gap_samples(
    tl: T.RankTimeline, a: Any, b: Any, main: tuple[int, int] | None
) -> _GapSamples | None:
    """The CPU samples inside the intervals [a, b) (nsys exports recorded with `--sample`);
    None without them."""
    if tl.source.kind != "nsys-sqlite" or main is None or a.size == 0:
        return None
    smp = cpu_samples.read(tl.source.path, a, b)
    if smp is None:
        return None
    order = np.argsort(a, kind="stable")
    k = order[np.maximum(np.searchsorted(a[order], smp.start, side="right") - 1, 0)]
    is_main = (smp.pid == main[0]) & (smp.tid == main[1])
    wanted = cpu_samples.workers(tl.threads)
    is_worker = np.zeros(smp.start.size, dtype=bool)
    if wanted:
        pairs = zip(smp.pid.tolist(), smp.tid.tolist(), strict=True)
        is_worker = np.fromiter((p in wanted for p in pairs), dtype=bool, count=smp.start.size)
    n = np.zeros((a.size, len(cpu_samples.GROUPS)), dtype=np.int64)
    np.add.at(n, (k[is_main], smp.group[is_main].astype(np.int64)), 1)
    named: dict[tuple[int, int], list[str]] = {}
    for j in np.flatnonzero(is_main).tolist():
        g = int(smp.group[j])
        f = smp.marks[j] or smp.leaf[j]
        if f:
            named.setdefault((int(k[j]), g), []).append(f)
    return _GapSamples(n, np.bincount(k[is_worker], minlength=a.size), named)


def _launch_path(
    tl: T.RankTimeline, rows: T.GpuTable, a: Any, b: Any, main: tuple[int, int] | None
) -> str:
    """'; samples: ...' on the main thread's samples outside the examined intervals (inside the
    GPU span) that were in the framework's launch path, or '' without samples."""
    if tl.source.kind != "nsys-sqlite" or main is None or rows.size == 0:
        return ""
    lo, hi = int(rows.start[0]), int(rows.end.max())
    o = np.argsort(a, kind="stable")
    starts = np.r_[lo, b[o]].astype(np.int64)
    ends = np.r_[a[o], hi].astype(np.int64)
    keep = ends > starts
    smp = cpu_samples.read(tl.source.path, starts[keep], ends[keep], thread=main, even=True)
    if smp is None or smp.start.size < MIN_SAMPLES:
        return ""
    launch = smp.group == cpu_samples.GROUPS.index("launch")
    n, m = int(launch.sum()), int(smp.start.size)
    named = cpu_samples.top([smp.marks[j] for j in np.flatnonzero(launch).tolist()])
    frames = " (" + ", ".join(f"`{f}`" for f in named) + ")" if named else ""
    bound = "launch-bound: " if n >= COVER * m else ""
    return (
        f"; samples: {bound}{n} of {m} main-thread samples outside the intervals examined"
        f" were in the framework's launch path{frames}"
    )


def sync_while_idle(tl: T.RankTimeline, gap_starts: Any, gap_ends: Any) -> int:
    """Host time in CUDA synchronisation calls (any thread) while the GPU was idle: the part of
    sync time that costs GPU time (a sync that waits for a busy GPU costs the GPU nothing)."""
    h = tl.host
    if h.size == 0 or gap_starts.size == 0:
        return 0
    m = (h.kind == T.CUDA_API) & tl.name_mask(host.SYNC_RE.match)[h.name]
    if not bool(m.any()):
        return 0
    order = np.argsort(h.start[m], kind="stable")
    s, e = merge_intervals(h.start[m][order], h.end[m][order])
    lens = gap_ends - gap_starts
    before = np.r_[0, np.cumsum(lens)]  # idle time before each gap

    def idle_until(x: Any) -> Any:
        k = np.searchsorted(gap_starts, x, side="right") - 1
        kk = np.maximum(k, 0)
        part = np.clip(x - gap_starts[kk], 0, lens[kk])
        return np.where(k >= 0, before[kk] + part, 0)

    return int((idle_until(e) - idle_until(s)).sum())


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"
