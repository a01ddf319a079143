"""Reader of PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzipped, one file per rank.

What is read (trace event format, `ph: "X"` complete events, `ts`/`dur` in microseconds):
- GPU activity: `cat` `kernel`, `gpu_memcpy`, `gpu_memset` (device = `args.device`, else `pid`);
- copies: direction from the `gpu_memcpy` name (`Memcpy HtoD (Pageable -> Device)`), bytes from
  `args.bytes`;
- ranges (NVTX equivalent): `user_annotation` (CPU) and `gpu_user_annotation` (GPU); the data
  wait is the union of the CPU-side data ranges inside the span (`core.is_data_wait`);
- activation offloading: most DtoH bytes launched inside `forward` ranges and most HtoD bytes
  inside `backward` ranges (`_offload_pattern`);
- CPU threads: `cpu_op` intervals per (pid, tid) (union, so nesting counts once), thread names
  from `thread_name` metadata events; CUDA sync calls from `cuda_runtime`/`cuda_driver` events;
- peak memory: `[memory]` instant events, max `Total Allocated` where `Device Type` is 1 (CUDA);
- rank: `distributedInfo.rank`, else the file-name rule of `core.rank_from_name`.

`temporal` follows HTA exactly: every complete event whose `args.stream` is an integer is a GPU
event; when the trace has at least two `ProfilerStep` names, GPU events with a correlation id are
kept only if the CPU event with that correlation started before the last `ProfilerStep`, other
GPU events only if they start before it; fractional-microsecond timestamps are rounded the way
HTA does (start up, end down) before the union.

Parsing. A trace becomes one `KinetoTrace`: numpy columns of the complete events (category code,
interned name id, pid, tid, ts, dur, stream, correlation, device, bytes) and nothing per event in
Python. Two parsers fill it:
- `scan`: the layout libkineto writes (one event per `{ ... }` block, fixed key order, see
  `_X_EVENT`) read with one regex pass over the bytes; only the `args` of GPU and CUDA-runtime
  events are looked at. It checks itself: the number of complete events it matched, of `stream`
  and `correlation` arguments it read, and of `thread_name` records must equal the number of
  those keys in the text, else it gives up (returns None);
- `from_json`: the generic path (orjson into Python objects, one loop) for any other layout,
  e.g. traces rewritten by other tools or written by `json.dumps`.
Both give identical columns on the same trace (tests/unit/test_analysis_kineto.py checks it on
the real traces).
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import orjson

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
    Temporal,
    ThreadStat,
    UnifiedMemory,
)
from orchestrator.errors import UserError

_COPY_RE = re.compile(r"(?i)memcpy\s+(HtoD|DtoH|DtoD|HtoH|PtoP)")
_FORWARD_RE = re.compile(r"(?i)(?<![a-z])(?:forward|fwd)(?![a-z])")
_BACKWARD_RE = re.compile(r"(?i)(?<![a-z])(?:backward|bwd)(?![a-z])")
# activation offloading moves whole activation tensors (MiBs each step); a scalar read back by
# `.item()` inside forward is bytes: below this the pattern is not evidence of offloading
OFFLOAD_MIN_BYTES = 1 << 20
_SYNC_RE = re.compile(r"(?i)^cu(da)?\w*(Synchronize|StreamWaitEvent)")
TOP_KERNELS = 25
TOP_RANGES = 50

# category codes of the `cat` column
OTHER, KERNEL, MEMCPY, MEMSET, USER_ANN, GPU_USER_ANN, CPU_OP, CUDA_RT, CUDA_DRV, TRACE = range(10)
CATS = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "user_annotation": USER_ANN,
    "gpu_user_annotation": GPU_USER_ANN,
    "cpu_op": CPU_OP,
    "cuda_runtime": CUDA_RT,
    "cuda_driver": CUDA_DRV,
    "Trace": TRACE,
}
_CATS_B = {k.encode(): v for k, v in CATS.items()}
GPU_CODES = (KERNEL, MEMCPY, MEMSET)
_ARG_CODES = (KERNEL, MEMCPY, MEMSET, CUDA_RT, CUDA_DRV)  # events whose args are read
_ARG_KEYS = ("stream", "correlation", "device", "bytes")
NONE = -1  # "absent" in the integer columns


@dataclass
class KinetoTrace:
    """Columns of a trace's complete (`X`) events plus what else the reader needs."""

    meta: dict[str, Any]
    names: list[str]
    cat: Any  # int8 category codes
    name: Any  # int32 ids into names
    pid: Any  # int64, NONE when not an integer
    tid: Any
    ts: Any  # float64 microseconds
    dur: Any
    stream: Any  # int64, NONE when absent
    corr: Any
    device: Any
    nbytes: Any  # int64, 0 when absent
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    peak: int | None = None
    parser: str = ""

    def columns(self) -> dict[str, list[Any]]:
        """The columns as lists (names resolved) without `Trace` span events (which no metric
        uses and the layout scan skips), for comparing parsers."""
        keep = self.cat != TRACE
        out: dict[str, list[Any]] = {
            k: getattr(self, k)[keep].tolist()
            for k in ("cat", "pid", "tid", "ts", "dur", "stream", "corr", "device", "nbytes")
        }
        out["name"] = [self.names[i] for i in self.name[keep].tolist()]
        return out


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise UserError(
            f"{path}: not a readable PyTorch-profiler trace ({exc}); pass the .json or"
            " .json.gz written by torch.profiler"
        ) from exc
    return raw


