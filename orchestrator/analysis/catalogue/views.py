"""Where each table shows the catalogue's metrics: `analyze`'s per-entry table (`ANALYZE`),
`compare`'s rows (`COMPARE`), the cross-rank spread (`SPREAD`), a report's per-rank table
(`RANKS`), the state store's headline numbers (`HEADLINE`), what a campaign records and judges
(`CAMPAIGN`), the metric groups of "what changed" (`CHANGES`) and a report's short table of
what matters (`KEY`).

A layout places metrics in its groups, in order, with the label and unit that table uses where
they are not the metric's own. A metric no layout places (a new one) still appears in every
view it belongs to (`Metric.views`; all open views by default), at the end of its group:
adding a metric is its family's function plus one catalogue entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from orchestrator.analysis.catalogue.entries import CATALOGUE, FAMILIES, PROJECTED, WAIT_FUNCS
from orchestrator.analysis.catalogue.memory_entries import CATEGORIES as MEMORY_CATEGORIES
from orchestrator.analysis.catalogue.model import Family, Metric
from orchestrator.core import human as L

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics

Ranks = Sequence["RankMetrics"]

# views that show a metric their layout does not place (at the end of its group)
OPEN_VIEWS = ("analyze", "compare", "spread", "ranks", "headline", "campaign")


@dataclass(frozen=True)
class Shown:
    """One row of a view: a metric or family of the catalogue (`key`; None: a row of text, such
    as the device), with this view's label and unit where they differ from the metric's; `show`
    how an entry's value reads where it is more than one number ("p50 / p90"); `ranked` False:
    its value does not order the entries (no worst entry); `when` shows it only for some runs."""

    key: str | None
    label: str | None = None
    unit: str | None = None
    show: Callable[[RankMetrics], str] | None = None
    ranked: bool = True
    when: Callable[[Ranks], bool] | None = None
    # a family's `show`, for each of its names
    each: Callable[[str], Callable[[RankMetrics], str]] | None = None


Layout = list[tuple[str, list[Shown]]]


def _s(key: str | None, label: str | None = None, **kw: object) -> Shown:
    return Shown(key, label, **kw)  # type: ignore[arg-type]


def _two(a: float, b: float) -> str:
    return f"{L.dur(a)} / {L.dur(b)}"


def _activity(kind: str) -> Callable[[RankMetrics], str]:
    def show(r: RankMetrics) -> str:
        a = r.activity
        return f"{count(getattr(a, f'{kind}_count'))} · {L.dur(getattr(a, f'{kind}_ns'))}"

    return show


def _copy_show(direction: str) -> Callable[[RankMetrics], str]:
    def show(r: RankMetrics) -> str:
        for c in r.copies:
            if c.direction == direction:
                bw = f" @ {c.bandwidth_gb_s:.1f} GB/s" if c.bandwidth_gb_s else ""
                return f"{L.size(c.bytes)}{bw}"
        return "-"

    return show


def _thread_show(name: str) -> Callable[[RankMetrics], str]:
    def show(r: RankMetrics) -> str:
        ts = [t for t in r.threads if t.name == name]
        if not ts:
            return "-"
        op = sum(t.cpu_op_ns for t in ts)
        os_ = sum(t.osrt_ns for t in ts)
        return L.dur(op) if not os_ else f"{L.dur(op)} / {L.dur(os_)}" if op else L.dur(os_)

    return show


def _waits_show(r: RankMetrics) -> str:
    ns = sum(f.total_ns for t in r.threads for f in t.functions if f.name in WAIT_FUNCS)
    return L.dur(ns) if ns else "-"


def _um_traced(ranks: Ranks) -> bool:
    return any(
        r.unified_memory.cpu_page_faults is not None
        or r.unified_memory.gpu_page_faults is not None
        or r.unified_memory.migrations
        for r in ranks
    )


def _idle_split(ranks: Ranks) -> bool:
    return any(r.idle_breakdown is not None for r in ranks)


def _has_comm(ranks: Ranks) -> bool:
    return any(r.comm_comp_overlap_pct is not None for r in ranks)


def _sampled(ranks: Ranks) -> bool:
    return any(r.gpu_metrics is not None for r in ranks)


def _has(key: str) -> Callable[[Ranks], bool]:
    def when(ranks: Ranks) -> bool:
        return any(
            r.gpu_metrics is not None and r.gpu_metrics.value(key) is not None for r in ranks
        )

    return when


# nsys GPU metrics, shown where some entry was sampled (a link only where the set has it)
GPU_METRIC_ROWS = [
    _s("sm_active_pct", when=_sampled), _s("sm_issue_pct", when=_sampled),
    _s("tensor_active_pct", when=_sampled), _s("dram_read_pct", when=_sampled),
    _s("dram_write_pct", when=_sampled), _s("pcie_rx_pct", when=_has("pcie_rx_pct")),
    _s("pcie_tx_pct", when=_has("pcie_tx_pct")), _s("c2c_rx_pct", when=_has("c2c_rx_pct")),
    _s("c2c_tx_pct", when=_has("c2c_tx_pct")), _s("nvlink_rx_pct", when=_has("nvlink_rx_pct")),
    _s("nvlink_tx_pct", when=_has("nvlink_tx_pct")), _s("gpc_clock_mhz", when=_sampled),
]  # fmt: skip


def _memory(ranks: Ranks) -> bool:
    return any(r.memory is not None for r in ranks)


def _allocator(ranks: Ranks) -> bool:
    return any(r.memory is not None and r.memory.level == "allocator" for r in ranks)


# the memory family's rows (catalogue/memory_entries.py), where some entry recorded memory
# (the allocator's own figures where some entry recorded the allocator: nsys sees CUDA's side)
MEMORY_ROWS = [
    _s("mem_peak_allocated_bytes", when=_allocator),
    _s("mem_peak_reserved_bytes", when=_memory),
    *(_s(f"mem_{key}_bytes", when=_allocator) for key, _, _ in MEMORY_CATEGORIES),
    _s("mem_fragmentation_pct", when=_allocator),
    _s("mem_growth_per_step_bytes", when=_memory),
]


def _has_lever(lever: str) -> Callable[[Ranks], bool]:
    """A projection row only where some entry's replay has that lever."""

    def has(ranks: Ranks) -> bool:
        return any(
            r.projections is not None and any(x.lever == lever for x in r.projections.levers)
            for r in ranks
        )

    return has


