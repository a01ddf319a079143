"""Reader of PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzipped: one file → one
`RankTimeline`.

What is read (trace event format, `ph: "X"` complete events, `ts`/`dur` in microseconds):
- GPU work (`timeline.GpuTable`): `cat` `kernel`, `gpu_memcpy`, `gpu_memset`,
  `gpu_user_annotation`, and any other complete event with an integer `args.stream` (HTA counts
  it as GPU work); device = `args.device`, else `pid`; copy direction from the `gpu_memcpy`
  name (`Memcpy HtoD (Pageable -> Device)`), bytes from `args.bytes`; launch = start of the CPU
  event with the same `args.correlation` (the `cudaLaunchKernel` / `cuLaunchKernel` call);
- host side (`timeline.HostTable`): `cpu_op`, `user_annotation`, `cuda_runtime`, `cuda_driver`;
  thread names from `thread_name` metadata events;
- PyTorch <= 1.9 names its categories `Kernel`, `Memcpy`, `Memset`, `Runtime`, `Operator`: the
  same columns (its `ProfilerStep#N` operators count as annotations, as later versions write);
- peak memory: `[memory]` instant events (top-level objects of phase `i` named `[memory]`, never
  the text elsewhere), max `Total Allocated` where `Device Type` is 1 (CUDA);
- rank: `distributedInfo.rank` (`trace_rank`); the loader applies the file-name rules otherwise.

Any integer the trace holds: ids (pid, tid, stream, device, correlation) are 64-bit columns; an
unsigned id above 2^63 - 1 keeps its 64 bits (2^64 - 1 is -1, as a C program's uint64 set to -1
is), an id beyond 64 bits, a time whose nanoseconds do not fit 64 bits, or an event whose end
does not, is refused in one sentence. An event with a negative duration is left out with a note
(as the nsys reader leaves out rows whose end is before their start).

Parsing is bounded (`tracetext`): the text streams through in batches of whole events, each
parsed into numpy columns, so memory follows the number of events (about 55 bytes each while
reading, then the timeline's columns), never the size of the text. Two batch parsers:
- `_scan_batch`: the compiled scan (`kineto_scan`): the batch checked as JSON and its top-level
  objects read in the layout libkineto writes (fields at fixed literals, numbers digit by digit,
  timestamps straight to nanoseconds); it gives the batch up when anything differs, to
- `_generic_events`: orjson into Python objects, one loop, for any other layout (traces
  rewritten by other tools, `json.dumps` output, PyTorch <= 1.9), and for every batch where the
  compiled scan is not built.
Both give identical columns on the same events (tests check it on the real traces).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from orchestrator.analysis.readers import kineto_scan, tracetext
from orchestrator.analysis.timeline import model as T
from orchestrator.core.errors import UserError

_COPY_RE = re.compile(r"(?i)memcpy\s+(HtoD|DtoH|DtoD|HtoH|PtoP)")
_BLANK = re.compile(rb"[ \t\r\n]*")  # JSON white space (a comma is a separator: checked)

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
    # PyTorch <= 1.9
    "Kernel": KERNEL,
    "Memcpy": MEMCPY,
    "Memset": MEMSET,
    "Runtime": CUDA_RT,
    "Operator": CPU_OP,
}
_CATS_B = {k.encode(): v for k, v in CATS.items()}
GPU_CODES = (KERNEL, MEMCPY, MEMSET)
_ARG_CODES = (KERNEL, MEMCPY, MEMSET, CUDA_RT, CUDA_DRV)  # events whose args are read
_ARG_KEYS = ("stream", "correlation", "device", "bytes")
NONE = T.NONE  # "absent" in the integer columns
_COLS = ("cat", "name", "pid", "tid", "ts", "dur", "stream", "corr", "device", "nbytes")
# cat, name, pid, tid, ts, dur, stream, corr, device, nbytes: ids are any 64-bit value (a trace
# of HTA's holds tid 4294967295; a stream id of 2^32 + 7 is not stream 7)
_DTYPES = (np.int8, np.int32, np.int64, np.int64, np.int64, np.int64, np.int64, np.int64,
           np.int64, np.int64)  # fmt: skip
_I64_MAX = (1 << 63) - 1
# microseconds whose nanoseconds fit int64
_MAX_US = _I64_MAX // 1000


@dataclass
class KinetoTrace:
    """Columns of a trace's complete (`X`) events plus what else the reader needs."""

    meta: dict[str, Any]
    names: list[str]
    cat: Any  # int8 category codes
    name: Any  # int32 ids into names
    pid: Any  # int64, NONE when not an integer
    tid: Any
    ts: Any  # int64 nanoseconds (the trace's microseconds, exact to its three decimals)
    dur: Any
    stream: Any  # int64, NONE when absent
    corr: Any
    device: Any
    nbytes: Any  # int64, 0 when absent
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    peak: int | None = None
    parser: str = ""
    # the `[memory]` events on CUDA devices: (ts µs, device, addr, bytes, total allocated,
    # total reserved), in file order (kineto_memory makes the memory timelines of them)
    memory: list[tuple[float, int, int, int, int, int]] = field(default_factory=list)

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