def load_trace(path: Path) -> KinetoTrace:
    """Parse a Kineto JSON file (plain or .gz): the layout scan, else the generic path."""
    raw = _read(path)
    fast = scan(raw)
    if fast is not None:
        return fast
    try:
        data = orjson.loads(raw)
    except ValueError as exc:
        raise UserError(
            f"{path}: not a readable PyTorch-profiler trace ({exc}); pass the .json or"
            " .json.gz written by torch.profiler"
        ) from exc
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise UserError(f"{path}: no traceEvents list; pass a torch.profiler Chrome trace")
    return from_json(data)


def trace_rank(trace: KinetoTrace) -> int | None:
    info = trace.meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return None


# ---- the generic path
def from_json(data: dict[str, Any]) -> KinetoTrace:
    """Columns from a parsed trace document (any key order and spacing)."""
    cat: list[int] = []
    name: list[int] = []
    pid: list[int] = []
    tid: list[int] = []
    ts: list[float] = []
    dur: list[float] = []
    stream: list[int] = []
    corr: list[int] = []
    device: list[int] = []
    nbytes: list[int] = []
    ids: dict[str, int] = {}
    thread_names: dict[tuple[int, int], str] = {}
    peak: int | None = None
    for ev in data["traceEvents"]:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        a = ev.get("args")
        args: dict[str, Any] = a if isinstance(a, dict) else {}
        if ph == "M":
            if ev.get("name") == "thread_name" and "name" in args:
                key = (_nint(ev.get("pid")), _nint(ev.get("tid")))
                thread_names[key] = str(args["name"])
            continue
        if ph == "i" and ev.get("name") == "[memory]":
            peak = _memory_peak(args, peak)
            continue
        if ph != "X":
            continue
        t, d = ev.get("ts"), ev.get("dur")
        if not isinstance(t, int | float) or not isinstance(d, int | float):
            continue
        code = CATS.get(str(ev.get("cat", "")), OTHER)
        cat.append(code)
        nm = str(ev.get("name", ""))
        name.append(ids.setdefault(nm, len(ids)))
        pid.append(_nint(ev.get("pid")))
        tid.append(_nint(ev.get("tid")))
        ts.append(float(t))
        dur.append(float(d))
        stream.append(_nint(args.get("stream")))
        corr.append(_nint(args.get("correlation")))
        device.append(_nint(args.get("device")))
        nbytes.append(_int(args.get("bytes")) or 0)
    meta = {k: v for k, v in data.items() if k != "traceEvents"}
    return _columns(
        meta, list(ids), cat, name, pid, tid, ts, dur, stream, corr, device, nbytes, thread_names,
        peak, "orjson (generic)",
    )  # fmt: skip


def _nint(v: Any) -> int:
    i = _int(v) if not isinstance(v, bool) else None
    return NONE if i is None else i


def _memory_peak(args: dict[str, Any], peak: int | None) -> int | None:
    if _int(args.get("Device Type")) == 1 and (v := _int(args.get("Total Allocated"))) is not None:
        return v if peak is None or v > peak else peak
    return peak


