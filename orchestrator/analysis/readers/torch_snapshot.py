"""Reader of PyTorch's memory snapshot (the pickle `torch.cuda.memory._dump_snapshot` writes, or
gh-run's hook: `profile.memory`) → one `timeline.memory.MemoryTimeline` per device with events.

The file is read as plain data (`safe_pickle`: no code runs), then walked at fixed depth, every
value checked for its type; anything else is refused in one sentence naming what. What is read:
- `device_traces[d]`: the allocator's events on device d, oldest first (`action`, `addr`,
  `size`, `time_us`: Unix microseconds; `frames`: the Python stack, innermost first, when
  stacks were recorded; an `oom` event's `device_free`); actions newer than those known are
  counted and left out (noted);
- `segments`: what the allocator held when the snapshot was taken: each segment's size, its
  blocks (active ones: still allocated, with their stacks; inactive ones: free in the cache);
- `gh_run` (gh-run's hook, memory_hook.py): the step marks (first module call, backward begin
  and end, each optimizer's step), the rank, the devices' capacity and memory fraction, what
  the out-of-memory observer was told;
- `external_annotations` (PyTorch >= 2.6 records its own `Optimizer.step#...` and
  `ProfilerStep#N` ranges): step marks for a snapshot taken by hand;
- `allocator_settings`: `expandable_segments`, `PYTORCH_CUDA_ALLOC_CONF`.

Limits: `MAX_EVENTS` events in all, the first `MAX_FRAMES` frames of a stack (stacks are shared
objects in the pickle: each distinct one is read once), `MAX_MARKS` marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.analysis.readers import safe_pickle
from orchestrator.analysis.timeline import memory as M
from orchestrator.core.errors import UserError

MAX_EVENTS = 50_000_000
MAX_FRAMES = 128
MAX_MARKS = 10_000_000
MAX_SEGMENTS = 10_000_000
SOURCE = "torch snapshot"


class _Bad(Exception):
    """A value of the wrong type or shape; the message says which."""


def read(path: Path, max_bytes: int | None = None) -> list[M.MemoryTimeline]:
    """The memory timelines of a snapshot file (refused in one sentence when it is none)."""
    data = safe_pickle.load(path, max_bytes)
    try:
        with safe_pickle.no_gc():  # a million tuples and lists built from a million dicts
            return from_data(data)
    except _Bad as exc:
        raise UserError(f"{path}: refused as a memory snapshot: {exc}") from None


def is_snapshot(data: Any) -> bool:
    return isinstance(data, dict) and ("device_traces" in data or "segments" in data)


def from_data(data: Any) -> list[M.MemoryTimeline]:
    """The timelines of a loaded snapshot (`_Bad` names what is wrong)."""
    if not is_snapshot(data):
        raise _Bad("no `segments` or `device_traces` in it (not a PyTorch memory snapshot)")
    traces = _list(data.get("device_traces", []), "device_traces")
    segments = _list(data.get("segments", []), "segments")
    if len(segments) > MAX_SEGMENTS:
        raise _Bad(f"{len(segments)} segments, more than {MAX_SEGMENTS} any device holds")
    total = sum(len(_list(t, "a device trace")) for t in traces)
    if total > MAX_EVENTS:
        raise _Bad(f"{total} events, more than the {MAX_EVENTS} gh-run reads")
    hook = data.get("gh_run")
    hook = hook if isinstance(hook, dict) else None
    stacks = _Stacks()
    by_device = _segments(segments, stacks)
    devices = sorted(set(range(len(traces))) | set(by_device))
    marks, marks_source = _marks(data, hook)
    settings = data.get("allocator_settings")
    expandable = settings.get("expandable_segments") if isinstance(settings, dict) else None
    conf = settings.get("PYTORCH_CUDA_ALLOC_CONF") if isinstance(settings, dict) else None
    out = []
    for d in devices:
        trace = traces[d] if d < len(traces) else []
        ev, oom, unknown = _events(trace, stacks, d)
        blocks, segs = by_device.get(d, ([], []))
        if ev.size_n == 0 and not blocks:
            continue
        tl = M.MemoryTimeline(
            source=SOURCE,
            level="allocator",
            device=d,
            events=ev,
            stacks=stacks.table,
            end_blocks=blocks,
            end_segments=segs,
            marks=marks,
            marks_source=marks_source,
            oom=oom,
            expandable_segments=expandable if isinstance(expandable, bool) else None,
            alloc_conf=conf if isinstance(conf, str) and conf else None,
        )
        if unknown:
            tl.notes.append(
                "left out events of actions gh-run does not know: "
                + ", ".join(f"{n} {a!r}" for a, n in sorted(unknown.items()))
            )
        if ev.size_n and not bool((ev.t_ns >= 0).all()):
            tl.notes.append("events without time_us: times are the events' order")
            ev.t_ns = np.arange(ev.size_n, dtype=np.int64)
            tl.marks = []
        _apply_hook(tl, hook, d)
        out.append(tl)
    return out


def _list(v: Any, what: str) -> list[Any]:
    if not isinstance(v, list):
        raise _Bad(f"`{what}` is a {type(v).__name__}, not a list")
    return v


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise _Bad(f"{what} is a {type(v).__name__}, not an integer")
    return v


class _Stacks:
    """Each distinct stack once. The pickle shares each frame (one dict per file, line and
    function), so a stack is known by its frames' identities: one tuple of ids per event, in C;
    only the distinct ones are read. Everything read lives in the loaded snapshot while this
    works, so the ids stay theirs."""

    def __init__(self) -> None:
        self.table: list[tuple[M.Frame, ...]] = []
        self._frames: dict[int, M.Frame] = {}
        self._by_ids: dict[tuple[int, ...], int] = {(): -1}
        self._by_value: dict[tuple[M.Frame, ...], int] = {}

    def indices(self, frames: list[Any]) -> list[int]:
        """The stack index of each event's frames (None or []: -1)."""
        kinds = set(map(type, frames))
        if not kinds <= {list, type(None)}:
            bad = next(k for k in kinds if k not in (list, type(None)))
            raise _Bad(f"an event's frames are a {bad.__name__}, not a list")
        # each distinct list once (events of one allocation share theirs), then each
        # distinct stack once
        lists = list(map(id, frames))
        distinct = dict(zip(lists, frames, strict=True))
        # a stack is known by its frames' identities (all of them: cost follows the file's size)
        keys = [tuple(map(id, f)) if f else () for f in distinct.values()]
        known = self._by_ids
        for key, f in dict(zip(keys, distinct.values(), strict=True)).items():
            if key not in known:
                known[key] = self._stack(f)
        code = dict(zip(distinct, map(known.__getitem__, keys), strict=True))
        return list(map(code.__getitem__, lists))

    def index(self, frames: Any) -> int:
        if frames is None:
            return -1
        if not isinstance(frames, list):
            raise _Bad(f"a block's frames are a {type(frames).__name__}, not a list")
        return self.indices([frames])[0]

    def _stack(self, frames: list[Any]) -> int:
        got = []
        for f in frames[:MAX_FRAMES]:
            fr = self._frames.get(id(f))
            if fr is None:
                fr = self._frames[id(f)] = _frame(f)
            got.append(fr)
        stack = tuple(got)
        i = self._by_value.get(stack)
        if i is None:
            i = self._by_value[stack] = len(self.table)
            self.table.append(stack)
        return i


