"""Reader of PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzipped, one file per rank.

What is read (trace event format, `ph: "X"` complete events, `ts`/`dur` in microseconds):
- GPU activity: `cat` `kernel`, `gpu_memcpy`, `gpu_memset` (device = `args.device`, else `pid`);
- copies: direction from the `gpu_memcpy` name (`Memcpy HtoD (Pageable -> Device)`), bytes from
  `args.bytes`;
- ranges (NVTX equivalent): `user_annotation` (CPU) and `gpu_user_annotation` (GPU);
- CPU threads: `cpu_op` intervals per (pid, tid) (union, so nesting counts once), thread names
  from `thread_name` metadata events; CUDA sync calls from `cuda_runtime`/`cuda_driver` events;
- peak memory: `[memory]` instant events, max `Total Allocated` where `Device Type` is 1 (CUDA);
- rank: `distributedInfo.rank`, else the file-name rule of `core.rank_from_name`.

`temporal` follows HTA exactly: every complete event whose `args.stream` is an integer is a GPU
event; when the trace has at least two `ProfilerStep` names, GPU events with a correlation id are
kept only if the CPU event with that correlation started before the last `ProfilerStep`, other
GPU events only if they start before it; fractional-microsecond timestamps are rounded the way
HTA does (start up, end down) before the union.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import defaultdict
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
    Temporal,
    ThreadStat,
    UnifiedMemory,
)
from orchestrator.errors import UserError

try:  # optional: parses traces ~4x faster than the stdlib; same result
    import orjson

    _loads: Any = orjson.loads  # its JSONDecodeError is a ValueError
except ImportError:  # pragma: no cover - exercised where orjson is absent
    _loads = json.loads

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
RANGE_CATS = ("user_annotation", "gpu_user_annotation")
_COPY_RE = re.compile(r"(?i)memcpy\s+(HtoD|DtoH|DtoD|HtoH|PtoP)")
_SYNC_RE = re.compile(r"(?i)^cu(da)?\w*(Synchronize|StreamWaitEvent)")
TOP_KERNELS = 25


def load_trace(path: Path) -> dict[str, Any]:
    """Parse a Kineto JSON file (plain or .gz)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = _loads(raw)
    except (OSError, EOFError, ValueError) as exc:
        raise UserError(
            f"{path}: not a readable PyTorch-profiler trace ({exc}); pass the .json or"
            " .json.gz written by torch.profiler"
        ) from exc
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise UserError(f"{path}: no traceEvents list; pass a torch.profiler Chrome trace")
    return data