def _columns(
    meta: dict[str, Any],
    names: list[str],
    cat: Any,
    name: Any,
    pid: Any,
    tid: Any,
    ts: Any,
    dur: Any,
    stream: Any,
    corr: Any,
    device: Any,
    nbytes: Any,
    thread_names: dict[tuple[int, int], str],
    peak: int | None,
    parser: str,
) -> KinetoTrace:
    i64 = np.int64
    return KinetoTrace(
        meta=meta,
        names=names,
        cat=np.asarray(cat, dtype=np.int8),
        name=np.asarray(name, dtype=np.int32),
        pid=np.asarray(pid, dtype=i64),
        tid=np.asarray(tid, dtype=i64),
        ts=np.asarray(ts, dtype=np.float64),
        dur=np.asarray(dur, dtype=np.float64),
        stream=np.asarray(stream, dtype=i64),
        corr=np.asarray(corr, dtype=i64),
        device=np.asarray(device, dtype=i64),
        nbytes=np.asarray(nbytes, dtype=i64),
        thread_names=thread_names,
        peak=peak,
        parser=parser,
    )


# ---- the layout scan
_X_EVENT = re.compile(
    rb'\{\n    "ph": "X", "cat": "(?:([^"]*)", "name": "([^"]*)", "pid": (-?\d+), "tid": (-?\d+),'
    rb'\n    "ts": ([-+0-9.eE]+), "dur": ([-+0-9.eE]+)(?:,\n    "args": \{([^}]*)\})?\n  \}'
    rb'|Trace", "ts")'
)  # the second branch: libkineto's `Trace` span events (other key order), never used
_ARG = re.compile(rb'"(stream|correlation|device|bytes)": (-?\d+)(?![\d.eE])')
_ARG_ONE = {
    k: re.compile(rb'"' + k.encode() + rb'": (-?\d+)(?![\d.eE])') for k in _ARG_KEYS
}  # fmt: skip
_THREAD = re.compile(rb'"name": "thread_name"')
_MEMORY = re.compile(rb'"name": "\[memory\]"')


def _str(b: bytes) -> str:
    return str(orjson.loads(b'"' + b + b'"')) if b"\\" in b else b.decode()


def _object_at(raw: bytes, pos: int, lo: int, hi: int) -> Any:
    """The event object (libkineto layout: `\n  {` ... `\n  }`) around position pos."""
    s = raw.rfind(b"\n  {", lo, pos)
    e = raw.find(b"\n  }", pos, hi)
    return orjson.loads(raw[s + 3 : e + 4])


def scan(raw: bytes) -> KinetoTrace | None:
    """Columns from the text libkineto writes, or None when the text has another layout."""
    head = raw.find(b'"traceEvents": [')
    end = raw.rfind(b"\n  ]")
    if head < 0 or end < head:
        return None
    lo = head + len(b'"traceEvents": [')
    try:
        meta = orjson.loads(raw[:head] + b'"traceEvents": []' + raw[end + 4 :])
        if not isinstance(meta, dict):
            return None
        meta.pop("traceEvents", None)
        rows = _X_EVENT.findall(raw, lo, end)
        if len(rows) != raw.count(b'"ph": "X"', lo, end):
            return None  # a complete event in another layout
        return _scan_rows(raw, lo, end, meta, [r for r in rows if r[4]])
    except (ValueError, IndexError):
        return None


def _args_columns(cat: Any, args_b: tuple[bytes, ...]) -> dict[str, Any] | None:
    """stream / correlation / device / bytes of the events whose args are read."""
    n = cat.size
    cols: dict[str, Any] = {
        "stream": np.full(n, NONE, dtype=np.int64),
        "correlation": np.full(n, NONE, dtype=np.int64),
        "device": np.full(n, NONE, dtype=np.int64),
        "bytes": np.zeros(n, dtype=np.int64),
    }
    for codes in (GPU_CODES, (CUDA_RT, CUDA_DRV)):
        idx = np.flatnonzero(np.isin(cat, codes))
        if idx.size == 0:
            continue
        joined = b"\n".join([args_b[i] for i in idx.tolist()])
        for key in _ARG_KEYS:
            vals = _ARG_ONE[key].findall(joined)
            if len(vals) == idx.size:  # one per event: aligned with idx
                cols[key][idx] = np.array(vals, dtype=np.bytes_).astype(np.int64)
            elif vals:  # some events lack the key: one event at a time
                for i in idx.tolist():
                    for k, v in _ARG.findall(args_b[i]):
                        if k.decode() == key:
                            cols[key][i] = int(v)
    # HTA counts any event with a stream; the correlation of any CPU event matters to it
    rest = b"\n".join([args_b[i] for i in np.flatnonzero(~np.isin(cat, _ARG_CODES)).tolist()])
    if b'"stream": ' in rest or b'"correlation": ' in rest:
        return None
    return cols