def _frame(f: Any) -> M.Frame:
    if not isinstance(f, dict):
        raise _Bad(f"a frame is a {type(f).__name__}, not a dict")
    name, filename, line = f.get("name"), f.get("filename"), f.get("line")
    if not isinstance(name, str) or not isinstance(filename, str):
        raise _Bad("a frame has no text `name` or `filename`")
    if type(line) is not int:
        raise _Bad(f"a frame's line is a {type(line).__name__}, not an integer")
    return M.Frame(filename, name, line)


def _events(
    trace: Any, stacks: _Stacks, device: int
) -> tuple[M.MemoryEvents, M.OomInfo | None, dict[str, int]]:
    """The columns of one device's events, a column at a time (each a pass in C: list
    comprehensions, `map`, `set` of the types; a million events in about as long as pickle
    takes to build them), every value's type checked."""
    if not trace:
        return M.MemoryEvents.empty(), None, {}
    if set(map(type, trace)) != {dict}:
        raise _Bad(f"an event of device {device} is not a dict")
    acts = [e.get("action") for e in trace]
    try:
        codes = list(map(M.ACTIONS.get, acts))
    except TypeError:  # an unhashable action
        raise _Bad(f"an event of device {device} has no text `action`") from None
    unknown: dict[str, int] = {}
    if None in codes:
        keep = [c is not None for c in codes]
        for a, c in zip(acts, codes, strict=True):
            if c is None:
                if not isinstance(a, str):
                    raise _Bad(f"an event of device {device} has no text `action`")
                unknown[a] = unknown.get(a, 0) + 1
        trace = [e for e, k in zip(trace, keep, strict=True) if k]
        codes = [c for c in codes if c is not None]
        if not trace:
            return M.MemoryEvents.empty(), None, unknown
    act = np.array(codes, dtype=np.int8)
    sizes = [e.get("size") for e in trace]
    times = [e.get("time_us", -1) for e in trace]
    addrs = [e.get("addr", -1) for e in trace]
    frames = [e.get("frames") for e in trace]
    for col, what in ((sizes, "size"), (times, "time_us"), (addrs, "addr")):
        if set(map(type, col)) != {int}:
            bad = next(v for v in col if type(v) is not int)
            raise _Bad(f"an event's {what} is a {type(bad).__name__}, not an integer")
    size = np.array(sizes, dtype=np.int64)
    if bool((size < 0).any()):
        raise _Bad("an event's size is negative")
    t = np.array(times, dtype=np.int64)
    t = np.where(t >= 0, t * 1000, -1)
    addr = np.array(addrs, dtype=np.int64)
    stack = np.array(stacks.indices(frames), dtype=np.int32)
    oom = None
    at = np.flatnonzero(act == M.OOM)
    if at.size:
        e = trace[int(at[-1])]
        free = e.get("device_free")
        tu = int(t[at[-1]])
        oom = M.OomInfo(
            t_ns=tu if tu >= 0 else int(at[-1]),
            requested=int(size[at[-1]]),
            device_free=free if type(free) is int else None,
            source="the allocator's oom event",
        )
        addr[at] = -1
    ev = M.MemoryEvents(t, act, addr, size, stack)
    if not bool((np.diff(t) >= 0).all()) and bool((t >= 0).all()):
        order = np.argsort(t, kind="stable")
        ev = M.MemoryEvents(*(c[order] for c in (ev.t_ns, ev.action, ev.addr, ev.size, ev.stack)))
    return ev, oom, unknown


