"""Shared machinery of the readers: the streaming interval union, gap statistics, the
timeline, kernel classification (HTA's rules), step detection and the rank-from-file-name rule.

The union is one pass over intervals sorted by start: a new merged interval begins when an
interval starts after the running maximum end (touching intervals merge, as in HTA's
`merge_kernel_intervals`). Only the gaps are stored (two `array('q')`), never one Python
object per row. numpy, when importable, speeds up the percentiles and the timeline; results are
the same without it.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.analysis.metrics import (
    Bucket,
    GapStats,
    RangeStat,
    StepStats,
    Temporal,
    Timeline,
)

try:  # optional accelerator: same results without it, only slower
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # pragma: no cover - exercised where numpy is absent
    HAVE_NUMPY = False

# ---- HTA kernel classification (hta/utils/utils.py, HolisticTraceAnalysis 0.5.0)
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def hta_kernel_type(name: str) -> str:
    """HTA's `get_kernel_type`: COMMUNICATION, MEMORY, COMPUTATION or OTHER."""
    if _HTA_COMM.match(name):
        return "COMMUNICATION"
    if _HTA_MEMORY.match(name):
        return "MEMORY"
    if not _HTA_NOT_COMPUTE.match(name):
        return "COMPUTATION"
    return "OTHER"


def is_compute(name: str) -> bool:
    """True when HTA counts the event as computation."""
    return hta_kernel_type(name) == "COMPUTATION"


# HTA's KernelType enum values, the codes of `hta_type_codes`
COMMUNICATION, MEMORY, COMPUTATION, OTHER = 0, 1, 2, 3
HTA_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")


def hta_type_codes(names: Sequence[str]) -> Any:
    """int8 array: the HTA kernel type code of each name (COMMUNICATION ... OTHER)."""
    return np.fromiter(
        (HTA_TYPES.index(hta_kernel_type(n)) for n in names), dtype=np.int8, count=len(names)
    )


# GEMM precision. A kernel name tells the math instruction or, failing that, the data types;
# the instruction decides, because one framework name says nothing about it: cuBLAS's
# `sm80_xmma_gemm_f32f32_..._ffma` kernels are xmma-framework GEMMs that run on CUDA-core FFMA.
_GEMM = re.compile(r"(?i)gemm|matmul|nvjet|cutlass")
# attention kernels (fmha, flash, sdpa) contain GEMMs but are not counted as GEMMs
_ATTENTION = re.compile(r"(?i)fmha|flash|sdpa|attention")
# tensor-core instructions: hmma/imma/qmma, Hopper wgmma/gmma, cutlass `tensorop`, mma shapes
# (s16816, h1688, i8816, s884, ...), and cuBLASLt's Hopper `nvjet_*` kernels, all wgmma
_TC_INSTRUCTION = re.compile(
    r"(?i)nvjet|[hiq]mma|gmma|tensorop|[hsi](?:16816|1688|8816|884)(?:gemm|_|$)"
)
# CUDA-core (SIMT) instructions: FFMA, cutlass `simt`, cuBLAS's classic `sgemm`
_CUDA_CORE_INSTRUCTION = re.compile(r"(?i)ffma|simt|sgemm")
# data types that cuBLAS/cutlass run on tensor cores
_LOW_PRECISION = re.compile(r"(?i)bf16|f16|fp16|half|hgemm|tf32|fp8|e4m3|e5m2|int8")
_FP32_TYPE = re.compile(r"(?i)gemm.*(?:f32|fp32|float)|(?:f32|fp32|float).*gemm")


def gemm_precision(name: str) -> str | None:
    """'tensor-core' or 'fp32' for GEMM kernels, None for anything else (docs/metrics.md).

    1. GEMM = gemm / matmul / nvjet / cutlass in the name, attention kernels excluded;
    2. a tensor-core instruction (hmma, imma, wgmma, gmma, tensorop, s16816-style shapes,
       nvjet) → tensor-core;
    3. a CUDA-core instruction (ffma, simt, sgemm) → fp32, unless a 16/8-bit type is named
       (a SIMT half GEMM is neither);
    4. else the types: bf16 / f16 / tf32 / fp8 / int8 → tensor-core; f32 / fp32 / float → fp32."""
    if not _GEMM.search(name) or _ATTENTION.search(name):
        return None
    if _TC_INSTRUCTION.search(name):
        return "tensor-core"
    low = _LOW_PRECISION.search(name) is not None
    if _CUDA_CORE_INSTRUCTION.search(name):
        return None if low else "fp32"
    if low:
        return "tensor-core"
    if _FP32_TYPE.search(name):
        return "fp32"
    return None