def _scan_rows(
    raw: bytes, lo: int, end: int, meta: dict[str, Any], rows: list[tuple[bytes, ...]]
) -> KinetoTrace | None:
    n = len(rows)
    if n:
        cats_b, names_b, pid_b, tid_b, ts_b, dur_b, args_b = zip(*rows, strict=True)
    else:
        cats_b = names_b = pid_b = tid_b = ts_b = dur_b = args_b = ()
    cat = np.array(list(map(_CATS_B.get, cats_b, repeat(OTHER))), dtype=np.int8)
    ids = {b: i for i, b in enumerate(dict.fromkeys(names_b))}
    name = np.array(list(map(ids.__getitem__, names_b)), dtype=np.int32)
    names = [_str(b) for b in ids]
    cols = _args_columns(cat, args_b)
    if cols is None:
        return None
    thread_names: dict[tuple[int, int], str] = {}
    for m in _THREAD.finditer(raw, lo, end):
        ev = _object_at(raw, m.start(), lo, end)
        args = ev.get("args")
        if ev.get("ph") == "M" and isinstance(args, dict) and "name" in args:
            thread_names[(_nint(ev.get("pid")), _nint(ev.get("tid")))] = str(args["name"])
    peak: int | None = None
    for m in _MEMORY.finditer(raw, lo, end):
        ev = _object_at(raw, m.start(), lo, end)
        if ev.get("ph") == "i" and isinstance(ev.get("args"), dict):
            peak = _memory_peak(ev["args"], peak)
    return _columns(
        meta, names, cat, name,
        np.fromiter(map(int, pid_b), dtype=np.int64, count=n),
        np.fromiter(map(int, tid_b), dtype=np.int64, count=n),
        np.fromiter(map(float, ts_b), dtype=np.float64, count=n),
        np.fromiter(map(float, dur_b), dtype=np.float64, count=n),
        cols["stream"], cols["correlation"], cols["device"], cols["bytes"],
        thread_names, peak, "kineto layout scan",
    )  # fmt: skip