def _segments(
    segments: list[Any], stacks: _Stacks
) -> dict[int, tuple[list[M.LiveBlock], list[M.Segment]]]:
    """Per device: the blocks still allocated, and each segment with its free blocks."""
    out: dict[int, tuple[list[M.LiveBlock], list[M.Segment]]] = {}
    for s in segments:
        if type(s) is not dict:
            raise _Bad(f"a segment is a {type(s).__name__}, not a dict")
        d = s.get("device", 0)
        d = _int(d, "a segment's device")
        total = _int(s.get("total_size"), "a segment's total_size")
        live, segs = out.setdefault(d, ([], []))
        seg = M.Segment(size=total, expandable=s.get("is_expandable") is True)
        for b in _list(s.get("blocks", []), "a segment's blocks"):
            if type(b) is not dict:
                raise _Bad(f"a block is a {type(b).__name__}, not a dict")
            size = _int(b.get("size"), "a block's size")
            state = b.get("state")
            if state == "active_allocated":
                addr = _int(b.get("address"), "a block's address")
                live.append(M.LiveBlock(addr, size, stacks.index(b.get("frames"))))
            elif state == "inactive":
                seg.free_blocks.append(size)
        segs.append(seg)
    return out


# external_annotations: PyTorch's own ranges in the snapshot (no hook needed)
_EXTERNAL = (("Optimizer.step#", M.OPT_BEGIN, M.OPT_END), ("ProfilerStep#", M.STEP_START, None))