ANALYZE: Layout = [
    ("GPU time", [
        _s(None, "device", show=lambda r: r.device_name or "-", ranked=False),
        _s("span_s", "span"),
        _s("gpu_busy_pct", "busy"),
        _s("gpu_idle_pct", "idle"),
        _s("idle_gaps"),
        _s("idle_gap_mean_us"),
        _s("idle_gap_p90_us", "gap p50 / p90",
           show=lambda r: _two(r.idle_gaps.p50_ns, r.idle_gaps.p90_ns)),
        _s("idle_gap_max_ms"),
        _s("idle_host_wait_pct", "idle: host wait", when=_idle_split),
        _s("idle_kernel_wait_pct", when=_idle_split),
        _s("idle_other_pct", when=_idle_split),
    ]),
    ("Temporal (HTA)", [
        _s("hta_compute_pct", "compute"),
        _s("hta_non_compute_pct", "non-compute"),
        _s("hta_idle_pct", "idle"),
    ]),
    ("Kernel types (HTA)", [
        _s("kernel_type_pct[TYPE]"),
        _s("comm_comp_overlap_pct", "comm/comp overlap", when=_has_comm),
    ]),
    ("Kernels / copies", [
        _s("kernel_time_ms", "kernels", show=_activity("kernel")),
        _s("memcpy_time_ms", "memcpys", show=_activity("memcpy")),
        _s("memset_time_ms", "memsets", show=_activity("memset")),
        _s("kernel_pct", "kernel share of activity"),
        _s("memcpy_share_pct", "memcpy share of activity"),
        _s("kernel_names"),
        _s("fp32_gemm_pct", "fp32 GEMM share"),
        _s("tensor_core_gemm_pct", "tensor-core GEMM share"),
    ]),
    ("Memory traffic", [
        _s("copy_bytes[DIRECTION]", each=_copy_show),
        _s("peak_gpu_memory_bytes"),
    ]),
    ("Unified Memory", [
        _s("cpu_page_faults", when=_um_traced),
        _s("gpu_page_faults", when=_um_traced),
        _s("migrated_htod_bytes", when=_um_traced),
        _s("migrated_dtoh_bytes", when=_um_traced),
        _s("um_share_pct", "UM share of memory ops"),
        _s("um_time_share_pct"),
    ]),
    ("Steps", [
        _s("traced_steps"),
        _s("step_time_mean_ms", "step mean"),
        _s("step_time_p90_ms", "step p50 / p90",
           show=lambda r: _two(r.steps.p50_ns, r.steps.p90_ns) if r.steps else "-"),
        _s("data_wait_s"),
        _s("workload_step_median_s", "median step (workload)"),
        _s("tokens_per_s", "tokens/s (workload)",
           show=lambda r: L.num(r.workload.tokens_per_s if r.workload else None)),
        _s("capture_slowdown_pct"),
        _s("profiler_overhead_pct"),
    ]),
    ("Why the GPU waits (per step)", [
        _s("idle_input_ms_per_step", "input"),
        _s("idle_host_ms_per_step", "host compute"),
        _s("idle_launch_ms_per_step", "launch-bound"),
        _s("idle_sync_ms_per_step", "sync"),
        _s("idle_comm_ms_per_step", "communication"),
        _s("idle_copy_staging_ms_per_step", "pageable copies (host side)"),
        _s("idle_unclassified_ms_per_step", "unclassified"),
        _s("idle_short_ms_per_step", "back-to-back gaps"),
    ]),
    ("Projected step (the replay)", [
        _s(f"projected_step_{lever.replace('-', '_')}_ms", label, when=_has_lever(lever))
        for lever, label in PROJECTED
    ]),
    ("CPU / sync", [
        _s("sync_calls"),
        _s("sync_share_pct", "sync time", show=lambda r: L.dur(r.sync.total_ns)),
        _s("sync_idle_share_pct", "sync while GPU idle"),
        _s("cond_wait_s", "cond/sem waits (OS runtime)", show=_waits_show, ranked=False),
        _s("thread_s[NAME]", ranked=False, each=_thread_show),
    ]),
    ("GPU metrics (nsys)", GPU_METRIC_ROWS),
    ("Memory use", MEMORY_ROWS),
]  # fmt: skip