# ---- metrics
def read_kineto(
    path: Path, rank: int, rank_rule: str, trace: KinetoTrace | None = None
) -> tuple[Source, list[RankMetrics]]:
    """Read one Kineto trace into one RankMetrics (all its GPU activity)."""
    t = trace if trace is not None else load_trace(path)
    names = t.names
    cat = t.cat
    start_ns = np.rint(t.ts * 1000).astype(np.int64)
    end_ns = np.rint((t.ts + t.dur) * 1000).astype(np.int64)
    d_ns = end_ns - start_ns
    compute_name = np.fromiter((core.is_compute(n) for n in names), dtype=bool, count=len(names))

    # GPU activity (kernels, copies, memsets)
    gpu = np.isin(cat, GPU_CODES)
    kmask = cat == KERNEL
    dev = np.where(t.device != NONE, t.device, np.where(t.pid != NONE, t.pid, 0))
    devices = sorted(int(v) for v in np.unique(dev[gpu]))
    union = core.union_arrays(start_ns[gpu], end_ns[gpu], (kmask & compute_name[t.name])[gpu])
    kinds = {}
    for code in GPU_CODES:
        m = cat == code
        kinds[code] = (int(m.sum()), int(d_ns[m].sum()))
    kt, ct, mt = kinds[KERNEL][1], kinds[MEMCPY][1], kinds[MEMSET][1]
    total = kt + ct + mt
    kernels = _by_name(t.name[kmask], d_ns[kmask], names)
    copies: dict[str, list[int]] = {}
    cmask = cat == MEMCPY
    cnames = t.name[cmask]
    for i in np.unique(cnames).tolist():
        sel = cnames == i
        m = _COPY_RE.search(names[i])
        c = copies.setdefault(m.group(1) if m else "other", [0, 0, 0])
        c[0] += int(sel.sum())
        c[1] += int(t.nbytes[cmask][sel].sum())
        c[2] += int(d_ns[cmask][sel].sum())

    # ranges and steps
    ranges: dict[str, list[int]] = {}
    step_ranges: list[tuple[str, int, int]] = []
    for i in np.flatnonzero((cat == USER_ANN) | (cat == GPU_USER_ANN)).tolist():
        nm = names[t.name[i]]
        d = int(d_ns[i])
        user = cat[i] == USER_ANN
        r = ranges.setdefault(nm if user else f"{nm} [gpu]", [0, 0, d, d])
        r[0] += 1
        r[1] += d
        r[2] = min(r[2], d)
        r[3] = max(r[3], d)
        if user:
            step_ranges.append((nm, int(start_ns[i]), d))
    range_stats = sorted(
        (
            RangeStat(name=n, count=c, total_ns=tot, mean_ns=tot / c, min_ns=lo, max_ns=hi)
            for n, (c, tot, lo, hi) in ranges.items()
        ),
        key=lambda r: -r.total_ns,
    )

    # data waits: union of the CPU-side data ranges (nested `data` and
    # `enumerate(DataLoader)...` count once), clipped to the span
    is_data = np.fromiter((core.is_data_wait(n) for n in names), dtype=bool, count=len(names))
    dmask = (cat == USER_ANN) & is_data[t.name]
    ds, de = core.merge_intervals(start_ns[dmask].tolist(), end_ns[dmask].tolist())
    data_wait = core.union_in_span(ds, de, union.start, union.end)

    # CPU threads: union of cpu_op intervals per (pid, tid)
    threads = []
    omask = cat == CPU_OP
    if omask.any():
        keys, inv = np.unique(np.stack([t.pid[omask], t.tid[omask]], axis=1), axis=0,
                              return_inverse=True)  # fmt: skip
        inv = inv.reshape(-1)
        os_, oe = start_ns[omask], end_ns[omask]
        for k, (p, tid) in enumerate(keys.tolist()):
            sel = inv == k
            u = core.union_arrays(os_[sel], oe[sel], np.zeros(int(sel.sum()), dtype=bool))
            threads.append(
                ThreadStat(
                    tid=tid if tid != NONE else 0,
                    pid=p if p != NONE else None,
                    name=t.thread_names.get((p, tid), f"thread {tid}"),
                    cpu_op_ns=u.busy,
                )
            )
    threads.sort(key=lambda th: -th.cpu_op_ns)
    main, main_rule = _main_thread(threads)
    offloading, offload_evidence = _offload_pattern(t, start_ns, end_ns, names)

    # CUDA synchronisation calls
    is_sync = np.fromiter((bool(_SYNC_RE.match(n)) for n in names), dtype=bool, count=len(names))
    smask = ((cat == CUDA_RT) | (cat == CUDA_DRV)) & is_sync[t.name]
    sync = _by_name(t.name[smask], d_ns[smask], names)
    ss, se = core.merge_intervals(start_ns[smask].tolist(), end_ns[smask].tolist())

    top, fp32, tc = _kernels(kernels, kt)
    span = union.span
    idle = span - union.busy
    version = t.meta.get("schemaVersion")
    source = Source(
        path=str(path),
        kind="kineto-json",
        tool_version=f"kineto schema {version}" if version is not None else None,
        rank=rank,
        rank_rule=rank_rule,
        missing=[] if kernels else ["kernel events"],
    )
    dev_name = None
    props = t.meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        dev_name = str(props[0].get("name")) if props[0].get("name") else None
    rm = RankMetrics(
        rank=rank,
        devices=devices,
        device_name=dev_name,
        source=str(path),
        span_start_ns=union.start,
        span_end_ns=union.end,
        span_ns=span,
        busy_ns=union.busy,
        idle_ns=idle,
        busy_pct=core.pct(union.busy, span),
        idle_pct=core.pct(idle, span),
        idle_gaps=core.gap_stats(union.gap_starts, union.gap_ends),
        temporal=hta_temporal(t, compute_name),
        activity=Activity(
            kernel_count=kinds[KERNEL][0],
            memcpy_count=kinds[MEMCPY][0],
            memset_count=kinds[MEMSET][0],
            kernel_ns=kt,
            memcpy_ns=ct,
            memset_ns=mt,
            kernel_pct=core.pct(kt, total),
            memcpy_pct=core.pct(ct, total),
            memset_pct=core.pct(mt, total),
        ),
        copies=[
            CopyDirection(
                direction=d, count=c, bytes=b, total_ns=tot, bandwidth_gb_s=b / tot if tot else None
            )
            for d, (c, b, tot) in sorted(copies.items())
        ],
        unified_memory=UnifiedMemory(),
        top_kernels=top,
        kernel_names=len(kernels),
        fp32_gemm_pct=fp32,
        tensor_core_gemm_pct=tc,
        nvtx=core.group_step_ranges(range_stats)[:TOP_RANGES],
        steps=core.step_stats(step_ranges),
        data_wait_ns=data_wait,
        main_thread=main,
        main_thread_rule=main_rule,
        offloading=offloading,
        offloading_evidence=offload_evidence,
        threads=threads[:40],
        sync=SyncStats(
            calls=sum(c for c, _ in sync.values()),
            total_ns=sum(tot for _, tot in sync.values()),
            wall_ns=core.union_in_span(ss, se, union.start, union.end),
            functions=sorted(
                (FunctionStat(name=n, count=c, total_ns=tot) for n, (c, tot) in sync.items()),
                key=lambda f: -f.total_ns,
            ),
        ),
        peak_gpu_memory_bytes=t.peak,
        peak_gpu_memory_source="Kineto [memory] events (trace window)"
        if t.peak is not None
        else None,
        timeline=core.timeline(union.gap_starts, union.gap_ends, union.start, union.end),
    )
    return source, [rm]