class Beyond(ValueError):
    """A value the trace holds that no 64-bit column holds (the reader refuses the file)."""

    def __init__(self, what: str, value: Any) -> None:
        super().__init__(f"{what} {value!r}")
        self.what = what
        self.value = value


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _id(v: Any, what: str, default: int = NONE) -> int:
    """An id (or byte count) as its 64 bits: an unsigned value above 2^63 - 1 as the int64 of the
    same bits; `default` when it is not a number; `Beyond` past 64 bits."""
    # the common cases first (an int in range, a field the event does not have), without the
    # exception int(None) raises: this runs for ten fields of every event of a trace
    if type(v) is int and -(1 << 63) <= v <= _I64_MAX:
        return v
    if v is None:
        return default
    i = _int(v) if not isinstance(v, bool) else None
    if i is None:
        return default
    if -(1 << 63) <= i <= _I64_MAX:
        return i
    if i < 1 << 64 and i > 0:
        return i - (1 << 64)
    raise Beyond(what, v)


def _nint(v: Any) -> int:
    """An id of the metadata (a device's): NONE where it is not a 64-bit integer."""
    try:
        return _id(v, "id")
    except Beyond:
        return NONE


def _not_a_trace(path: Path | str, why: object) -> UserError:
    return UserError(
        f"{path}: not a readable PyTorch-profiler trace ({why}); pass the .json or .json.gz"
        " written by torch.profiler"
    )