def trace_rank(data: dict[str, Any]) -> int | None:
    info = data.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_kineto(
    path: Path, rank: int, rank_rule: str, data: dict[str, Any] | None = None
) -> tuple[Source, list[RankMetrics]]:
    """Read one Kineto trace into one RankMetrics (all its GPU activity)."""
    data = data if data is not None else load_trace(path)
    events = [e for e in data["traceEvents"] if isinstance(e, dict)]
    thread_names: dict[tuple[Any, Any], str] = {}
    starts: list[int] = []
    ends: list[int] = []
    comp: list[bool] = []
    devices: set[int] = set()
    kinds = {"kernel": [0, 0], "memcpy": [0, 0], "memset": [0, 0]}
    kernels: dict[str, list[int]] = {}
    copies: dict[str, list[int]] = {}
    ranges: dict[str, list[int]] = {}
    step_ranges: list[tuple[str, int, int]] = []
    cpu_ops: dict[tuple[Any, Any], list[tuple[int, int]]] = defaultdict(list)
    sync: dict[str, list[int]] = {}
    peak: int | None = None
    hta_gpu: list[tuple[float, float, str, int]] = []  # ts, end (us), name, correlation
    hta_cpu: list[tuple[float, str, int]] = []  # ts, name, correlation
    for ev in events:
        ph = ev.get("ph")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        assert isinstance(args, dict)
        if ph == "M":
            if ev.get("name") == "thread_name" and "name" in args:
                thread_names[(ev.get("pid"), ev.get("tid"))] = str(args["name"])
            continue
        if ph == "i" and ev.get("name") == "[memory]":
            if _int(args.get("Device Type")) == 1 and _int(args.get("Total Allocated")) is not None:
                v = int(args["Total Allocated"])
                peak = v if peak is None or v > peak else peak
            continue
        if ph != "X":
            continue
        ts, dur = ev.get("ts"), ev.get("dur")
        if not isinstance(ts, int | float) or not isinstance(dur, int | float):
            continue
        cat = str(ev.get("cat", ""))
        name = str(ev.get("name", ""))
        start_ns = round(ts * 1000)
        end_ns = round((ts + dur) * 1000)
        # HTA's view: any event with an integer stream is a GPU event
        if cat != "Trace":
            stream = _int(args.get("stream"))
            corr = _int(args.get("correlation"))
            if stream is not None and stream != -1:
                hta_gpu.append(
                    (float(ts), float(ts) + float(dur), name, corr if corr is not None else -1)
                )
            else:
                hta_cpu.append((float(ts), name, corr if corr is not None else -1))
        kind = GPU_CATS.get(cat)
        if kind is not None:
            dev = _int(args.get("device"))
            devices.add(dev if dev is not None else (_int(ev.get("pid")) or 0))
            starts.append(start_ns)
            ends.append(end_ns)
            comp.append(kind == "kernel" and core.is_compute(name))
            d = end_ns - start_ns
            kinds[kind][0] += 1
            kinds[kind][1] += d
            if kind == "kernel":
                k = kernels.setdefault(name, [0, 0])
                k[0] += 1
                k[1] += d
            elif kind == "memcpy":
                m = _COPY_RE.search(name)
                direction = m.group(1) if m else "other"
                c = copies.setdefault(direction, [0, 0, 0])
                c[0] += 1
                c[1] += _int(args.get("bytes")) or 0
                c[2] += d
            continue
        if cat in RANGE_CATS:
            key = name if cat == "user_annotation" else f"{name} [gpu]"
            r = ranges.setdefault(key, [0, 0, d := end_ns - start_ns, d])
            r[0] += 1
            r[1] += d
            r[2] = min(r[2], d)
            r[3] = max(r[3], d)
            if cat == "user_annotation":
                step_ranges.append((name, start_ns, d))
            continue
        if cat == "cpu_op":
            cpu_ops[(ev.get("pid"), ev.get("tid"))].append((start_ns, end_ns))
        elif cat in ("cuda_runtime", "cuda_driver") and _SYNC_RE.match(name):
            s = sync.setdefault(name, [0, 0])
            s[0] += 1
            s[1] += end_ns - start_ns
    union = core.union_lists(starts, ends, comp)
    temporal = _hta_temporal(hta_gpu, hta_cpu)
    kt, ct, mt = kinds["kernel"][1], kinds["memcpy"][1], kinds["memset"][1]
    total = kt + ct + mt
    threads = []
    for tkey, tivs in cpu_ops.items():
        u = core.union_lists([a for a, _ in tivs], [b for _, b in tivs], [False] * len(tivs))
        threads.append(
            ThreadStat(
                tid=_int(tkey[1]) or 0,
                name=thread_names.get(tkey, f"thread {tkey[1]}"),
                cpu_op_ns=u.busy,
            )
        )
    threads.sort(key=lambda t: -t.cpu_op_ns)
    top, fp32, tc = _kernels(kernels, kt)
    range_stats = sorted(
        (
            RangeStat(name=n, count=c, total_ns=t, mean_ns=t / c, min_ns=lo, max_ns=hi)
            for n, (c, t, lo, hi) in ranges.items()
        ),
        key=lambda r: -r.total_ns,
    )
    span = union.span
    idle = span - union.busy
    version = data.get("schemaVersion")
    source = Source(
        path=str(path),
        kind="kineto-json",
        tool_version=f"kineto schema {version}" if version is not None else None,
        rank=rank,
        rank_rule=rank_rule,
        missing=[] if kernels else ["kernel events"],
    )
    dev_name = None
    props = data.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        dev_name = str(props[0].get("name")) if props[0].get("name") else None
    rm = RankMetrics(
        rank=rank,
        devices=sorted(devices),
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
        temporal=temporal,
        activity=Activity(
            kernel_count=kinds["kernel"][0],
            memcpy_count=kinds["memcpy"][0],
            memset_count=kinds["memset"][0],
            kernel_ns=kt,
            memcpy_ns=ct,
            memset_ns=mt,
            kernel_pct=core.pct(kt, total),
            memcpy_pct=core.pct(ct, total),
            memset_pct=core.pct(mt, total),
        ),
        copies=[
            CopyDirection(
                direction=d, count=c, bytes=b, total_ns=t, bandwidth_gb_s=b / t if t else None
            )
            for d, (c, b, t) in sorted(copies.items())
        ],
        unified_memory=UnifiedMemory(),
        top_kernels=top,
        kernel_names=len(kernels),
        fp32_gemm_pct=fp32,
        tensor_core_gemm_pct=tc,
        nvtx=range_stats[:50],
        steps=core.step_stats(step_ranges),
        data_wait_ns=sum(r.total_ns for r in range_stats if core.is_data_wait(r.name)),
        threads=threads[:40],
        sync=SyncStats(
            calls=sum(c for c, _ in sync.values()),
            total_ns=sum(t for _, t in sync.values()),
            functions=sorted(
                (FunctionStat(name=n, count=c, total_ns=t) for n, (c, t) in sync.items()),
                key=lambda f: -f.total_ns,
            ),
        ),
        peak_gpu_memory_bytes=peak,
        timeline=core.timeline(union.gap_starts, union.gap_ends, union.start, union.end),
    )
    return source, [rm]


