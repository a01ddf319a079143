"""Side-by-side comparison of runs, with deltas against the first (the baseline).

Rows are grouped like the seed's "with vs without offloading" table: GPU time, kernel
continuity (idle gaps), GPU memory, memory traffic, CPU activity, sync overhead, steps,
communication (HTA's kernel types, overlap and idle breakdown; the cross-rank skews), kernels.
Per-rank numbers are averaged over ranks (the `Aggregate` means); counts and bytes are summed.
delta_abs = value - baseline; delta_rel_pct = 100 * delta_abs / |baseline| (None when the
baseline is 0, near zero against the value (`NEAR_ZERO`: a change beyond that factor is news by
its size, not its digits: 8 bytes to 2.4 GB is not "+30,194,585,930 %"), or a value is
missing); `change` is how a reader sees it (`change_text`).
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.analysis.changes import WhatChanged, what_changed
from orchestrator.analysis.labels import human
from orchestrator.analysis.metrics import Metrics
from orchestrator.base import Strict

WAIT_FUNCS = ("pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait")
NEAR_ZERO = 1000.0  # a value this many times its baseline: the baseline counts as ~0


class ComparisonRow(Strict):
    """One metric across runs."""

    group: str
    metric: str
    unit: str
    values: list[float | None]
    delta_abs: list[float | None]
    delta_rel_pct: list[float | None]
    # the change against the baseline as it reads: `+12.3 %`, `×85`, `new`, `from ~0 (+2.4 GiB)`
    change: list[str] = []


class Comparison(Strict):
    """Runs side by side; the first is the baseline. `changes`: what changed in each other
    run against it (phases, kernels, metric groups, the finding in one sentence)."""

    labels: list[str]
    rows: list[ComparisonRow]
    changes: list[WhatChanged] = []


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _per_rank(f: Callable[..., float | None]) -> Callable[[Metrics], float | None]:
    def get(m: Metrics) -> float | None:
        vals = [v for r in m.ranks if (v := f(r)) is not None]
        return _mean([float(v) for v in vals])

    return get


def _wait_ns(m: Metrics) -> float:
    return float(
        sum(
            fn.total_ns
            for r in m.ranks
            for t in r.threads
            for fn in t.functions
            if fn.name in WAIT_FUNCS
        )
    )


def _thread_ns(name: str, field: str) -> Callable[[Metrics], float | None]:
    def get(m: Metrics) -> float | None:
        vals = [getattr(t, field) for r in m.ranks for t in r.threads if t.name == name]
        return float(sum(vals)) if vals else None

    return get


def _main_thread(m: Metrics, what: str) -> float | None:
    """Seconds the main threads of all ranks spent in OS-runtime calls ("osrt") or in blocking
    waits inside the span ("wait")."""
    if what == "wait":
        vals = [r.main_thread_wait_ns for r in m.ranks if r.main_thread_wait_ns is not None]
    else:
        vals = [t.osrt_ns for r in m.ranks for t in r.threads if t.main]
    return sum(vals) / 1e9 if vals else None


def _gib(v: int | None) -> float | None:
    return v / 2**30 if v is not None else None


ROWS: list[tuple[str, str, str, Callable[[Metrics], float | None]]] = [
    ("GPU time", "span", "s", lambda m: m.aggregate.span_ns / 1e9),
    ("GPU time", "busy", "%", lambda m: m.aggregate.busy_pct_mean),
    ("GPU time", "idle", "%", lambda m: m.aggregate.idle_pct_mean),
    ("GPU time", "HTA compute", "%", lambda m: m.aggregate.temporal_compute_pct_mean),
    ("GPU time", "HTA non-compute", "%", lambda m: m.aggregate.temporal_non_compute_pct_mean),
    ("GPU time", "HTA idle", "%", lambda m: m.aggregate.temporal_idle_pct_mean),
    ("GPU time", "kernels share of GPU activity", "%", lambda m: m.aggregate.kernel_pct_mean),
    ("GPU time", "memcpy share of GPU activity", "%", lambda m: m.aggregate.memcpy_pct_mean),
    ("Kernel continuity", "idle gaps", "count", lambda m: float(m.aggregate.idle_gaps)),
    (
        "Kernel continuity",
        "idle gaps per second",
        "1/s",
        _per_rank(lambda r: r.idle_gaps.count / (r.span_ns / 1e9) if r.span_ns else None),
    ),
    ("Kernel continuity", "gap mean", "us", _per_rank(lambda r: r.idle_gaps.mean_ns / 1e3)),
    ("Kernel continuity", "gap p50", "us", _per_rank(lambda r: r.idle_gaps.p50_ns / 1e3)),
    ("Kernel continuity", "gap p90", "us", _per_rank(lambda r: r.idle_gaps.p90_ns / 1e3)),
    ("Kernel continuity", "gap max", "ms", _per_rank(lambda r: r.idle_gaps.max_ns / 1e6)),
    ("GPU memory", "peak GPU memory", "GiB", lambda m: _gib(m.aggregate.peak_gpu_memory_bytes)),
    (
        "GPU memory",
        "peak pinned host memory",
        "GiB",
        lambda m: _gib(m.aggregate.peak_pinned_memory_bytes),
    ),
    (
        "GPU memory",
        "peak managed memory",
        "GiB",
        lambda m: _gib(m.aggregate.peak_managed_memory_bytes),
    ),
    ("Memory traffic", "HtoD", "GiB", lambda m: m.aggregate.htod_bytes / 2**30),
    ("Memory traffic", "DtoH", "GiB", lambda m: m.aggregate.dtoh_bytes / 2**30),
    (
        "Memory traffic",
        "UM share of memory operations",
        "%",
        lambda m: m.aggregate.um_share_of_memory_ops_pct_mean,
    ),
    ("CPU activity", "cpu_op time (Kineto)", "s", lambda m: m.aggregate.cpu_op_ns / 1e9),
    ("CPU activity", "OS-runtime time (nsys)", "s", lambda m: m.aggregate.osrt_ns / 1e9),
    ("CPU activity", "pthread_cond_wait & sem waits", "s", lambda m: _wait_ns(m) / 1e9),
    # the seed's pt_main_thread: the main thread as identified (nsys names it after the
    # process, e.g. python3, a name it shares with the OpenMP workers)
    ("CPU activity", "main thread OS-runtime", "s", lambda m: _main_thread(m, "osrt")),
    ("CPU activity", "main thread blocking waits", "s", lambda m: _main_thread(m, "wait")),
    (
        "CPU activity",
        "pt_autograd_0 OS-runtime",
        "s",
        lambda m: v / 1e9 if (v := _thread_ns("pt_autograd_0", "osrt_ns")(m)) else None,
    ),
    ("Sync overhead", "sync API time", "s", lambda m: m.aggregate.sync_ns / 1e9),
    (
        "Sync overhead",
        "sync API share of span",
        "%",
        _per_rank(lambda r: 100 * r.sync.wall_ns / r.span_ns if r.span_ns else None),
    ),
    (
        "Steps",
        "step time mean",
        "ms",
        lambda m: m.aggregate.step_mean_ns / 1e6 if m.aggregate.step_mean_ns else None,
    ),
    (
        "Steps",
        "step time p90",
        "ms",
        _per_rank(lambda r: r.steps.p90_ns / 1e6 if r.steps else None),
    ),
    ("Steps", "step time median (workload)", "s", lambda m: m.aggregate.workload_step_median_s),
    ("Steps", "throughput (workload)", "tok/s", lambda m: m.aggregate.tokens_per_s),
    (
        "Communication",
        "communication share of kernel time (HTA)",
        "%",
        lambda m: (
            sum(v for k, v in m.aggregate.kernel_types.items() if "COMMUNICATION" in k)
            if m.aggregate.kernel_types
            else None
        ),
    ),
    (
        "Communication",
        "comm/comp overlap (HTA)",
        "%",
        lambda m: m.aggregate.comm_comp_overlap_pct_mean,
    ),
    (
        "Communication",
        "idle: host wait share (HTA)",
        "%",
        _per_rank(lambda r: r.idle_breakdown.host_wait_pct if r.idle_breakdown else None),
    ),
    (
        "Communication",
        "collective start skew, median",
        "us",
        lambda m: s.median_ns / 1e3 if (s := m.cross_rank.collective_start_skew) else None,
    ),
    (
        "Communication",
        "step time skew, median",
        "us",
        lambda m: s.median_ns / 1e3 if (s := m.cross_rank.step_time_skew) else None,
    ),
    ("Kernels", "kernels", "count", lambda m: float(m.aggregate.kernels)),
    ("Kernels", "fp32 GEMM share of kernel time", "%", _per_rank(lambda r: r.fp32_gemm_pct)),
]


def change_text(v: float | None, base: float | None, unit: str) -> str:
    """The change of `v` against `base` for a reader: a percentage, a factor beyond ×10,
    "new" from a zero baseline, "from ~0" plus the absolute change from a near-zero one."""
    if v is None or base is None:
        return "-"
    if v == base:
        return "="
    if base == 0:
        return "new"
    ratio = v / base
    if abs(ratio) >= NEAR_ZERO:
        return f"from ~0 ({'+' if v > base else '-'}{human(abs(v - base), unit)})"
    if ratio >= 10:
        return f"×{ratio:,.0f}"
    if 0 < ratio <= 0.1:
        return f"×1/{1 / ratio:,.0f}" if ratio * NEAR_ZERO > 1 else "to ~0"
    return f"{100 * (ratio - 1):+.1f} %"


def compare(metrics: list[Metrics], labels: list[str] | None = None) -> Comparison:
    """Rows of every metric in ROWS for each run, with deltas against the first."""
    labels = labels or [m.label or f"run {i}" for i, m in enumerate(metrics)]
    rows = []
    for group, name, unit, get in ROWS:
        values = [get(m) for m in metrics]
        base = values[0] if values else None
        d_abs: list[float | None] = []
        d_rel: list[float | None] = []
        for v in values:
            if v is None or base is None:
                d_abs.append(None)
                d_rel.append(None)
            else:
                d_abs.append(v - base)
                near_zero = not base or abs(v) >= NEAR_ZERO * abs(base)
                d_rel.append(None if near_zero else 100.0 * (v - base) / abs(base))
        rows.append(
            ComparisonRow(
                group=group,
                metric=name,
                unit=unit,
                values=values,
                delta_abs=d_abs,
                delta_rel_pct=d_rel,
                change=[change_text(v, base, unit) for v in values],
            )
        )
    changes = []
    for lab, m in zip(labels[1:], metrics[1:], strict=True):
        w = what_changed(metrics[0], m)
        changes.append(w.model_copy(update={"label": lab, "baseline_label": labels[0]}))
    return Comparison(labels=labels, rows=rows, changes=changes)
