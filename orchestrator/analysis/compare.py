"""Side-by-side comparison of runs, with deltas against the first (the baseline).

Rows are grouped like the seed's "with vs without offloading" table: GPU time, kernel
continuity (idle gaps), GPU memory, memory traffic, CPU activity, sync overhead, steps,
communication (HTA's kernel types, overlap and idle breakdown; the cross-rank skews), kernels.
Per-rank numbers are averaged over ranks (the `Aggregate` means); counts and bytes are summed.
delta_abs = value - baseline; delta_rel_pct = 100 * delta_abs / |baseline| (None when the
baseline is 0, near zero against the value (`labels.NEAR_ZERO`: a change beyond that factor is
news by its size, not its digits: 8 bytes to 2.4 GB is not "+30,194,585,930 %"), or a value is
missing); `change` is how a reader sees it (`labels.change_text`).

What a run's sources could not measure is None with `measured` False ("not measured", never a
real 0): CPU operators only in PyTorch-profiler traces, OS-runtime calls only in nsys exports
that traced them, Unified Memory only in nsys exports, every GPU row only where the trace holds
GPU activity, the workload's own numbers only beside its metrics.json. A row whose runs measured
it in different ways (`Metric.basis`: HTA's window, the step ranges, where the peak memory came
from) is not compared (`comparable` False, change "not comparable") and says why in `notes`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from orchestrator.analysis.changes import WhatChanged, what_changed
from orchestrator.analysis.labels import NEAR_ZERO, change_text
from orchestrator.analysis.metrics import Metrics
from orchestrator.base import Strict

__all__ = ["NEAR_ZERO", "Comparison", "ComparisonRow", "change_text", "compare"]

WAIT_FUNCS = ("pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait")


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
    # False where a run's sources cannot measure this metric (its value is None: "not measured")
    measured: list[bool] = []
    # False where a run measured it in another way than the baseline (`notes` says how)
    comparable: list[bool] = []


class Comparison(Strict):
    """Runs side by side; the first is the baseline. `changes`: what changed in each other
    run against it (phases, kernels, metric groups, the finding in one sentence)."""

    labels: list[str]
    rows: list[ComparisonRow]
    changes: list[WhatChanged] = []
    # what a reader must know first: sources of different kinds, rows measured differently,
    # what the two idle figures count
    notes: list[str] = []


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


def _gpu(m: Metrics) -> bool:
    """The trace holds kernels: the GPU rows are measured (without one, the span of a few
    copies is no window to judge GPU time by)."""
    return any(r.activity.kernel_count for r in m.ranks)


def _activity(m: Metrics) -> bool:
    """The trace holds GPU activity of any kind: its copies are measured."""
    return any(
        r.activity.kernel_count + r.activity.memcpy_count + r.activity.memset_count for r in m.ranks
    )


def _kineto(m: Metrics) -> bool:
    return any(s.kind == "kineto-json" for s in m.sources)


def _osrt(m: Metrics) -> bool:
    """An nsys export that traced OS-runtime calls."""
    return any(s.kind == "nsys-sqlite" and "OSRT_API" not in s.missing for s in m.sources)


def _um(m: Metrics) -> bool:
    """Unified-Memory migrations are visible: nsys copy kinds (Kineto does not see them)."""
    return _activity(m) and any(s.kind == "nsys-sqlite" for s in m.sources)


def _runtime(m: Metrics) -> bool:
    """CUDA runtime calls were traced (the synchronisation calls)."""
    return _gpu(m) and not any("CUPTI_ACTIVITY_KIND_RUNTIME" in s.missing for s in m.sources)


def _workload(m: Metrics) -> bool:
    return any(r.workload is not None for r in m.ranks)


def _hta_basis(m: Metrics) -> str | None:
    bases = sorted({r.temporal.basis for r in m.ranks if r.temporal.basis})
    return "; ".join(bases) or None


def _step_basis(m: Metrics) -> str | None:
    fams = sorted({r.steps.family for r in m.ranks if r.steps})
    return f"step ranges {', '.join(fams)}" if fams else None


def _peak_basis(m: Metrics) -> str | None:
    # "nsys memory-usage events: device memory (…), held at capture start" → its source
    srcs = sorted({s.split(":")[0] for r in m.ranks if (s := r.peak_gpu_memory_source)})
    return ", ".join(srcs) or None


class Metric(NamedTuple):
    """One comparison row: where it sits, its unit, how a run's value is read, whether the
    run's sources measure it at all (`measured`; None: whenever a value is there), and how it
    was measured (`basis`; runs whose bases differ are not compared)."""

    group: str
    metric: str
    unit: str
    get: Callable[[Metrics], float | None]
    measured: Callable[[Metrics], bool] | None = None
    basis: Callable[[Metrics], str | None] | None = None


ROWS: list[Metric] = [
    Metric("GPU time", "span", "s", lambda m: m.aggregate.span_ns / 1e9, _gpu),
    Metric("GPU time", "busy", "%", lambda m: m.aggregate.busy_pct_mean, _gpu),
    Metric("GPU time", "idle", "%", lambda m: m.aggregate.idle_pct_mean, _gpu),
    Metric("GPU time", "HTA compute", "%", lambda m: m.aggregate.temporal_compute_pct_mean,
           _gpu, _hta_basis),
    Metric("GPU time", "HTA non-compute", "%",
           lambda m: m.aggregate.temporal_non_compute_pct_mean, _gpu, _hta_basis),
    Metric("GPU time", "HTA idle", "%", lambda m: m.aggregate.temporal_idle_pct_mean, _gpu,
           _hta_basis),
    Metric("GPU time", "kernels share of GPU activity", "%",
           lambda m: m.aggregate.kernel_pct_mean, _gpu),
    Metric("GPU time", "memcpy share of GPU activity", "%",
           lambda m: m.aggregate.memcpy_pct_mean, _gpu),
    Metric("Kernel continuity", "idle gaps", "count", lambda m: float(m.aggregate.idle_gaps),
           _gpu),
    Metric(
        "Kernel continuity", "idle gaps per second", "1/s",
        _per_rank(lambda r: r.idle_gaps.count / (r.span_ns / 1e9) if r.span_ns else None), _gpu,
    ),
    Metric("Kernel continuity", "gap mean", "us",
           _per_rank(lambda r: r.idle_gaps.mean_ns / 1e3), _gpu),
    Metric("Kernel continuity", "gap p50", "us",
           _per_rank(lambda r: r.idle_gaps.p50_ns / 1e3), _gpu),
    Metric("Kernel continuity", "gap p90", "us",
           _per_rank(lambda r: r.idle_gaps.p90_ns / 1e3), _gpu),
    Metric("Kernel continuity", "gap max", "ms",
           _per_rank(lambda r: r.idle_gaps.max_ns / 1e6), _gpu),
    Metric("GPU memory", "peak GPU memory", "GiB",
           lambda m: _gib(m.aggregate.peak_gpu_memory_bytes), None, _peak_basis),
    # pinned and managed memory: nsys memory-usage events only
    Metric("GPU memory", "peak pinned host memory", "GiB",
           lambda m: _gib(m.aggregate.peak_pinned_memory_bytes), _um),
    Metric("GPU memory", "peak managed memory", "GiB",
           lambda m: _gib(m.aggregate.peak_managed_memory_bytes), _um),
    Metric("Memory traffic", "HtoD", "GiB", lambda m: m.aggregate.htod_bytes / 2**30, _activity),
    Metric("Memory traffic", "DtoH", "GiB", lambda m: m.aggregate.dtoh_bytes / 2**30, _activity),
    Metric("Memory traffic", "UM share of memory operations", "%",
           lambda m: m.aggregate.um_share_of_memory_ops_pct_mean, _um),
    Metric("CPU activity", "cpu_op time (Kineto)", "s", lambda m: m.aggregate.cpu_op_ns / 1e9,
           _kineto),
    Metric("CPU activity", "OS-runtime time (nsys)", "s", lambda m: m.aggregate.osrt_ns / 1e9,
           _osrt),
    Metric("CPU activity", "pthread_cond_wait & sem waits", "s", lambda m: _wait_ns(m) / 1e9,
           _osrt),
    # the seed's pt_main_thread: the main thread as identified (nsys names it after the
    # process, e.g. python3, a name it shares with the OpenMP workers)
    Metric("CPU activity", "main thread OS-runtime", "s", lambda m: _main_thread(m, "osrt"),
           _osrt),
    Metric("CPU activity", "main thread blocking waits", "s",
           lambda m: _main_thread(m, "wait"), _osrt),
    Metric(
        "CPU activity", "pt_autograd_0 OS-runtime", "s",
        lambda m: v / 1e9 if (v := _thread_ns("pt_autograd_0", "osrt_ns")(m)) else None, _osrt,
    ),
    Metric("Sync overhead", "sync API time", "s", lambda m: m.aggregate.sync_ns / 1e9,
           _runtime),
    Metric(
        "Sync overhead", "sync API share of span", "%",
        _per_rank(lambda r: 100 * r.sync.wall_ns / r.span_ns if r.span_ns else None), _runtime,
    ),
    Metric("Steps", "step time mean", "ms",
           _per_rank(lambda r: r.steps.mean_ns / 1e6 if r.steps else None), None, _step_basis),
    Metric("Steps", "step time p90", "ms",
           _per_rank(lambda r: r.steps.p90_ns / 1e6 if r.steps else None), None, _step_basis),
    Metric("Steps", "step time median (workload)", "s",
           lambda m: m.aggregate.workload_step_median_s, _workload),
    Metric("Steps", "throughput (workload)", "tok/s", lambda m: m.aggregate.tokens_per_s,
           _workload),
    Metric(
        "Communication", "communication share of kernel time (HTA)", "%",
        lambda m: (
            sum(v for k, v in m.aggregate.kernel_types.items() if "COMMUNICATION" in k)
            if m.aggregate.kernel_types
            else None
        ),
        _gpu,
    ),
    Metric("Communication", "comm/comp overlap (HTA)", "%",
           lambda m: m.aggregate.comm_comp_overlap_pct_mean, _gpu),
    Metric(
        "Communication", "idle: host wait share (HTA)", "%",
        _per_rank(lambda r: r.idle_breakdown.host_wait_pct if r.idle_breakdown else None), _gpu,
    ),
    Metric(
        "Communication", "collective start skew, median", "us",
        lambda m: s.median_ns / 1e3 if (s := m.cross_rank.collective_start_skew) else None,
    ),
    Metric(
        "Communication", "step time skew, median", "us",
        lambda m: s.median_ns / 1e3 if (s := m.cross_rank.step_time_skew) else None,
    ),
    Metric("Kernels", "kernels", "count", lambda m: float(m.aggregate.kernels), _gpu),
    Metric("Kernels", "fp32 GEMM share of kernel time", "%",
           _per_rank(lambda r: r.fp32_gemm_pct), _gpu),
]  # fmt: skip

SOURCE_NAMES = {"nsys-sqlite": "an nsys export", "kineto-json": "a PyTorch-profiler trace"}


def _sources(m: Metrics) -> str:
    kinds = sorted({s.kind for s in m.sources})
    return " and ".join(SOURCE_NAMES.get(k, k) for k in kinds) or "no input"


def _notes(
    metrics: list[Metrics],
    labels: list[str],
    rows: list[ComparisonRow],
    bases: dict[str, list[str | None]],
) -> list[str]:
    """The sources' kinds when they differ, the rows measured differently (and how), the
    rows a source could not measure."""
    out: list[str] = []
    kinds = [frozenset(s.kind for s in m.sources) for m in metrics]
    if len(set(kinds)) > 1:
        said = "; ".join(f"{lab} is {_sources(m)}" for lab, m in zip(labels, metrics, strict=True))
        out.append(
            f"the sources differ ({said}): their numbers come from different recorders, so"
            " compare them as a rough guide; rows measured differently are marked not comparable"
        )
    differ: dict[tuple[str | None, ...], list[str]] = {}
    for row in rows:
        if not all(row.comparable):
            differ.setdefault(tuple(bases[row.metric]), []).append(row.metric)
    for how_each, names in differ.items():
        how = "; ".join(f"{lab}: {b}" for lab, b in zip(labels, how_each, strict=True) if b)
        out.append(f"not comparable, measured differently: {', '.join(names)} ({how})")
    unmeasured = [row.metric for row in rows if not all(row.measured) and any(row.measured)]
    if unmeasured:
        out.append(
            "not measured by every run's sources (shown as not measured, never as 0): "
            + ", ".join(unmeasured)
        )
    return out


def compare(metrics: list[Metrics], labels: list[str] | None = None) -> Comparison:
    """Rows of every metric in ROWS for each run, with deltas against the first."""
    from orchestrator.analysis.verdict import idle_figures

    labels = labels or [m.label or f"run {i}" for i, m in enumerate(metrics)]
    rows = []
    bases: dict[str, list[str | None]] = {}
    for row in ROWS:
        measured = [row.measured(m) if row.measured else True for m in metrics]
        values = [row.get(m) if ok else None for m, ok in zip(metrics, measured, strict=True)]
        basis = [row.basis(m) if row.basis else None for m in metrics]
        bases[row.metric] = basis
        comparable = [
            i == 0 or basis[i] is None or basis[0] is None or basis[i] == basis[0]
            for i in range(len(metrics))
        ]
        base = values[0] if values else None
        d_abs: list[float | None] = []
        d_rel: list[float | None] = []
        change: list[str] = []
        for v, same in zip(values, comparable, strict=True):
            if v is None or base is None or not same:
                d_abs.append(None)
                d_rel.append(None)
            else:
                d_abs.append(v - base)
                near_zero = not base or abs(v) >= NEAR_ZERO * abs(base)
                d_rel.append(None if near_zero else 100.0 * (v - base) / abs(base))
            change.append(change_text(v, base, row.unit) if same else "not comparable")
        rows.append(
            ComparisonRow(
                group=row.group,
                metric=row.metric,
                unit=row.unit,
                values=values,
                delta_abs=d_abs,
                delta_rel_pct=d_rel,
                change=change,
                measured=measured,
                comparable=comparable,
            )
        )
    changes = []
    for lab, m in zip(labels[1:], metrics[1:], strict=True):
        w = what_changed(metrics[0], m)
        changes.append(w.model_copy(update={"label": lab, "baseline_label": labels[0]}))
    notes = _notes(metrics, labels, rows, bases)
    for lab, m in zip(labels, metrics, strict=True):
        said = idle_figures(m)
        if said is not None and said.differ:
            notes.append(f"{lab}: {said.text}")
    return Comparison(labels=labels, rows=rows, changes=changes, notes=notes)


# the rows a reader looks at first (a report's short table), in this order: the step (the
# workload's own timing, else the traced steps), throughput, how idle the GPU is and why
# (copies, syncs), memory, communication
KEY_METRICS = (
    "step time median (workload)",
    "step time mean",
    "throughput (workload)",
    "idle",
    "memcpy share of GPU activity",
    "sync API share of span",
    "peak GPU memory",
    "communication share of kernel time (HTA)",
    "comm/comp overlap (HTA)",
)
MOVED_PCT = 25.0  # beside the key rows, the other rows that moved at least this much
MOVED_ROWS = 3  # and at most this many of them
KEY_ROWS = 10


def key_rows(c: Comparison, limit: int = KEY_ROWS) -> list[ComparisonRow]:
    """What matters, for a report's short table: the `KEY_METRICS` some run measured (the
    workload's step time, or else the traced steps'), then up to `MOVED_ROWS` other rows that
    moved most (comparable, at least `MOVED_PCT` in some run), up to `limit` rows."""
    by_name = {r.metric: r for r in c.rows}

    def has(r: ComparisonRow) -> bool:
        return any(v is not None for v in r.values)

    out = [by_name[k] for k in KEY_METRICS if k in by_name and has(by_name[k])]
    if any(r.metric == "step time median (workload)" for r in out):
        out = [r for r in out if r.metric != "step time mean"]

    def moved(r: ComparisonRow) -> float:
        rel = [abs(x) for x in r.delta_rel_pct[1:] if x is not None]
        return max(rel, default=0.0)

    rest = sorted(
        (r for r in c.rows if r not in out and has(r) and moved(r) >= MOVED_PCT),
        key=lambda r: -moved(r),
    )
    return (out + rest[:MOVED_ROWS])[:limit]