# ---- steps and data waits
_STEP_RE = re.compile(
    r"(?i)^\s*(?P<fam>profilerstep|train(?:ing)?[ _-]?step|step|iteration|iter)"
    r"\s*[#:_ -]?\s*(?P<num>\d+)?\s*$"
)
_DATA_WAIT_RE = re.compile(r"(?i)dataloader|data[_ ]?load|get_batch|next_batch|data_wait|^data$")


def step_family(name: str) -> str | None:
    """Family of a training-step range name (numbers stripped), or None."""
    m = _STEP_RE.match(name)
    if not m:
        return None
    fam = m.group("fam").lower().replace(" ", "_").replace("-", "_")
    return fam + ("_N" if m.group("num") else "")


def step_pattern(name: str) -> str | None:
    """`step_12` → `step_*`, `ProfilerStep#3 [gpu]` → `ProfilerStep#* [gpu]`: the name with its
    step number replaced by `*`, for numbered training-step ranges; None for any other name."""
    base, gpu = (name[:-6], " [gpu]") if name.endswith(" [gpu]") else (name, "")
    m = _STEP_RE.match(base)
    if not m or m.group("num") is None:
        return None
    return base[: m.start("num")] + "*" + base[m.end("num") :] + gpu


def group_step_ranges(stats: list[RangeStat]) -> list[RangeStat]:
    """Per-name range table with numbered step ranges folded into one `step_*` row each (count,
    total, min and max over the steps); the order is by total time, largest first."""
    out: dict[str, RangeStat] = {}
    for r in stats:
        key = step_pattern(r.name) or r.name
        g = out.get(key)
        if g is None:
            out[key] = r if key == r.name else r.model_copy(update={"name": key})
            continue
        count, total = g.count + r.count, g.total_ns + r.total_ns
        out[key] = RangeStat(
            name=key,
            count=count,
            total_ns=total,
            mean_ns=total / count,
            min_ns=min(g.min_ns, r.min_ns),
            max_ns=max(g.max_ns, r.max_ns),
        )
    return sorted(out.values(), key=lambda r: -r.total_ns)


def is_data_wait(name: str) -> bool:
    """True for ranges that say the step waits for input data."""
    return bool(_DATA_WAIT_RE.search(name))


# ---- the main thread and its blocking waits
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


# ---- statistics
def quantile(sorted_values: Sequence[int] | Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default method)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo]) + (float(sorted_values[hi]) - float(sorted_values[lo])) * frac


GAP_EDGES_NS = [0, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000]


def gap_stats(gap_starts: array[int], gap_ends: array[int]) -> GapStats:
    """Distribution of gap lengths (gap_ends[i] - gap_starts[i])."""
    n = len(gap_starts)
    if n == 0:
        return GapStats(buckets=_buckets([0] * len(GAP_EDGES_NS), [0] * len(GAP_EDGES_NS)))
    if HAVE_NUMPY:
        lens = np.frombuffer(gap_ends, dtype=np.int64) - np.frombuffer(gap_starts, dtype=np.int64)
        total = int(lens.sum())
        mx = int(lens.max())
        edges = np.array(GAP_EDGES_NS[1:])
        cnt = np.zeros(len(GAP_EDGES_NS), dtype=np.int64)
        tot = np.zeros(len(GAP_EDGES_NS), dtype=np.float64)
        # buckets in chunks (bounded temporaries; float sums of integer ns exact below 2**53)
        for lo in range(0, n, 1 << 20):
            part = lens[lo : lo + (1 << 20)]
            idx = np.searchsorted(edges, part, side="right")
            cnt += np.bincount(idx, minlength=len(GAP_EDGES_NS))
            tot += np.bincount(idx, weights=part, minlength=len(GAP_EDGES_NS))
        counts = [int(c) for c in cnt]
        totals = [int(t) for t in tot]
        # last: the quantiles partition `lens` in place instead of a copy
        p50, p90 = (float(v) for v in np.quantile(lens, [0.5, 0.9], overwrite_input=True))
    else:
        lens_l = sorted(e - s for s, e in zip(gap_starts, gap_ends, strict=True))
        total = sum(lens_l)
        p50, p90, mx = quantile(lens_l, 0.5), quantile(lens_l, 0.9), lens_l[-1]
        counts = [0] * len(GAP_EDGES_NS)
        totals = [0] * len(GAP_EDGES_NS)
        b = 0
        for v in lens_l:
            while b + 1 < len(GAP_EDGES_NS) and v >= GAP_EDGES_NS[b + 1]:
                b += 1
            counts[b] += 1
            totals[b] += v
    return GapStats(
        count=n,
        total_ns=total,
        mean_ns=total / n,
        p50_ns=p50,
        p90_ns=p90,
        max_ns=mx,
        buckets=_buckets(counts, totals),
    )