COMPARE: Layout = [
    ("GPU time", [
        _s("span_s"), _s("gpu_busy_pct"), _s("gpu_idle_pct"), _s("hta_compute_pct"),
        _s("hta_non_compute_pct"), _s("hta_idle_pct"), _s("kernel_pct"), _s("memcpy_share_pct"),
    ]),
    ("Kernel continuity", [
        _s("idle_gaps"), _s("idle_gaps_per_s"), _s("idle_gap_mean_us"), _s("idle_gap_p50_us"),
        _s("idle_gap_p90_us"), _s("idle_gap_max_ms"),
    ]),
    ("GPU memory", [
        _s("peak_gpu_memory_bytes", unit="GiB"),
        _s("peak_pinned_memory_bytes", unit="GiB"),
        _s("peak_managed_memory_bytes", unit="GiB"),
    ]),
    ("Memory traffic", [
        _s("htod_bytes", unit="GiB"), _s("dtoh_bytes", unit="GiB"), _s("um_share_pct"),
    ]),
    ("CPU activity", [
        _s("cpu_op_s"), _s("osrt_s"), _s("cond_wait_s"),
        # the seed's pt_main_thread: the main thread as identified (nsys names it after the
        # process, e.g. python3, a name it shares with the OpenMP workers)
        _s("main_thread_osrt_s"), _s("main_thread_wait_s"), _s("pt_autograd_0_osrt_s"),
    ]),
    ("Sync overhead", [_s("sync_s"), _s("sync_share_pct"), _s("sync_idle_share_pct")]),
    ("Steps", [
        _s("step_time_mean_ms"), _s("step_time_p90_ms"), _s("workload_step_median_s"),
        _s("tokens_per_s"),
    ]),
    ("Why the GPU waits (per step)", [
        _s("idle_input_ms_per_step"), _s("idle_host_ms_per_step"),
        _s("idle_launch_ms_per_step"), _s("idle_sync_ms_per_step"), _s("idle_comm_ms_per_step"),
        _s("idle_unclassified_ms_per_step"), _s("idle_short_ms_per_step"),
    ]),
    ("Communication", [
        _s("comm_share_pct"), _s("comm_comp_overlap_pct"), _s("idle_host_wait_pct"),
        _s("collective_start_skew_us"), _s("step_time_skew_us"),
    ]),
    ("Kernels", [_s("kernels"), _s("fp32_gemm_pct")]),
    # a row where some run was sampled and its set has the metric: runs without GPU metrics
    # then read "not measured"; a comparison of runs none of which sampled shows no such row
    ("GPU metrics", [_s(k, when=_has(k)) for k in (
        "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct", "dram_write_pct",
        "pcie_rx_pct", "pcie_tx_pct", "c2c_rx_pct", "c2c_tx_pct", "nvlink_rx_pct",
        "nvlink_tx_pct", "gpc_clock_mhz",
    )]),
    ("Memory use", [_s(s.key, unit="GiB" if (s.key or "").endswith("_bytes") else None,
                       when=s.when) for s in MEMORY_ROWS]),
]  # fmt: skip