def _main_thread(threads: list[ThreadStat]) -> tuple[str | None, str | None]:
    """The main thread (tid == pid, else the one named like a Python main thread), or None.
    Kineto records no OS-runtime waits, so only its name is reported."""
    mains = [th for th in threads if th.pid is not None and th.tid == th.pid]
    if len(mains) == 1:
        return mains[0].name, "tid == pid"
    named = [th for th in (mains or threads) if th.name in core.MAIN_THREAD_NAMES]
    if len(named) == 1:
        return named[0].name, f"named {named[0].name}"
    return None, None


def _inside(ms: list[int], me: list[int], x: Any) -> Any:
    """Mask of the points x that lie inside one of the merged intervals [ms, me)."""
    if not ms:
        return np.zeros(x.size, dtype=bool)
    s, e = np.asarray(ms, dtype=np.int64), np.asarray(me, dtype=np.int64)
    i = np.searchsorted(s, x, side="right") - 1
    return (i >= 0) & (x < e[np.maximum(i, 0)])


def _offload_pattern(
    t: KinetoTrace, start_ns: Any, end_ns: Any, names: list[str]
) -> tuple[bool | None, str | None]:
    """(True, evidence) when the trace shows activation offloading: most DtoH bytes launched
    inside `forward` ranges (saved activations leave the GPU) and most HtoD bytes launched inside
    `backward` ranges (they come back), each at least OFFLOAD_MIN_BYTES; else (None, None), as
    the absence of the pattern does not prove offloading was off. The launch time of a copy is
    its CUDA runtime call's (same `correlation`): copies run asynchronously."""
    cmask = t.cat == MEMCPY
    if not cmask.any():
        return None, None
    is_rt = ((t.cat == CUDA_RT) | (t.cat == CUDA_DRV)) & (t.corr != NONE)
    rc, rs = t.corr[is_rt], start_ns[is_rt]
    order = np.argsort(rc, kind="stable")
    rc, rs = rc[order], rs[order]
    cc = t.corr[cmask]
    if rc.size:
        j = np.minimum(np.searchsorted(rc, cc), rc.size - 1)
        found = rc[j] == cc
        launch = np.where(found, rs[j], -1)
    else:
        found = np.zeros(cc.size, dtype=bool)
        launch = np.full(cc.size, -1, dtype=np.int64)
    ua = t.cat == USER_ANN

    def ranges(rx: re.Pattern[str]) -> tuple[list[int], list[int]]:
        hit = np.fromiter((bool(rx.search(n)) for n in names), dtype=bool, count=len(names))
        m = ua & hit[t.name]
        return core.merge_intervals(start_ns[m].tolist(), end_ns[m].tolist())

    direction = np.array(
        [(m.group(1) if (m := _COPY_RE.search(n)) else "") for n in names], dtype=object
    )[t.name[cmask]]
    nbytes = t.nbytes[cmask]
    dtoh, htod = direction == "DtoH", direction == "HtoD"
    in_fwd = found & _inside(*ranges(_FORWARD_RE), launch)
    in_bwd = found & _inside(*ranges(_BACKWARD_RE), launch)
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