def _buckets(counts: list[int], totals: list[int]) -> list[Bucket]:
    out = []
    for i, lo in enumerate(GAP_EDGES_NS):
        hi = GAP_EDGES_NS[i + 1] if i + 1 < len(GAP_EDGES_NS) else None
        out.append(Bucket(lo_ns=lo, hi_ns=hi, count=counts[i], total_ns=totals[i]))
    return out


def timeline(
    gap_starts: array[int], gap_ends: array[int], start: int, end: int, buckets: int = 200
) -> Timeline:
    """Busy fraction per bucket: 1 - (idle time inside the bucket / bucket length)."""
    span = end - start
    if span <= 0:
        return Timeline()
    nb = max(1, min(buckets, span))
    width = math.ceil(span / nb)
    nb = math.ceil(span / width)
    idle = [0.0] * nb
    pairs: Iterable[tuple[int, int]] = zip(gap_starts, gap_ends, strict=True)
    if HAVE_NUMPY and len(gap_starts) > 1000:
        gs_all = np.frombuffer(gap_starts, dtype=np.int64)
        ge_all = np.frombuffer(gap_ends, dtype=np.int64)
        acc = np.zeros(nb, dtype=np.float64)
        cross_s, cross_e = [], []
        # in chunks (bounded temporaries); the float sums of integer ns stay exact below 2**53
        for lo in range(0, gs_all.size, 1 << 20):
            gs = gs_all[lo : lo + (1 << 20)]
            ge = ge_all[lo : lo + (1 << 20)]
            bs = (gs - start) // width
            same = bs == (ge - 1 - start) // width
            acc += np.bincount(bs[same], weights=(ge - gs)[same], minlength=nb)
            cross = ~same
            cross_s.extend(gs[cross].tolist())
            cross_e.extend(ge[cross].tolist())
        idle = [float(v) for v in acc]
        pairs = zip(cross_s, cross_e, strict=True)
    elif HAVE_NUMPY:  # plain ints whether the gaps are numpy views or arrays
        pairs = zip(
            np.asarray(gap_starts, dtype=np.int64).tolist(),
            np.asarray(gap_ends, dtype=np.int64).tolist(),
            strict=True,
        )
    for s, e in pairs:
        b = (s - start) // width
        while s < e:
            b_end = start + (b + 1) * width
            piece = min(e, b_end) - s
            idle[b] += piece
            s += piece
            b += 1
    frac = []
    for i in range(nb):
        lo = start + i * width
        w = min(width, end - lo)
        frac.append(round(max(0.0, 1.0 - idle[i] / w), 4) if w > 0 else 0.0)
    return Timeline(start_ns=start, bucket_ns=width, busy_fraction=frac)


# ---- the streaming union
@dataclass
class UnionResult:
    """Result of `union_pass` over one device's GPU activity."""

    start: int = 0
    end: int = 0
    busy: int = 0
    compute_busy: int = 0
    rows: int = 0
    gap_starts: array[int] = field(default_factory=lambda: array("q"))
    gap_ends: array[int] = field(default_factory=lambda: array("q"))

    @property
    def span(self) -> int:
        return self.end - self.start

    def temporal(self, basis: str) -> Temporal:
        span = self.span
        idle = span - self.busy
        non_compute = self.busy - self.compute_busy
        return Temporal(
            span_ns=span,
            idle_ns=idle,
            compute_ns=self.compute_busy,
            non_compute_ns=non_compute,
            idle_pct=pct(idle, span),
            compute_pct=pct(self.compute_busy, span),
            non_compute_pct=pct(non_compute, span),
            basis=basis,
        )


NEG = -(1 << 62)