class _Builder:
    """Collects batches of columns, interning names across batches."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.parts: list[list[Any]] = []
        self.thread_names: dict[tuple[int, int], str] = {}
        self.peak: int | None = None
        self.mem: list[tuple[float, int, int, int, int, int]] = []
        self.scanned = 0
        self.generic = 0

    def add(self, cols: tuple[Any, ...]) -> None:
        if cols[0].size:
            self.parts.append([c.astype(t, copy=False) for c, t in zip(cols, _DTYPES, strict=True)])

    def memory(self, args: dict[str, Any], ts: Any = None) -> None:
        if _int(args.get("Device Type")) == 1:
            v = _int(args.get("Total Allocated"))
            if v is not None and (self.peak is None or v > self.peak):
                self.peak = v
            got = (_int(args.get(k)) for k in ("Device Id", "Addr", "Bytes", "Total Reserved"))
            dev, addr, nbytes, res = got
            if (
                isinstance(ts, int | float)
                and not isinstance(ts, bool)
                and None not in (dev, addr, nbytes, res, v)
            ):
                self.mem.append((float(ts), dev, addr, nbytes, v, res))  # type: ignore[arg-type]

    def record(self, ev: Any) -> None:
        """A record that is not a complete event: a thread's name (`M`, `thread_name`) or a
        memory sample (`i`, `[memory]`); anything else is not read."""
        if not isinstance(ev, dict):
            return
        ph = ev.get("ph")
        a = ev.get("args")
        args: dict[str, Any] = a if isinstance(a, dict) else {}
        if ph == "M":
            if ev.get("name") == "thread_name" and "name" in args:
                key = (_id(ev.get("pid"), "pid"), _id(ev.get("tid"), "tid"))
                self.thread_names[key] = str(args["name"])
        elif ph == "i" and ev.get("name") == "[memory]":
            self.memory(args, ev.get("ts"))

    def finish(self, meta: dict[str, Any]) -> KinetoTrace:
        cols = []
        for i, dt in enumerate(_DTYPES):
            cols.append(np.concatenate([p[i] for p in self.parts]) if self.parts
                        else np.zeros(0, dtype=dt))  # fmt: skip
            for p in self.parts:  # release each column of the batches once it is joined
                p[i] = None
        self.parts.clear()
        if self.generic and self.scanned:
            parser = (
                f"kineto layout scan, orjson (generic) for {self.generic} of"
                f" {self.generic + self.scanned} batches"
            )
        else:
            parser = "orjson (generic)" if self.generic else "kineto layout scan"
        cat, name, pid, tid, ts, dur, stream, corr, device, nbytes = cols
        return KinetoTrace(
            meta, list(self.ids), cat, name, pid, tid, ts, dur, stream, corr, device, nbytes,
            thread_names=self.thread_names, peak=self.peak, parser=parser, memory=self.mem,
        )  # fmt: skip


# ---- the generic path
def _generic_events(b: _Builder, events: Iterable[Any]) -> None:
    """Columns of parsed event objects (any key order and spacing)."""
    out: tuple[list[Any], ...] = tuple([] for _ in _COLS)
    cat, name, pid, tid, ts, dur, stream, corr, device, nbytes = out
    ids = b.ids
    for ev in events:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        if ph != "X":
            b.record(ev)
            continue
        t, d = ev.get("ts"), ev.get("dur")
        if not isinstance(t, int | float) or not isinstance(d, int | float):
            continue
        if isinstance(t, bool) or isinstance(d, bool):
            continue
        a = ev.get("args")
        args: dict[str, Any] = a if isinstance(a, dict) else {}
        cat.append(CATS.get(str(ev.get("cat", "")), OTHER))
        nm = str(ev.get("name", ""))
        name.append(ids.setdefault(nm, len(ids)))
        pid.append(_id(ev.get("pid"), "pid"))
        tid.append(_id(ev.get("tid"), "tid"))
        ts.append(float(t))
        dur.append(float(d))
        stream.append(_id(args.get("stream"), "args.stream"))
        corr.append(_id(args.get("correlation"), "args.correlation"))
        device.append(_id(args.get("device"), "args.device"))
        nbytes.append(_id(args.get("bytes"), "args.bytes", 0))
    floats = {4, 5}  # ts, dur: microseconds as parsed, to nanoseconds
    b.add(
        tuple(
            _us_to_ns(np.asarray(c, dtype=np.float64), "ts" if i == 4 else "dur")
            if i in floats
            else np.asarray(c, dtype=t)
            for i, (c, t) in enumerate(zip(out, _DTYPES, strict=True))
        )
    )


def _us_to_ns(us: Any, what: str = "ts") -> Any:
    """Microseconds (floats) to integer nanoseconds: whole part exact, fraction rounded, so a
    value written with three decimals comes back exactly (as the layout parser reads it);
    `Beyond` where the nanoseconds do not fit int64 (they would wrap to -9.2e18)."""
    big = ~(np.abs(us) < _MAX_US)  # NaN too
    if big.any():
        raise Beyond(f"a {what} of", float(us[np.flatnonzero(big)[0]]))
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


def from_json(data: dict[str, Any]) -> KinetoTrace:
    """Columns from a parsed trace document (any key order and spacing)."""
    b = _Builder()
    _generic_events(b, data["traceEvents"])
    b.generic = 1
    return b.finish({k: v for k, v in data.items() if k != "traceEvents"})


# ---- the layout scan
def _scan_batch(b: _Builder, raw: bytes) -> bool:
    """Columns of a batch by the compiled scan (`kineto_scan.parse`; its memory and metadata
    records parsed by orjson); False (nothing added) when the scan is not built or gives the
    batch up."""
    if not kineto_scan.available():
        return False
    got = kineto_scan.parse(raw, b.ids, _ARG_CATS, _CATS_B)
    if got is None:
        return False
    cols, records = got
    for lo, hi in records:
        b.record(orjson.loads(raw[lo:hi]))
    b.add(tuple(cols[k] for k in ("cat", "name", "pid", "tid", "ts", "dur", "stream",
                                  "correlation", "device", "bytes")))  # fmt: skip
    return True


_ARG_CATS = set(_ARG_CODES)


def scan(raw: bytes) -> KinetoTrace | None:
    """Columns from the text libkineto writes, or None when the text has another layout."""
    b = _Builder()
    head, tail = b"", b""
    try:
        for piece in tracetext.split(iter([raw])):
            if piece.kind == "head":
                head += piece.text
            elif piece.kind == "tail":
                tail += piece.text
            elif not _scan_batch(b, piece.text):
                return None
            else:
                b.scanned += 1
        meta = orjson.loads(head + tail)
    except (tracetext.LayoutError, ValueError):
        return None
    if not isinstance(meta, dict) or "traceEvents" not in meta:
        return None
    meta.pop("traceEvents", None)
    return b.finish(meta)


# ---- reading a file
def load_trace(path: Path, max_bytes: int | None = None) -> KinetoTrace:
    """Parse a Kineto JSON file (plain or .gz) in bounded memory (see the module docstring)."""
    ceiling = tracetext.max_trace_bytes(max_bytes)
    try:
        try:
            return _load(path, ceiling, "auto")
        except tracetext.LayoutError:
            pass
        return _load(path, ceiling, "structure")
    except Beyond as exc:
        if exc.what.startswith("a "):  # a time
            raise UserError(
                f"{path}: an event holds {exc.what} {exc.value} µs, past what 64-bit nanoseconds"
                " hold (292 years); the trace is damaged: record it again"
            ) from exc
        raise UserError(
            f"{path}: an event's {exc.what} is {exc.value}, beyond the 64 bits an id or a byte"
            " count holds; the trace is damaged or was not written by torch.profiler: record it"
            " again"
        ) from exc
    except tracetext.LayoutError as exc:
        if str(exc).startswith("no traceEvents"):
            raise UserError(f"{path}: {exc}; pass a torch.profiler Chrome trace") from exc
        raise _not_a_trace(path, exc) from exc


def _load(path: Path, ceiling: int, layout: str) -> KinetoTrace:
    b = _Builder()
    head = bytearray()
    tail = bytearray()
    first = True  # no event read yet (the structural splitter's pieces: comma before the rest)
    for piece in tracetext.split(tracetext.chunks(path, ceiling), layout):
        if piece.kind == "head":
            head += piece.text
        elif piece.kind == "tail":
            tail += piece.text
            if len(tail) > tracetext.MAX_HEAD_BYTES:
                raise _not_a_trace(path, "too much text after the traceEvents list")
        elif layout == "structure":
            body = _structure_body(piece.text, first)
            if body is None:
                raise _not_a_trace(path, "events not separated by single commas")
            if body:
                first = False
                _events(b, body, path, layout)
        else:
            _events(b, piece.text, path, layout)
    try:
        meta = orjson.loads(bytes(head) + bytes(tail))
    except ValueError as exc:
        raise _not_a_trace(path, exc) from exc
    if not isinstance(meta, dict | list):
        raise UserError(f"{path}: no traceEvents list; pass a torch.profiler Chrome trace")
    doc = meta if isinstance(meta, dict) else {}
    doc.pop("traceEvents", None)
    return b.finish(doc)


_WS = b" \t\r\n"  # JSON's white space


def _structure_body(text: bytes, first: bool) -> bytes | None:
    """The events of a piece the structural splitter cut after an event: the separator comma
    before it (every piece but the first) taken off; None when the separators are not JSON's (a
    missing comma, one more, or one before the array's end)."""
    body = text.strip(_WS)
    if not body or first:
        return body
    if body[:1] != b",":
        return None
    body = body[1:].strip(_WS)
    return body or None