# the cross-rank view: (label, the unit its min / median / max read in)
SPREAD: Layout = [
    ("Across ranks", [
        _s("span_s", "span", unit="ms"),
        _s("gpu_busy_pct", "GPU busy"),
        _s("gpu_idle_pct", "GPU idle"),
        _s("hta_compute_pct"),
        _s("hta_non_compute_pct"),
        _s("hta_idle_pct"),
        _s("comm_share_pct", "communication kernels", unit="% of kernel time"),
        _s("comm_comp_overlap_pct", "comm/comp overlap"),
        _s("idle_host_wait_pct", "idle: host wait", unit="% of idle"),
        _s("step_time_mean_ms"),
        _s("kernel_time_ms"),
        _s("data_wait_span_pct", "data wait", unit="% of span"),
        _s("sync_share_pct", "sync wall", unit="% of span"),
        _s("peak_gpu_memory_bytes", unit="GiB"),
        _s("sm_active_pct"),
        _s("tensor_active_pct"),
    ]),
]  # fmt: skip

# a report's per-rank table (a row per metric, a column per entry)
RANKS: Layout = [
    ("Per rank", [
        _s(None, "device", ranked=False,
           show=lambda r: f"{','.join(map(str, r.devices))} {r.device_name or ''}".strip()),
        _s("span_s", "span"),
        _s("gpu_busy_pct", "busy, % of span"),
        _s("gpu_idle_pct", "idle, % of span"),
        _s("hta_compute_pct"),
        _s("hta_non_compute_pct"),
        _s("hta_idle_pct"),
        _s("comm_comp_overlap_pct", "comm/comp overlap"),
        _s("idle_host_wait_pct", "idle: host wait"),
        _s("idle_gaps"),
        _s("idle_gap_p90_us", "gap p50 / p90",
           show=lambda r: f"{L.dur(r.idle_gaps.p50_ns)} / {L.dur(r.idle_gaps.p90_ns)}"),
        _s("kernel_pct", "kernels, % of activity"),
        _s("memcpy_share_pct", "memcpys, % of activity"),
        _s("memset_share_pct", "memsets, % of activity"),
        _s("peak_gpu_memory_bytes"),
        *GPU_METRIC_ROWS,
        *MEMORY_ROWS,
    ]),
]  # fmt: skip

# the state store's headline numbers of a run (`headline`), in this order
HEADLINE = [
    "gpu_busy_pct", "gpu_idle_pct", "hta_idle_pct", "hta_compute_pct", "hta_non_compute_pct",
    "gpu_compute_pct", "kernel_pct", "memcpy_share_pct", "um_share_pct", "idle_gaps",
    "idle_gaps_per_s", "idle_gap_p90_us", "step_time_median_s", "tokens_per_s",
    "peak_gpu_memory_bytes", "htod_bytes", "dtoh_bytes", "sync_s", "cpu_op_s", "osrt_s",
    "fp32_gemm_pct", "comm_share_pct", "comm_comp_overlap_pct", "collective_start_skew_us",
    "sm_active_pct", "tensor_active_pct",
]  # fmt: skip

# what a campaign records of a run's trace (its thresholds can watch these; the traced step
# time is also the fallback a campaign file may allow for the workload's own, campaign/figures.py)
CAMPAIGN = [
    "gpu_idle_pct", "gpu_compute_pct", "kernel_pct", "um_share_pct", "memcpy_share_pct",
    "sync_share_pct", "data_wait_pct", "sm_active_pct", "sm_issue_pct", "tensor_active_pct",
    "dram_read_pct", "dram_write_pct", "step_time_mean_ms",
]  # fmt: skip

# the metric groups of "what changed" (name, unit, metric)
CHANGES = [
    ("GPU idle", "% of span", "gpu_idle_pct"),
    ("copies", "% of GPU activity", "memcpy_share_pct"),
    ("sync", "% of span", "sync_share_pct"),
    ("data wait", "% of steps", "data_wait_pct"),
]