def union_pass(
    rows: Iterable[tuple[int, int, int]], compute_of: Callable[[int], bool]
) -> UnionResult:
    """One pass over (start, end, tag) rows sorted by start.

    tag >= 0 is a kernel-name key whose class `compute_of(tag)` tells (cached here); tag < 0
    marks a memory operation (never compute). Returns busy time (union of all rows), compute
    time (union of compute rows) and the gaps between merged busy intervals."""
    res = UnionResult()
    gs = res.gap_starts
    ge = res.gap_ends
    gs_append = gs.append
    ge_append = ge.append
    cache: dict[int, bool] = {}
    cache_get = cache.get
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return res
    cs, ce, tag = first
    start = cs
    busy = 0
    ccs = cce = NEG
    cbusy = 0
    n = 1
    if tag >= 0 and compute_of(tag):
        cache[tag] = True
        ccs, cce = cs, ce
    for s, e, tag in it:
        if s > ce:
            gs_append(ce)
            ge_append(s)
            busy += ce - cs
            cs = s
            ce = e
        elif e > ce:
            ce = e
        if tag >= 0:
            c = cache_get(tag)
            if c is None:
                c = cache[tag] = compute_of(tag)
            if c:
                if s > cce:
                    cbusy += cce - ccs
                    ccs = s
                    cce = e
                elif e > cce:
                    cce = e
        n += 1
    busy += ce - cs
    cbusy += cce - ccs
    res.start, res.end, res.busy, res.compute_busy, res.rows = start, ce, busy, cbusy, n
    return res


# ---- unions of CPU-side ranges (data waits, main-thread waits)
def merge_intervals(starts: Iterable[int], ends: Iterable[int]) -> tuple[list[int], list[int]]:
    """The union of [start, end) intervals as sorted, disjoint intervals (touching ones merge).

    Nested or overlapping ranges (a `data` range around `enumerate(DataLoader)...`, a wait
    recorded on two levels) count once in any length taken from the result."""
    s_list, e_list = list(starts), list(ends)
    if HAVE_NUMPY and len(s_list) > 10_000:
        s = np.asarray(s_list, dtype=np.int64)
        e = np.asarray(e_list, dtype=np.int64)
        keep = e >= s
        s, e = s[keep], e[keep]
        if s.size == 0:
            return [], []
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        new = np.ones(s.size, dtype=bool)
        new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
        idx = np.flatnonzero(new)
        return s[idx].tolist(), np.maximum.reduceat(e, idx).tolist()
    ms: list[int] = []
    me: list[int] = []
    for s0, e0 in sorted((a, b) for a, b in zip(s_list, e_list, strict=True) if b >= a):
        if me and s0 <= me[-1]:
            if e0 > me[-1]:
                me[-1] = e0
        else:
            ms.append(s0)
            me.append(e0)
    return ms, me


def covered_ns(ms: Sequence[int], me: Sequence[int], lo: int, hi: int) -> int:
    """Length of the merged intervals (ms, me) that lies inside [lo, hi)."""
    if HAVE_NUMPY and len(ms) > 10_000:
        s = np.asarray(ms, dtype=np.int64)
        e = np.asarray(me, dtype=np.int64)
        return int((np.minimum(e, hi) - np.maximum(s, lo)).clip(min=0).sum())
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in zip(ms, me, strict=True))


def union_in_span(ms: Sequence[int], me: Sequence[int], lo: int, hi: int) -> int:
    """A CPU-side union's length as a share of the GPU span sees it: the part inside [lo, hi),
    so it is never more than the span; with no span (no GPU activity to clip to), all of it."""
    if hi > lo:
        return covered_ns(ms, me, lo, hi)
    return sum(e - s for s, e in zip(ms, me, strict=True))


def pct(part: float, whole: float) -> float:
    """part/whole in percent, 0 when whole is 0."""
    return 100.0 * part / whole if whole else 0.0


def step_stats(ranges: Iterable[tuple[str, int, int]]) -> StepStats | None:
    """Step-time statistics from (name, start, duration) ranges; the largest family wins."""
    fams: dict[str, list[tuple[int, int]]] = {}
    for name, start, dur in ranges:
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


# ---- rank from file names
# explicit rank words anywhere: sft_rank12, rank-3, trace_procid-2, proc5
_RANK_WORD = re.compile(r"(?i)(?:rank|procid|proc)[_\-.]?(\d+)")
# `_r3`: a lone r before the number, between separators
_RANK_R = re.compile(r"(?i)(?:^|[._\-])r(\d+)(?=[._\-]|$)")
# gh-run's per-rank names (`-o name.%q{SLURM_PROCID}` gives sft.3.nsys-rep): a short number
# after a last `.`; a longer one is a timestamp (PyTorch's default
# `<worker>.<epoch_ms>.pt.trace.json`), and one after `_` or `-` as likely a job id
# (`sft_42.sqlite`, `slurm-1234.json`): neither is a rank
_RANK_SUFFIX = re.compile(r"\.(\d{1,4})$")
_STRIP = (".gz", ".json", ".sqlite", ".nsys-rep", ".trace", ".pt")