def _marks(
    data: dict[str, Any], hook: dict[str, Any] | None
) -> tuple[list[tuple[int, int]], str | None]:
    """The step marks: the hook's, else PyTorch's own annotations."""
    marks: list[tuple[int, int]] = []
    if hook is not None and isinstance(hook.get("marks"), list):
        raw = hook["marks"]
        if len(raw) > MAX_MARKS:
            raise _Bad(f"{len(raw)} marks, more than {MAX_MARKS}")
        for m in raw:
            if not isinstance(m, list | tuple) or len(m) != 3:
                raise _Bad("a mark is not [time_us, kind, value]")
            t, kind, value = m
            t = _int(t, "a mark's time")
            kind_code = M.MARK_NAMES.get(kind) if isinstance(kind, str) else None
            if kind_code is None:
                continue
            marks.append((t * 1000, kind_code))
            if kind_code == M.OPT_END and value == 0:
                marks.append((t * 1000, M.STEP_END))
        if marks:
            marks.sort()
            return marks, "gh-run's hook (first module call, backward, optimizer step)"
    ext = data.get("external_annotations")
    if isinstance(ext, list):
        for a in ext[:MAX_MARKS]:
            if not isinstance(a, dict):
                continue
            name, stage, t = a.get("name"), a.get("stage"), a.get("time_us")
            if not isinstance(name, str) or type(t) is not int:
                continue
            for prefix, start, end in _EXTERNAL:
                if name.startswith(prefix):
                    if stage == "START":
                        marks.append((t * 1000, start))
                    elif stage == "END" and end is not None:
                        marks.append((t * 1000, end))
                        if end == M.OPT_END:
                            marks.append((t * 1000, M.STEP_END))
        if marks:
            marks.sort()
            return marks, "PyTorch's annotations in the snapshot (Optimizer.step, ProfilerStep)"
    return [], None


def _apply_hook(tl: M.MemoryTimeline, hook: dict[str, Any] | None, device: int) -> None:
    """What the hook wrote about the process and its devices."""
    if hook is None:
        return
    mode, events = hook.get("mode"), hook.get("max_events")
    tl.mode = mode if mode in ("timeline", "snapshot") else None
    tl.max_events = events if type(events) is int else None
    rank = hook.get("rank")
    tl.rank = rank if type(rank) is int and rank >= 0 else None
    devices = hook.get("devices")
    if isinstance(devices, list):
        for dev in devices:
            if isinstance(dev, dict) and dev.get("index") == device:
                total, fraction = dev.get("total_memory"), dev.get("memory_fraction")
                if type(total) is int and total > 0:
                    tl.total_memory = total
                    if isinstance(fraction, float | int) and 0 < fraction < 1:
                        tl.limit = int(total * fraction)
    oom = hook.get("oom")
    if isinstance(oom, dict) and oom.get("device") == device:
        req, free, t = oom.get("requested_bytes"), oom.get("device_free_bytes"), oom.get("time_us")
        if type(req) is int and type(t) is int:
            if tl.oom is None:
                tl.oom = M.OomInfo(t_ns=t * 1000, requested=req, source="gh-run's hook")
            if tl.oom.device_free is None and type(free) is int:
                tl.oom.device_free = free
            tl.oom.source = "gh-run's out-of-memory observer"
    if tl.oom is not None:
        tl.oom.total = tl.total_memory
        tl.oom.limit = tl.limit or tl.total_memory
    part = hook.get("partition_gpu_bytes")
    tl.partition_memory = part if type(part) is int and part > 0 else None
    conf = hook.get("alloc_conf")
    if isinstance(conf, str) and conf and tl.alloc_conf is None:
        tl.alloc_conf = conf