def _events(b: _Builder, text: bytes, path: Path, layout: str) -> None:
    """One batch of whole events: the layout scan, else orjson in small pieces."""
    if _BLANK.fullmatch(text):  # (a match, not a stripped copy of the batch)
        return
    if layout == "auto" and _scan_batch(b, text):
        b.scanned += 1
        return
    b.generic += 1
    for part in _pieces(text) if layout == "auto" else [text]:
        body = part.strip(_WS)
        if not body:
            continue
        try:
            events = orjson.loads(b"[" + body + b"]")
        except ValueError as exc:
            if layout == "auto":  # cut in the wrong places: not libkineto's layout after all
                raise tracetext.LayoutError(str(exc)) from exc
            raise _not_a_trace(path, exc) from exc
        _generic_events(b, events)
        del events


def _pieces(text: bytes) -> Iterator[bytes]:
    """A libkineto-layout batch in pieces of about GENERIC_BATCH_BYTES (cut between events)."""
    start = 0
    size = tracetext.GENERIC_BATCH_BYTES
    while len(text) - start > size:
        cut = text.find(tracetext.KINETO_CUT, start + size)
        if cut < 0:
            break
        yield text[start : cut + 4]
        start = cut + 5
    yield text[start:]


def trace_rank(trace: KinetoTrace) -> int | None:
    """`distributedInfo.rank` of the trace, when it holds one."""
    return trace_rank_of(trace.meta)