def rank_from_name(path: Path) -> int | None:
    """Rank encoded in a file name, or None.

    Rules, first match wins: `rank<N>` / `procid<N>` / `proc<N>` anywhere (`sft_rank3.sqlite`,
    `rank-3.json`); `r<N>` between separators (`sft_r3.json`); a number of at most four digits
    after the last `.` once known suffixes are stripped (`sft.3.sqlite`: what
    `-o name.%q{SLURM_PROCID}` gives). Never a longer number nor one after `_` or `-`:
    `host.1623143089861.pt.trace.json` (PyTorch's default name ends in a timestamp),
    `worker0.1623143089861.pt.trace.json`, `sft_4242817.sqlite` and `sft_42.sqlite` (job ids)
    say nothing about the rank."""
    name = path.name
    m = _RANK_WORD.search(name)
    if m:
        return int(m.group(1))
    stem = name
    changed = True
    while changed:
        changed = False
        for suf in _STRIP:
            if stem.lower().endswith(suf):
                stem = stem[: -len(suf)]
                changed = True
    m = _RANK_R.search(stem) or _RANK_SUFFIX.search(stem)
    return int(m.group(1)) if m else None


def union_arrays(starts: Any, ends: Any, compute: Any) -> UnionResult:
    """The union of intervals given as numpy int64 arrays (any order) and a bool compute mask.

    Same result as `union_pass` on the rows sorted by start (stable sort, like HTA)."""
    res = UnionResult()
    if not bool((ends >= starts).all()):
        keep = ends >= starts
        starts, ends, compute = starts[keep], ends[keep], compute[keep]
    if starts.size == 0:
        return res
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = ends[order]
    c = compute[order]
    del order
    _, _, cbusy = _merge_sorted(s[c], e[c])
    del c
    gs, ge, busy = _merge_sorted(s, e)
    res.start = int(s[0])
    res.end = int(e.max())
    res.busy = busy
    res.compute_busy = cbusy
    res.rows = int(s.size)
    res.gap_starts = array("q", gs.astype(np.int64).tobytes())
    res.gap_ends = array("q", ge.astype(np.int64).tobytes())
    return res


def small_groups(keys: Any) -> tuple[Any, Any]:
    """(distinct keys, each row's index into them), like `np.unique(..., return_inverse=True)`
    but linear (a bincount and a lookup table) when the keys are small non-negative integers
    (streams, devices, string ids)."""
    if keys.size and int(keys.min()) >= 0 and int(keys.max()) < 1 << 24:
        present = np.flatnonzero(np.bincount(keys))
        lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        return present, lookup[keys]
    keys_u, inv = np.unique(keys, return_inverse=True)
    return keys_u, inv.reshape(-1)


def distinct(keys: Any) -> list[int]:
    """The distinct values of an integer column, ascending (`np.unique(keys).tolist()`, but
    linear, a bincount, when they are small non-negative integers: devices, string ids)."""
    if keys.size and int(keys.min()) >= 0 and int(keys.max()) < 1 << 24:
        return [int(k) for k in np.flatnonzero(np.bincount(keys))]
    return [int(k) for k in np.unique(keys).tolist()]


# rows per step of `groups_sorted` (its temporaries: ~30 bytes a row)
GROUP_CHUNK_ROWS = 1 << 20