def _by_name(ids: Any, durs: Any, names: list[str]) -> dict[str, tuple[int, int]]:
    """name → (count, summed duration) for events given as name ids and durations."""
    if ids.size == 0:
        return {}
    counts = np.bincount(ids, minlength=len(names))
    sums = np.zeros(len(names), dtype=np.int64)
    np.add.at(sums, ids, durs)
    return {names[i]: (int(counts[i]), int(sums[i])) for i in np.flatnonzero(counts).tolist()}


def _kernels(kernels: dict[str, tuple[int, int]], kt: int) -> tuple[list[KernelStat], float, float]:
    fp32 = tc = 0
    for name, (_, t) in kernels.items():
        prec = core.gemm_precision(name)
        if prec == "fp32":
            fp32 += t
        elif prec == "tensor-core":
            tc += t
    top = [
        KernelStat(
            name=n,
            count=c,
            total_ns=t,
            mean_ns=t / c,
            share_pct=core.pct(t, kt),
            compute=core.is_compute(n),
        )
        for n, (c, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:TOP_KERNELS]
    ]
    return top, core.pct(fp32, kt), core.pct(tc, kt)


def hta_temporal(t: KinetoTrace, compute_name: Any) -> Temporal:
    """HTA's temporal breakdown of one rank (see the module docstring), on the columns."""
    real = t.cat != TRACE
    is_gpu = real & (t.stream != NONE)
    is_cpu = real & (t.stream == NONE)
    ts, end = t.ts, t.ts + t.dur
    fractional = bool(
        (np.floor(ts[is_gpu]) != ts[is_gpu]).any()
        or (np.floor(end[is_gpu]) != end[is_gpu]).any()
        or (np.floor(ts[is_cpu]) != ts[is_cpu]).any()
    )
    has_step = np.fromiter(("ProfilerStep" in n for n in t.names), dtype=bool, count=len(t.names))
    step_ev = has_step[t.name]
    no_corr = t.corr < 0
    cpu_side = is_cpu | (is_gpu & no_corr)
    step_names = np.unique(t.name[cpu_side & step_ev])
    keep = is_gpu
    basis = "GPU events (any stream) of the whole trace, HTA rules"
    if step_names.size >= 2:
        rts = np.ceil(ts) if fractional else ts
        last = rts[cpu_side & step_ev].max()
        kept_corr = np.unique(t.corr[cpu_side & (rts < last) & ~no_corr])
        keep = is_gpu & np.where(no_corr, rts < last, np.isin(t.corr, kept_corr))
        basis = "GPU events launched before the last ProfilerStep (HTA rules)"
    s, e = ts[keep], end[keep]
    if fractional:
        s, e = np.ceil(s), np.floor(e)
    return hta_breakdown(s, e, compute_name[t.name[keep]], basis)


def _hta_groups(s: Any, e: Any) -> tuple[Any, Any]:
    """HTA's `merge_kernel_intervals`: sort by start; a row opens a new group when it starts
    after the running max of the previous rows' ends; a group spans (min start, max end)."""
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def hta_breakdown(s: Any, e: Any, compute: Any, basis: str) -> Temporal:
    """HTA `get_temporal_breakdown` for one rank from GPU events: start and end (µs, float
    arrays) and a bool compute mask (HTA's kernel classification)."""
    if s.size == 0:
        return Temporal(basis=basis)
    g0, g1 = _hta_groups(s, e)
    kernel_time = float(g1[-1] - g0[0])
    idle = kernel_time - float((g1 - g0).sum())
    compute_time = 0.0
    if compute.any():
        c0, c1 = _hta_groups(s[compute], e[compute])
        compute_time = float((c1 - c0).sum())
    non_compute = kernel_time - compute_time - idle
    return Temporal(
        span_ns=round(kernel_time * 1000),
        idle_ns=round(idle * 1000),
        compute_ns=round(compute_time * 1000),
        non_compute_ns=round(non_compute * 1000),
        idle_pct=core.pct(idle, kernel_time),
        compute_pct=core.pct(compute_time, kernel_time),
        non_compute_pct=core.pct(non_compute, kernel_time),
        basis=basis,
    )