def _kernels(kernels: dict[str, list[int]], kt: int) -> tuple[list[KernelStat], float, float]:
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


def _hta_temporal(
    gpu: list[tuple[float, float, str, int]], cpu: list[tuple[float, str, int]]
) -> Temporal:
    """HTA's temporal breakdown of one rank (see the module docstring)."""
    fractional = any(
        not float(ts).is_integer() or not float(end).is_integer() for ts, end, _, _ in gpu
    ) or any(not float(ts).is_integer() for ts, _, _ in cpu)
    steps = {n for _, n, _ in cpu if "ProfilerStep" in n} | {
        n for _, _, n, c in gpu if "ProfilerStep" in n and c < 0
    }
    basis = "GPU events (any stream) of the whole trace, HTA rules"
    if len(steps) >= 2:
        # HTA: CPU side = events that are not (stream >= 0 and correlation >= 0)
        cpu_side = [(ts, n, c) for ts, n, c in cpu] + [(ts, n, c) for ts, _, n, c in gpu if c < 0]
        rnd = math.ceil if fractional else (lambda x: x)
        last = max(rnd(ts) for ts, n, _ in cpu_side if "ProfilerStep" in n)
        kept_corr = {c for ts, _, c in cpu_side if rnd(ts) < last and c >= 0}
        gpu = [
            g for g in gpu if (g[3] >= 0 and g[3] in kept_corr) or (g[3] < 0 and rnd(g[0]) < last)
        ]
        basis = "GPU events launched before the last ProfilerStep (HTA rules)"
    ivs: list[tuple[float, float, str]]
    if fractional:
        ivs = [(float(math.ceil(ts)), float(math.floor(end)), n) for ts, end, n, _ in gpu]
    else:
        ivs = [(ts, end, n) for ts, end, n, _ in gpu]
    return hta_breakdown(ivs, basis)


def _hta_groups(ivs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """HTA's `merge_kernel_intervals`: sort by start; a row opens a new group when it starts
    after the running max of the previous rows' ends; a group spans (min start, max end)."""
    ivs = sorted(ivs, key=lambda x: x[0])
    groups: list[tuple[float, float]] = []
    prev_max: float | None = None
    for ts, end in ivs:
        if prev_max is None or ts > prev_max:
            groups.append((ts, end))
        else:
            g0, g1 = groups[-1]
            groups[-1] = (g0, max(g1, end))
        prev_max = end if prev_max is None else max(prev_max, end)
    return groups


def hta_breakdown(ivs: list[tuple[float, float, str]], basis: str) -> Temporal:
    """HTA `get_temporal_breakdown` for one rank from (start_us, end_us, name) GPU events."""
    if not ivs:
        return Temporal(basis=basis)
    groups = _hta_groups([(s, e) for s, e, _ in ivs])
    kernel_time = groups[-1][1] - groups[0][0]
    idle = kernel_time - sum(b - a for a, b in groups)
    compute = sum(b - a for a, b in _hta_groups([(s, e) for s, e, n in ivs if core.is_compute(n)]))
    non_compute = kernel_time - compute - idle
    return Temporal(
        span_ns=round(kernel_time * 1000),
        idle_ns=round(idle * 1000),
        compute_ns=round(compute * 1000),
        non_compute_ns=round(non_compute * 1000),
        idle_pct=core.pct(idle, kernel_time),
        compute_pct=core.pct(compute, kernel_time),
        non_compute_pct=core.pct(non_compute, kernel_time),
        basis=basis,
    )