# the rows a reader looks at first (a report's short table), in this order: the step (the
# workload's own timing, else the traced steps), throughput, how idle the GPU is and why
# (copies, syncs), memory, communication
KEY = [
    "workload_step_median_s", "step_time_mean_ms", "tokens_per_s", "gpu_idle_pct",
    "memcpy_share_pct", "sync_share_pct", "peak_gpu_memory_bytes", "comm_share_pct",
    "comm_comp_overlap_pct",
]  # fmt: skip


# ---- lookups
def metrics() -> dict[str, Metric]:
    """Every metric by key (and by its aliases)."""
    out: dict[str, Metric] = {}
    for m in CATALOGUE:
        out[m.key] = m
        for a in m.aliases:
            out[a] = m
    return out


def computed() -> list[Metric]:
    """The metrics a family computes from an entry's timeline (`Metric.compute`)."""
    return [m for m in CATALOGUE if m.compute is not None]


def families() -> dict[str, Family]:
    return {f.key: f for f in FAMILIES}


def metric(key: str) -> Metric:
    return metrics()[key]


def value(key: str, m: Metrics, *, check: bool = True) -> float | None:
    """The run's value of one metric (None: not measured, or no entry has one)."""
    return metric(key).run_value(m, check=check)


def _placed(layout: Layout) -> set[str]:
    return {s.key for _, rows in layout for s in rows if s.key}


def placed_anywhere() -> set[str]:
    """The keys some view places (a metric placed nowhere is new: every open view shows it)."""
    lists = [*HEADLINE, *CAMPAIGN, *KEY, *(k for _, _, k in CHANGES)]
    out = set(lists).union(*(_placed(x) for x in (ANALYZE, COMPARE, SPREAD, RANKS)))
    for m in CATALOGUE:
        if out & {m.key, *m.aliases}:
            out.add(m.key)
    return out


def in_view(met: Metric | Family, view: str, anywhere: set[str] | None = None) -> bool:
    """Whether a metric its layout does not place belongs to a view: as its entry says, else
    (a metric no view places) every open view. `anywhere`: placed_anywhere(), when the caller
    asks of every metric in turn (it is made anew on each call, as the catalogue may grow)."""
    if met.views is not None:
        return view in met.views
    if anywhere is None:
        anywhere = placed_anywhere()
    return view in OPEN_VIEWS and met.key not in anywhere


def _complete(layout: Layout, view: str) -> Layout:
    """The layout plus the metrics of the view it does not place, each at the end of its
    group (a group of its own at the end when the view has none of that name)."""
    placed = _placed(layout)
    out = [(g, list(rows)) for g, rows in layout]
    every: list[Metric | Family] = [*CATALOGUE, *FAMILIES]
    anywhere = placed_anywhere()
    for met in every:
        if met.key in placed or not in_view(met, view, anywhere):
            continue
        group = next((rows for g, rows in out if g == met.group), None)
        if group is None:
            out.append((met.group, []))
            group = out[-1][1]
        group.append(Shown(met.key))
    return out


def _keys(order: list[str], view: str) -> list[str]:
    placed, anywhere = set(order), placed_anywhere()
    extra = [m.key for m in CATALOGUE if m.key not in placed and in_view(m, view, anywhere)]
    return [*order, *extra]


# ---- how a value reads alone in the terminal and in a report
def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} %"