def groups_sorted(s: Any, e: Any, mask: Any = None) -> tuple[Any, Any]:
    """Merged intervals of rows sorted by start (HTA's `merge_kernel_intervals`: a row opens a
    new group when it starts after the running maximum of the previous rows' ends, so touching
    rows merge; a group spans (its first start, its max end)), of the rows `mask` selects (all
    without one). Every row's end is >= its start (the callers keep those rows only).

    In steps of GROUP_CHUNK_ROWS rows, the running maximum carried over, so that temporaries
    stay bounded (millions of rows on a long export). A group's max end is the running maximum
    before the next group opens (every earlier group ended before it started), the last one's
    the maximum of all."""
    empty = np.zeros(0, dtype=np.int64)
    starts: list[Any] = []
    before: list[Any] = []  # the running maximum before each group opens
    run: Any = None
    for lo in range(0, int(s.size), GROUP_CHUNK_ROWS):
        cs, ce = s[lo : lo + GROUP_CHUNK_ROWS], e[lo : lo + GROUP_CHUNK_ROWS]
        if mask is not None:
            m = mask[lo : lo + GROUP_CHUNK_ROWS]
            cs, ce = cs[m], ce[m]
        if cs.size == 0:
            continue
        cm = np.maximum.accumulate(ce)
        if run is not None:
            np.maximum(cm, run, out=cm)
        new = np.empty(cs.size, dtype=bool)
        new[0] = run is None or bool(cs[0] > run)
        np.greater(cs[1:], cm[:-1], out=new[1:])
        idx = np.flatnonzero(new)
        starts.append(cs[idx])
        prev = cm[np.maximum(idx - 1, 0)]
        if idx.size and idx[0] == 0:
            prev[0] = run if run is not None else 0  # the first group's is never read
        before.append(prev)
        run = cm[-1]
        del cs, ce, cm, new, idx
    if run is None:
        return empty, empty
    g0 = np.concatenate(starts)
    del starts
    g1 = np.empty(g0.size, dtype=np.int64)
    pos = 0
    for p in before:  # shifted by one group: each group's end is the next one's `before`
        g1[max(pos - 1, 0) : pos - 1 + p.size] = p[1:] if pos == 0 else p
        pos += p.size
    g1[-1] = run
    return g0, g1


def union_of_sorted(s: Any, e: Any) -> UnionResult:
    """`UnionResult` (span, busy, gaps) of rows already sorted by start."""
    return union_from_groups(*groups_sorted(s, e), int(s.size))


def union_from_groups(g0: Any, g1: Any, rows: int) -> UnionResult:
    """`UnionResult` of merged intervals (`groups_sorted`): the gaps lie between them."""
    res = UnionResult()
    if g0.size == 0:
        return res
    res.start = int(g0[0])
    res.end = int(g1[-1])
    res.busy = int((g1 - g0).sum())
    res.rows = rows
    # views of the merged intervals (no copy: millions of gaps on a long export)
    res.gap_starts = g1[:-1].astype(np.int64, copy=False)
    res.gap_ends = g0[1:].astype(np.int64, copy=False)
    return res


def intersect(a0: Any, a1: Any, b0: Any, b1: Any) -> tuple[Any, Any]:
    """The intersection of two unions of disjoint intervals sorted by start, as disjoint
    intervals sorted by start: each interval of the shorter list against the run of the other's
    intervals that overlap it (two binary searches), so the pairs, at most len(a) + len(b), are
    the only arrays built (no sort of the bounds)."""
    if a0.size == 0 or b0.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if a0.size > b0.size:  # the pieces, disjoint and sorted, are the same either way round
        a0, a1, b0, b1 = b0, b1, a0, a1
    lo = np.searchsorted(b1, a0, side="right")  # first b ending after a starts
    cnt = np.searchsorted(b0, a1, side="left") - lo  # b starting before a ends
    np.maximum(cnt, 0, out=cnt)
    ii = np.repeat(np.arange(a0.size), cnt)
    jj = np.arange(ii.size) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
    del lo, cnt
    c0 = np.maximum(a0[ii], b0[jj])
    c1 = np.minimum(a1[ii], b1[jj])
    del ii, jj
    keep = c1 > c0
    return c0[keep], c1[keep]


def _merge_sorted(s: Any, e: Any) -> tuple[Any, Any, int]:
    if s.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, 0
    cm = np.maximum.accumulate(e)
    new = s[1:] > cm[:-1]
    gs = cm[:-1][new]
    ge = s[1:][new]
    busy = int(cm[-1] - s[0]) - int((ge - gs).sum())
    return gs, ge, busy


def union_lists(starts: list[int], ends: list[int], compute: list[bool]) -> UnionResult:
    """`union_arrays` for plain lists: numpy when available, else a sort + `union_pass`."""
    if HAVE_NUMPY:
        return union_arrays(
            np.asarray(starts, dtype=np.int64),
            np.asarray(ends, dtype=np.int64),
            np.asarray(compute, dtype=bool),
        )
    order = sorted((i for i in range(len(starts)) if ends[i] >= starts[i]), key=starts.__getitem__)
    return union_pass(
        ((starts[i], ends[i], 1 if compute[i] else -1) for i in order), lambda tag: tag == 1
    )