def trace_rank_of(meta: dict[str, Any]) -> int | None:
    """`distributedInfo.rank` of a trace's metadata, when it holds one."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            return r
    return None


# ---- the timeline
def _step_operator(names: list[str]) -> Any:
    """PyTorch <= 1.9 writes `ProfilerStep#N` as an operator; later versions as an annotation."""
    return np.fromiter((n.startswith("ProfilerStep") for n in names), bool, count=len(names))


def to_timeline(t: KinetoTrace, path: Path) -> T.RankTimeline:
    """The trace's columns as a `RankTimeline` (the raw columns are released as it goes). Events
    with a negative duration are left out with a note; an event whose end does not fit 64-bit
    nanoseconds is refused."""
    notes: list[str] = []
    negative = t.dur < 0
    if bool(negative.any()):
        keep = ~negative
        for k in ("cat", "name", "pid", "tid", "ts", "dur", "stream", "corr", "device", "nbytes"):
            setattr(t, k, getattr(t, k)[keep])
        notes.append(
            f"{int(negative.sum())} events with a negative duration left out (their end is"
            " before their start)"
        )
    if bool((t.ts > _I64_MAX - t.dur).any()):
        raise UserError(
            f"{path}: an event ends (ts + dur) past what 64-bit nanoseconds hold (292 years);"
            " the trace is damaged: record it again"
        )
    names = t.names
    cat = t.cat
    start = t.ts
    end = t.ts + t.dur
    t.ts = t.dur = None
    real = cat != TRACE
    # HTA rounds only traces with fractional microseconds (a no-op on whole ones)
    fractional = bool((start[real] % 1000).any() or (end[real] % 1000).any())
    gpu_cat = np.isin(cat, (KERNEL, MEMCPY, MEMSET, GPU_USER_ANN))
    on_stream = t.stream != NONE
    is_gpu = real & (gpu_cat | on_stream)
    host_cat = np.isin(cat, (CPU_OP, USER_ANN, CUDA_RT, CUDA_DRV))
    is_host = real & host_cat

    # launch: the start of the last host event (file order) with the event's correlation
    api = is_host & (t.corr != NONE)
    rc = t.corr[api]
    rs = start[api]
    order = np.argsort(rc, kind="stable")
    rc, rs = rc[order], rs[order]
    last = np.ones(rc.size, dtype=bool)
    last[:-1] = rc[1:] != rc[:-1]  # the last of equal correlations (stable: file order)
    rc, rs = rc[last], rs[last]
    gi = np.flatnonzero(is_gpu)
    gcorr = t.corr[gi]
    launch = np.full(gi.size, NONE, dtype=np.int64)
    if rc.size:
        j = np.minimum(np.searchsorted(rc, gcorr), rc.size - 1)
        hit = (rc[j] == gcorr) & (gcorr != NONE)
        launch[hit] = rs[j[hit]]

    gcat = cat[gi]
    kind = np.full(gi.size, T.GPU_OTHER, dtype=np.int8)
    kind[gcat == KERNEL] = T.KERNEL
    kind[gcat == MEMCPY] = T.MEMCPY
    kind[gcat == MEMSET] = T.MEMSET
    kind[gcat == GPU_USER_ANN] = T.GPU_ANNOTATION
    direction = np.array(
        [T.COPY_CODES[m.group(1)] if (m := _COPY_RE.search(n)) else T.COPY_OTHER for n in names],
        dtype=np.int8,
    )
    gname = t.name[gi]
    copy = np.where(kind == T.MEMCPY, direction[gname] if names else 0, T.COPY_NONE)
    device = np.where(t.device[gi] != NONE, t.device[gi], np.where(t.pid[gi] != NONE, t.pid[gi], 0))
    del rc, rs, order, last, api
    gpu = T.GpuTable(
        start=start[gi], end=end[gi], device=device.astype(np.int64), stream=t.stream[gi],
        kind=kind, name=gname, corr=gcorr, launch=launch, nbytes=t.nbytes[gi],
        copy=copy.astype(np.int8),
    )  # fmt: skip
    del gi, gcorr, launch, gname, device, kind, copy
    t.stream = t.corr = t.device = t.nbytes = None  # the host table needs none of them

    hi = np.flatnonzero(is_host)
    hcat = cat[hi]
    hname = t.name[hi]
    hkind = np.full(hi.size, T.CPU_OP, dtype=np.int8)
    hkind[hcat == USER_ANN] = T.ANNOTATION
    hkind[(hcat == CUDA_RT) | (hcat == CUDA_DRV)] = T.CUDA_API
    if names:
        hkind[(hcat == CPU_OP) & _step_operator(names)[hname]] = T.ANNOTATION
    host = T.HostTable(
        start=start[hi], end=end[hi], pid=t.pid[hi], tid=t.tid[hi], kind=hkind, name=hname
    )
    del start, end, cat, real, is_gpu, is_host, gpu_cat, host_cat, on_stream
    t.cat = t.name = t.pid = t.tid = None
    # threads with CPU operators, named by the trace's metadata
    ops = host.kind == T.CPU_OP
    keys = {
        (int(p), int(q))
        for p, q in zip(host.pid[ops].tolist(), host.tid[ops].tolist(), strict=True)
    }
    threads = {k: t.thread_names.get(k, f"thread {k[1] if k[1] != NONE else 0}") for k in keys}
    version = t.meta.get("schemaVersion")
    dev_names: dict[int, str] = {}
    props = t.meta.get("deviceProperties")
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and p.get("name"):
                dev_names[_nint(p.get("id", 0))] = str(p["name"])
    from orchestrator.analysis.readers import kineto_memory

    memory = kineto_memory.timelines(t.memory, host, names)
    t.memory = []
    return T.RankTimeline(
        memory=memory,
        source=T.SourceInfo(
            path=str(path),
            kind="kineto-json",
            tool_version=f"kineto schema {version}" if version is not None else None,
            missing=[] if bool((gpu.kind == T.KERNEL).any()) else ["kernel events"],
            parser=t.parser,
        ),
        names=names,
        gpu=gpu,
        host=host,
        threads=threads,
        device_names=dev_names,
        peak_memory={-1: t.peak} if t.peak is not None else {},
        peak_memory_source="Kineto [memory] events (trace window)" if t.peak is not None else None,
        hta=T.HtaClock(unit_ns=1000, rounds=fractional, step_filter=True),
        meta=t.meta,
        split_devices=False,
        notes=notes,
    )


def read_timeline(path: Path, max_bytes: int | None = None) -> T.RankTimeline:
    """Read one Kineto trace into a timeline (rank fields are the loader's to set)."""
    return to_timeline(load_trace(path, max_bytes), path)