def count(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt(v: float | None, unit: str, *, digits: int = 2) -> str:
    """A value in `unit` as it reads alone: durations and sizes in the unit that suits them,
    percentages with `digits` decimals, counts with thousands separators."""
    if v is None:
        return "-"
    if unit == "%" or unit.startswith("% "):
        return f"{v:.{digits}f} %"
    if unit == "count":
        return count(v)
    if unit in ("ns", "us", "ms", "s"):
        return L.dur(L.convert(v, unit, "ns"))
    if unit in ("bytes", "B", "KiB", "MiB", "GiB"):
        return L.size(L.convert(v, unit, "bytes"))
    if unit == "MHz":
        return f"{v:,.0f} MHz"
    return L.num(v)


# ---- the views
class Row(NamedTuple):
    """One row of a per-entry table: its label, how an entry's value reads, and (for numbers)
    the value and which direction is worse ("higher" / "lower"), for the summary columns and
    the worst entry."""

    label: str
    show: Callable[[RankMetrics], str]
    value: Callable[[RankMetrics], float | None] | None = None
    worse: str | None = None


def _expand(s: Shown, ranks: Ranks) -> list[tuple[Shown, Metric | None]]:
    """A layout row as the metrics it shows for these entries (a family: one per name)."""
    if s.when is not None and not s.when(ranks):
        return []
    if s.key is None:
        return [(s, None)]
    fam = families().get(s.key)
    if fam is None:
        return [(s, metric(s.key))]
    out: list[tuple[Shown, Metric | None]] = []
    for name in fam.names(ranks):
        met = fam.make(name)
        show = s.each(name) if s.each else s.show
        out.append((Shown(met.key, s.label, s.unit, show, s.ranked), met))
    return out


def _row(s: Shown, met: Metric | None, digits: int) -> Row:
    label = s.label or (met.label if met else "")
    if met is None:
        assert s.show is not None
        return Row(label, s.show)

    def value(r: RankMetrics) -> float | None:
        return met.rank_value(r)

    unit = met.rank_unit or met.unit
    show = s.show or (lambda r: fmt(value(r), unit, digits=digits))
    return Row(label, show, value if s.ranked else None, met.worse if s.ranked else None)


def rows(view: str, ranks: Ranks, *, digits: int = 2) -> list[tuple[str, list[Row]]]:
    """A per-entry table's groups (`ANALYZE`, `RANKS`), each row reading one entry's value."""
    layout = {"analyze": ANALYZE, "ranks": RANKS}[view]
    return [
        (group, [_row(x, met, digits) for s in shown for x, met in _expand(s, ranks)])
        for group, shown in _complete(layout, view)
    ]


class RunRow(NamedTuple):
    """One row of a table of runs: its group, label and unit, and the metric; `when`: shown
    only if it holds for the entries of all the runs together."""

    group: str
    label: str
    unit: str
    metric: Metric
    when: Callable[[Ranks], bool] | None = None


def run_rows(view: str = "compare") -> list[RunRow]:
    """The rows of a table of runs (`COMPARE`), or the cross-rank spread's (`SPREAD`)."""
    layout = {"compare": COMPARE, "spread": SPREAD}[view]
    out = []
    for group, shown in _complete(layout, view):
        for s in shown:
            if s.key is None or s.key in families():
                continue  # a family's names differ from run to run: not a row of runs
            met = metric(s.key)
            out.append(RunRow(group, s.label or met.label, s.unit or met.unit, met, s.when))
    return out


def spread_value(row: RunRow, r: RankMetrics) -> float | None:
    """One entry's value in the spread's unit; None where the entry does not measure it."""
    met = row.metric
    if met.rank_measured is not None and not met.rank_measured(r):
        return None
    return met.rank_value(r, row.unit)


def recorded(key: str, m: Metrics) -> float | None:
    """A metric as the state store and campaigns record it: a GPU-side one only where the run
    has a GPU timeline, None where no entry has a value."""
    met = metric(key)
    if met.sources.gpu and not m.aggregate.span_ns > 0:
        return None
    return met.run_value(m, check=False)


def headline(m: Metrics) -> dict[str, float | None]:
    """The flat headline numbers of one run, for the state store's metrics table (campaigns read
    them for regressions): the `HEADLINE` view, keys as there (docs/metrics.md defines each).
    Means over ranks unless the catalogue says otherwise; None = no value; none at all for a
    run without ranks. Unchecked: GPU figures of a trace without kernels read 0, as they
    always have in the state store."""
    if not m.ranks:
        return {}
    return {k: metric(k).run_value(m, check=False) for k in _keys(HEADLINE, "headline")}


def campaign_keys() -> list[str]:
    return _keys(CAMPAIGN, "campaign")


def campaign_descriptions() -> dict[str, str]:
    """What each campaign metric of a trace means (its threshold's help)."""
    return {
        k: f"{(met := metric(k)).definition}{'' if met.unit == '%' else f' ({met.unit})'},"
        " trace analysis"
        for k in campaign_keys()
    }


def campaign_values(m: Metrics) -> dict[str, float | None]:
    """What a campaign records of a run's trace: the GPU figures where the run has a GPU
    timeline, the others where they have a value."""
    out: dict[str, float | None] = {}
    for k in campaign_keys():
        met = metric(k)
        if met.sources.gpu:
            if m.aggregate.span_ns > 0:
                out[k] = met.run_value(m, check=False)
        elif (v := met.run_value(m, check=False)) is not None:
            out[k] = v
    return out
