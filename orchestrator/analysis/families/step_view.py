"""One representative step of an entry, read as the seed reads a timeline: the GPU streams
(kernels per stream, copies by direction, memsets), the NVTX ranges, the main thread's blocking
waits and the busiest CPU threads, as a bounded `StepView` the report draws.

Metrics are computed in worker processes and the timelines stay there, so what travels is a
small model: at most `MAX_STREAMS` kernel rows and `MAX_THREADS` thread rows, per row at most
`MAX_EVENTS_PER_ROW` events and `MAX_EVENTS` in all, neighbours closer than a picture's pixel
(`RESOLUTION` of the window) merged into one when one of them is that small (a merged event
keeps the longest one's name, the count and the summed time).

The window: the training step (of the family `host.steps` picks) whose duration is the
median of its family; without steps the span (first to last GPU activity); without GPU activity
the extent of the host rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.families import host
from orchestrator.analysis.families.host import is_blocking_wait
from orchestrator.analysis.metrics import StepView, ViewEvent, ViewRow
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.step_names import step_family

MAX_STREAMS = 8
MAX_THREADS = 3
NVTX_LEVELS = 3
MAX_EVENTS_PER_ROW = 300
MAX_EVENTS = 1500  # per view, shared by its rows: 64 ranks' views stay a few MB of JSON
RESOLUTION = 800  # the window in this many slots: neighbours closer than one slot merge
PRE_BIN = 4 * RESOLUTION  # a row with more events is binned per slot with numpy first
NAME_CHARS = 300


RULE_WORDS = {
    "optimizer": "the optimizer rule (optimizer kernels close each step)",
    "period": "the period rule (the kernel sequence repeats)",
    "profiler-window": "the profiler-window rule (the run's cudaProfilerApi window)",
}


def window(
    tl: T.RankTimeline,
    step_rows: list[tuple[str, int, int]],
    span: tuple[int, int],
    rule: str = "ranges",
) -> tuple[int, int, str] | None:
    """(start, end, what) of the view: the median step, else the span, else the host's extent.
    `rule`: the `step_rules` rule that found the steps (only "ranges" are step ranges)."""
    fams: dict[str, list[tuple[int, int, str]]] = {}
    for name, start, dur in step_rows:
        fam = step_family(name)
        if fam is not None and dur > 0:
            fams.setdefault(fam, []).append((dur, start, name))
    if fams:
        fam, items = max(fams.items(), key=lambda kv: (len(kv[1]), sum(d for d, _, _ in kv[1])))
        items.sort()
        dur, start, name = items[(len(items) - 1) // 2]
        if rule in ("ranges", "none"):
            return start, start + dur, f"{name}, the median of {len(items)} step ranges"
        by = RULE_WORDS.get(rule, f"the {rule} rule")
        return start, start + dur, f"{name}, the median of {len(items)} steps found by {by}"
    lo, hi = span
    if hi > lo:
        return lo, hi, "the whole span (first to last GPU activity; no step ranges)"
    h = tl.host
    if h.size:
        lo, hi = int(h.start.min()), int(h.end.max())
        if hi > lo:
            return lo, hi, "the whole trace (no GPU activity, no step ranges)"
    return None


def _clip(s: Any, e: Any, lo: int, hi: int) -> tuple[Any, Any]:
    return np.maximum(s, lo) - lo, np.minimum(e, hi) - lo


def _top_level(s: Any, e: Any) -> Any:
    """Mask of the rows not inside an earlier one (rows sorted by start): nested CPU operators
    and calls would draw over their parent."""
    keep = np.ones(s.size, dtype=bool)
    if s.size > 1:
        reach = np.maximum.accumulate(e)
        keep[1:] = s[1:] >= reach[:-1]
    return keep


def merge_events(
    s: Any, e: Any, names: Any, table: list[str], width: int, cap: int = MAX_EVENTS_PER_ROW
) -> list[ViewEvent]:
    """Events (sorted by start, times from the window's start) as at most `cap` ViewEvents:
    neighbours closer than width / RESOLUTION merge where one of them is that small too."""
    n = int(s.size)
    if n == 0:
        return []
    res = max(1, width // RESOLUTION)
    dur = e - s
    items: list[tuple[int, int, int, int, int, int]]
    if n > PRE_BIN:  # a whole-span view may hold millions of events
        b = np.minimum(s // res, RESOLUTION)
        idx = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        counts = np.diff(np.r_[idx, n])
        # each bin keeps the name of its longest event
        pick = np.array(
            [int(i + np.argmax(dur[i : i + c])) for i, c in zip(idx, counts, strict=True)],
            dtype=np.int64,
        )
        items = list(
            zip(
                s[idx].tolist(),
                np.maximum.reduceat(e, idx).tolist(),
                names[pick].tolist(),
                counts.tolist(),
                np.add.reduceat(dur, idx).tolist(),
                dur[pick].tolist(),
                strict=True,
            )
        )
    else:
        d = dur.tolist()
        items = list(zip(s.tolist(), e.tolist(), names.tolist(), [1] * n, d, d, strict=True))
    while True:
        out: list[list[int]] = []  # start, end, name id, count, busy, longest
        for a, z, nm, c, busy, longest in items:
            if out:
                cur = out[-1]
                small = z - a < res or cur[1] - cur[0] < res
                if a - cur[1] < res and small:
                    if longest > cur[5]:
                        cur[2], cur[5] = nm, longest
                    cur[1] = max(cur[1], z)
                    cur[3] += c
                    cur[4] += busy
                    continue
            out.append([a, z, nm, c, busy, longest])
        if len(out) <= cap:
            break
        res *= 2
        items = [(x[0], x[1], x[2], x[3], x[4], x[5]) for x in out]
    return [
        ViewEvent(start_ns=a, end_ns=z, name=table[nm][:NAME_CHARS], count=c, busy_ns=busy)
        for a, z, nm, c, busy, _ in out
    ]


@dataclass
class _Spec:
    """A row before its events are merged (the cap depends on how many rows there are)."""

    kind: str
    label: str
    s: Any
    e: Any
    names: Any


def _row(kind: str, label: str, s: Any, e: Any, names: Any, lo: int, hi: int) -> _Spec:
    order = np.argsort(s, kind="stable")
    cs, ce = _clip(s[order], e[order], lo, hi)
    return _Spec(kind, label, cs, ce, names[order])


def _finish(spec: _Spec, table: list[str], width: int, cap: int) -> ViewRow:
    return ViewRow(
        kind=spec.kind,
        label=spec.label,
        events=merge_events(spec.s, spec.e, spec.names, table, width, cap),
        source_events=int(spec.s.size),
        busy_ns=int((spec.e - spec.s).sum()),
    )


def _gpu_rows(g: T.GpuTable, lo: int, hi: int) -> tuple[list[_Spec], list[str]]:
    inside = (g.start < hi) & (g.end > lo) & T.is_activity(g.kind)
    if not bool(inside.any()):
        return [], []
    g = g.take(inside)
    out: list[_Spec] = []
    left: list[str] = []
    several = np.unique(g.device).size > 1
    kern = g.kind == T.KERNEL
    streams: list[tuple[int, int, int]] = []  # busy, device, stream
    if bool(kern.any()):
        dev, stream = g.device.astype(np.int64), g.stream.astype(np.int64)
        i32 = np.iinfo(np.int32)
        if all(int(c.min()) >= i32.min and int(c.max()) <= i32.max for c in (dev, stream)):
            # one int64 key per (device, stream): np.unique over rows of a 2-D array sorts slowly
            key = (dev << 32) | (stream & 0xFFFFFFFF)
            pairs = [(k >> 32, int(np.int32(np.uint32(k & 0xFFFFFFFF))))
                     for k in np.unique(key[kern]).tolist()]  # fmt: skip
        else:  # ids beyond 32 bits: never folded into a key
            pairs = [tuple(r) for r in np.unique(np.stack([dev[kern], stream[kern]], 1), axis=0)]
        for d, st in pairs:
            m = kern & (dev == d) & (stream == st)
            busy = int((np.minimum(g.end[m], hi) - np.maximum(g.start[m], lo)).sum())
            streams.append((busy, int(d), int(st)))
        streams.sort(key=lambda x: (-x[0], x[1], x[2]))
    for _, d, st in streams[:MAX_STREAMS]:
        m = kern & (g.device == d) & (g.stream == st)
        label = f"GPU {d} stream {st}" if several else f"stream {st}"
        out.append(_row("kernels", label, g.start[m], g.end[m], g.name[m], lo, hi))
    if len(streams) > MAX_STREAMS:
        left.append(f"{len(streams) - MAX_STREAMS} more streams with kernels")
    cp = g.kind == T.MEMCPY
    for code in sorted({int(c) for c in np.unique(g.copy[cp])}):
        m = cp & (g.copy == code)
        label = f"copies {T.copy_name(code)}"
        out.append(_row("copies", label, g.start[m], g.end[m], g.name[m], lo, hi))
    ms = g.kind == T.MEMSET
    if bool(ms.any()):
        out.append(_row("memsets", "memsets", g.start[ms], g.end[ms], g.name[ms], lo, hi))
    return out, left


def _nvtx_rows(tl: T.RankTimeline, lo: int, hi: int) -> list[_Spec]:
    h = tl.host
    m = (h.kind == T.ANNOTATION) & (h.start < hi) & (h.end > lo) & (h.end >= h.start)
    if not bool(m.any()):
        return []
    s, e, nm = h.start[m], h.end[m], h.name[m]
    order = np.lexsort((-e, s))
    s, e, nm = s[order], e[order], nm[order]
    depth = np.zeros(s.size, dtype=np.int64)
    open_ends: list[int] = []
    for i, (a, z) in enumerate(zip(s.tolist(), e.tolist(), strict=True)):
        while open_ends and open_ends[-1] <= a:
            open_ends.pop()
        depth[i] = len(open_ends)
        open_ends.append(z)
    rows = []
    for lvl in range(min(NVTX_LEVELS, int(depth.max()) + 1)):
        sel = depth == lvl
        label = "NVTX" if lvl == 0 else f"NVTX level {lvl + 1}"
        rows.append(_row("nvtx", label, s[sel], e[sel], nm[sel], lo, hi))
    return rows


def _thread_label(tl: T.RankTimeline, key: tuple[int, int]) -> str:
    return tl.threads.get(key) or f"thread {key[1]}"


def _host_rows(
    tl: T.RankTimeline, main: tuple[int, int] | None, lo: int, hi: int
) -> tuple[list[_Spec], list[str]]:
    h = tl.host
    inside = (h.start < hi) & (h.end > lo) & (h.end >= h.start)
    out: list[_Spec] = []
    left: list[str] = []
    if main is not None:
        mine = inside & (h.pid == main[0]) & (h.tid == main[1])
        blocking = tl.name_mask(is_blocking_wait, h.name[h.kind == T.OSRT])
        syncs = tl.name_mask(host.SYNC_RE.match, h.name[h.kind == T.CUDA_API])
        m = mine & (
            ((h.kind == T.OSRT) & blocking[h.name]) | ((h.kind == T.CUDA_API) & syncs[h.name])
        )
        if bool(m.any()):
            label = "main thread: blocking waits"
            out.append(_row("waits", label, h.start[m], h.end[m], h.name[m], lo, hi))
    work = inside & np.isin(h.kind, (T.CPU_OP, T.OSRT))
    if not bool(work.any()):
        left.append("CPU threads: no OS-runtime call or CPU operator in this window")
        return out, left
    keys, inv = host.thread_groups(h.pid[work], h.tid[work])
    s_all, e_all, n_all = h.start[work], h.end[work], h.name[work]
    ranked = []
    for j, key in enumerate(keys):
        sel = inv == j
        order = np.argsort(s_all[sel], kind="stable")
        s, e, nm = s_all[sel][order], e_all[sel][order], n_all[sel][order]
        top = _top_level(s, e)
        cs, ce = _clip(s[top], e[top], lo, hi)
        ranked.append((int((ce - cs).sum()), key, s[top], e[top], nm[top]))
    ranked.sort(key=lambda x: (-x[0], x[1]))
    for busy, key, s, e, nm in ranked[:MAX_THREADS]:
        if busy > 0:
            label = _thread_label(tl, key) + (" (main)" if key == main else "")
            out.append(_row("thread", label, s, e, nm, lo, hi))
    if len(ranked) > MAX_THREADS:
        left.append(f"{len(ranked) - MAX_THREADS} less busy CPU threads")
    return out, left


def extract(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    step_rows: list[tuple[str, int, int]],
    span: tuple[int, int],
    main: tuple[int, int] | None,
    rule: str = "ranges",
) -> StepView | None:
    """The step view of one entry: its GPU rows, the host side of its rank (`rule`: which
    `step_rules` rule found the steps)."""
    w = window(tl, step_rows, span, rule)
    if w is None:
        return None
    lo, hi, what = w
    gpu, gpu_left = _gpu_rows(rows, lo, hi)
    hosts, host_left = _host_rows(tl, main, lo, hi)
    specs = [*gpu, *_nvtx_rows(tl, lo, hi), *hosts]
    cap = min(MAX_EVENTS_PER_ROW, max(50, MAX_EVENTS // max(1, len(specs))))
    return StepView(
        window=what,
        start_ns=lo,
        end_ns=hi,
        rows=[_finish(x, tl.names, hi - lo, cap) for x in specs],
        left_out=[*gpu_left, *host_left],
    )


def open_with(path: str, kind: str) -> str:
    """How to open the whole timeline of an input in a viewer."""
    p = Path(path)
    if kind == "nsys-sqlite":
        rep = p.with_name(p.name.removesuffix(".sqlite") + ".nsys-rep")
        if rep.is_file():
            return f"nsys-ui {rep} (Nsight Systems GUI)"
        return (
            "nsys-ui on the .nsys-rep this export was made from (Nsight Systems GUI; the SQLite"
            " export itself does not open there)"
        )
    return f"open {p} in Perfetto (ui.perfetto.dev) or chrome://tracing"
