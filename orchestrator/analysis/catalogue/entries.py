"""Every metric gh-run reports, declared once (`model.Metric`): the families (gpu_time,
breakdown, communication, kernels, memory, host, cross_rank) compute the values into
`RankMetrics`; here each is named, given its unit, its better direction, how a run's entries
add up, which sources measure it and what it means. docs/metrics.md's table is made from this
list (`python -m orchestrator.analysis.catalogue`); `views.py` says where each table shows it.

Keys are the names the state store and campaigns know (`gpu_idle_pct`, `sync_s`): they end
in the unit of the run's value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from orchestrator.analysis.catalogue.memory_entries import MEMORY
from orchestrator.analysis.catalogue.model import (
    ACTIVITY,
    KERNELS,
    NSYS_ONLY,
    OPERATORS,
    OSRT,
    RUNTIME,
    WORKLOAD,
    Better,
    Family,
    Metric,
    Need,
    RunGet,
    Sources,
)

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics

GPU = Sources(need=KERNELS)
GPU_ACTIVITY = Sources(need=ACTIVITY)
NSYS_GPU = Sources(NSYS_ONLY, ACTIVITY)  # Unified Memory, pinned and managed memory
NSYS_OSRT = Sources(NSYS_ONLY, OSRT)
OPERATOR_SOURCES = Sources(need=OPERATORS)
SYNC = Sources(need=RUNTIME)
WORKLOAD_FILE = Sources(need=WORKLOAD)


def _sampled(m: Metrics) -> bool:
    return any(r.gpu_metrics is not None for r in m.ranks)


# nsys GPU-metric samples (gpu_metrics): a run without them reads "not measured", never 0
GPU_METRICS = Sources(NSYS_ONLY, Need("GPU metrics sampled: nsys --gpu-metrics-device", _sampled))

# blocking waits on condition variables and semaphores (OS-runtime functions)
WAIT_FUNCS = ("pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait")


def _gpu_entry(r: RankMetrics) -> bool:
    return r.span_ns > 0


def _hta_entry(r: RankMetrics) -> bool:
    return r.temporal.span_ns > 0


def _hta_basis(m: Metrics) -> str | None:
    bases = sorted({r.temporal.basis for r in m.ranks if r.temporal.basis})
    return "; ".join(bases) or None


def _step_basis(m: Metrics) -> str | None:
    fams = sorted({r.steps.family for r in m.ranks if r.steps and r.steps.rule == "ranges"})
    found = sorted({r.steps.rule for r in m.ranks if r.steps and r.steps.rule != "ranges"})
    parts = ([f"step ranges {', '.join(fams)}"] if fams else []) + [
        f"steps found by the {rule} rule" for rule in found
    ]
    return "; ".join(parts) or None


def _idle_ms(*causes: str) -> Callable[[RankMetrics], float | None]:
    """GPU-idle ms per step that `idle_causes` attributes to the given classes."""

    def get(r: RankMetrics) -> float | None:
        if r.idle_causes is None or not r.idle_causes.steps:
            return None
        return sum(c.ms_per_step for c in r.idle_causes.causes if c.cause in causes)

    return get


def _lever_ms(lever: str) -> Callable[[RankMetrics], float | None]:
    """The step the replay leaves with `lever`'s cause removed (critical_path)."""

    def get(r: RankMetrics) -> float | None:
        p = r.projections
        x = next((x for x in p.levers if x.lever == lever), None) if p else None
        return x.step_ms if x is not None else None

    return get


# the replay's levers (critical_path.EFFECTS) shown as metrics, with their labels
PROJECTED = (
    ("input", "without the input wait"),
    ("host-compute", "without the host compute"),
    ("launch-bound", "as one CUDA graph"),
    ("sync", "without the syncs"),
    ("fp32-gemms", "in bf16"),
    ("copies", "with pinned copies"),
    ("comm-overlap", "comm. overlapped"),
)


def _projected(lever: str, label: str) -> Metric:
    return Metric(
        f"projected_step_{lever.replace('-', '_')}_ms", "Projections", label, "ms",
        f"the mean step once the {lever} lever's cost is removed at its knob's typical effect,"
        " replayed on the step's dependency structure (critical_path; the data-loader advice"
        " adds the loader's own floor); none where the entry has none of that cost",
        rank=_lever_ms(lever), better="lower", sources=GPU,
        views=frozenset({"analyze"}),
    )  # fmt: skip


def _peak_basis(m: Metrics) -> str | None:
    # "nsys memory-usage events: device memory (…), held at capture start" → its source
    srcs = sorted({s.split(":")[0] for r in m.ranks if (s := r.peak_gpu_memory_source)})
    return ", ".join(srcs) or None


def comm_pct(r: RankMetrics) -> float | None:
    """HTA kernel types with communication in them, percent of the entry's kernel-type time."""
    if not r.kernel_types:
        return None
    return sum(v for k, v in r.kernel_types.items() if "COMMUNICATION" in k)


def _comm_run(m: Metrics) -> float | None:
    types = m.aggregate.kernel_types
    return sum(v for k, v in types.items() if "COMMUNICATION" in k) if types else None


def _direction_bytes(r: RankMetrics, direction: str) -> int:
    return sum(c.bytes for c in r.copies if c.direction == direction)


def _main_osrt(r: RankMetrics) -> float | None:
    vals = [t.osrt_ns for t in r.threads if t.main]
    return sum(vals) if vals else None


def _autograd_osrt(m: Metrics) -> float | None:
    # the seed's pt_autograd_0 (activation offloading's backward copies run on it)
    vals = [t.osrt_ns for r in m.ranks for t in r.threads if t.name == "pt_autograd_0"]
    return sum(vals) / 1e9 if vals and sum(vals) else None


def _waits(r: RankMetrics) -> int:
    return sum(f.total_ns for t in r.threads for f in t.functions if f.name in WAIT_FUNCS)


def _median_step_s(m: Metrics) -> float | None:
    wl = [
        r.workload.median_step_time_s
        for r in m.ranks
        if r.workload and r.workload.median_step_time_s is not None
    ]
    if wl:
        return max(wl)
    traced = [r.steps.p50_ns for r in m.ranks if r.steps]
    return max(traced) / 1e9 if traced else None


def _skew(which: str) -> RunGet:
    def get(m: Metrics) -> float | None:
        s = getattr(m.cross_rank, which)
        return s.median_ns / 1e3 if s else None

    return get


def _pct_of_span(ns: int | None, r: RankMetrics) -> float | None:
    return 100.0 * ns / r.span_ns if ns is not None and r.span_ns else None


def _gm(key: str) -> Callable[[RankMetrics], float | None]:
    """A GPU metric's mean over the entry's span (`gpu_metric_model.GpuMetrics.value`)."""

    def get(r: RankMetrics) -> float | None:
        return r.gpu_metrics.value(key) if r.gpu_metrics is not None else None

    return get


def _gm_entry(r: RankMetrics) -> bool:
    return r.gpu_metrics is not None


def _gpu_metric(key: str, label: str, unit: str, definition: str, better: Better | None) -> Metric:
    return Metric(
        key, "GPU metrics", label, unit, definition, rank=_gm(key), better=better,
        sources=GPU_METRICS, rank_measured=_gm_entry,
    )  # fmt: skip


_SPAN = "nsys GPU metrics, mean over the entry's span (first to last GPU activity)"

CATALOGUE: list[Metric] = [
    # ---- GPU time (gpu_time, breakdown)
    Metric("span_s", "GPU time", "span", "s",
           "first start to last end of the GPU activity (kernels, memcpys, memsets) of a device",
           rank=lambda r: r.span_ns, rank_unit="ns", across="max", better="lower", sources=GPU,
           rank_measured=_gpu_entry),
    Metric("gpu_busy_pct", "GPU time", "busy", "%",
           "union of the GPU activity over all streams, percent of the span",
           rank=lambda r: r.busy_pct, better="higher", sources=GPU, rank_measured=_gpu_entry),
    Metric("gpu_idle_pct", "GPU time", "idle", "%",
           "span minus busy: time no kernel, copy or memset ran, percent of the span",
           rank=lambda r: r.idle_pct, better="lower", sources=GPU, rank_measured=_gpu_entry),
    Metric("hta_compute_pct", "GPU time", "HTA compute", "%",
           "HTA temporal breakdown: union of the computation kernels, percent of HTA's span",
           rank=lambda r: r.temporal.compute_pct, better="higher", sources=GPU,
           rank_measured=_hta_entry, basis=_hta_basis, aliases=("gpu_compute_pct",)),
    Metric("hta_non_compute_pct", "GPU time", "HTA non-compute", "%",
           "HTA temporal breakdown: time only copies, memsets or communication ran",
           rank=lambda r: r.temporal.non_compute_pct, better="lower", sources=GPU,
           rank_measured=_hta_entry, basis=_hta_basis),
    Metric("hta_idle_pct", "GPU time", "HTA idle", "%",
           "HTA temporal breakdown: time none of HTA's GPU events ran, percent of its span",
           rank=lambda r: r.temporal.idle_pct, better="lower", sources=GPU,
           rank_measured=_hta_entry, basis=_hta_basis),
    Metric("kernel_pct", "GPU time", "kernels share of GPU activity", "%",
           "summed kernel time, percent of the summed kernel, memcpy and memset time",
           rank=lambda r: r.activity.kernel_pct, better="higher", sources=GPU),
    Metric("memcpy_share_pct", "GPU time", "memcpy share of GPU activity", "%",
           "summed memcpy time, percent of the summed kernel, memcpy and memset time",
           rank=lambda r: r.activity.memcpy_pct, better="lower", sources=GPU),
    Metric("memset_share_pct", "GPU time", "memset share of GPU activity", "%",
           "summed memset time, percent of the summed kernel, memcpy and memset time",
           rank=lambda r: r.activity.memset_pct, better="lower", sources=GPU),
    # ---- kernel continuity (gpu_time: the gaps of the busy union)
    Metric("idle_gaps", "Kernel continuity", "idle gaps", "count",
           "holes between consecutive merged busy intervals",
           rank=lambda r: r.idle_gaps.count, across="sum", better="lower", sources=GPU),
    Metric("idle_gaps_per_s", "Kernel continuity", "idle gaps per second", "1/s",
           "idle gaps per second of span",
           rank=lambda r: r.idle_gaps.count / (r.span_ns / 1e9) if r.span_ns else None,
           better="lower", sources=GPU),
    Metric("idle_gap_mean_us", "Kernel continuity", "gap mean", "us",
           "mean length of an idle gap",
           rank=lambda r: r.idle_gaps.mean_ns, rank_unit="ns", better="lower", sources=GPU),
    Metric("idle_gap_p50_us", "Kernel continuity", "gap p50", "us",
           "median idle gap (linear interpolation between order statistics)",
           rank=lambda r: r.idle_gaps.p50_ns, rank_unit="ns", better="lower", sources=GPU),
    Metric("idle_gap_p90_us", "Kernel continuity", "gap p90", "us",
           "90th percentile of the idle gaps",
           rank=lambda r: r.idle_gaps.p90_ns, rank_unit="ns", better="lower", sources=GPU),
    Metric("idle_gap_max_ms", "Kernel continuity", "gap max", "ms",
           "longest idle gap",
           rank=lambda r: r.idle_gaps.max_ns, rank_unit="ns", better="lower", sources=GPU),
    Metric("idle_host_wait_pct", "Communication", "idle: host wait share (HTA)", "%",
           "HTA idle-time breakdown: gaps of a stream before work launched after the previous"
           " ended, percent of the streams' idle time",
           rank=lambda r: r.idle_breakdown.host_wait_pct if r.idle_breakdown else None,
           better="lower", sources=GPU),
    Metric("idle_kernel_wait_pct", "Kernel continuity", "idle: kernel wait", "%",
           "HTA idle-time breakdown: gaps shorter than 30 µs between work launched in time",
           rank=lambda r: r.idle_breakdown.kernel_wait_pct if r.idle_breakdown else None,
           better="lower", sources=GPU),
    Metric("idle_other_pct", "Kernel continuity", "idle: other", "%",
           "HTA idle-time breakdown: the other gaps (a stream waiting for another's event)",
           rank=lambda r: r.idle_breakdown.other_pct if r.idle_breakdown else None,
           better="lower", sources=GPU),
    # ---- memory (memory)
    Metric("peak_gpu_memory_bytes", "GPU memory", "peak GPU memory", "bytes",
           "peak device memory held (nsys memory-usage events, Kineto [memory] events, or the"
           " workload's own figure)",
           rank=lambda r: r.peak_gpu_memory_bytes, across="max", better="lower",
           rank_measured=lambda r: bool(r.peak_gpu_memory_bytes), basis=_peak_basis),
    Metric("peak_pinned_memory_bytes", "GPU memory", "peak pinned host memory", "bytes",
           "peak page-locked host memory (nsys memKind 1: offloaded activations, pinned batches)",
           rank=lambda r: r.peak_pinned_memory_bytes, across="max", better="lower",
           sources=NSYS_GPU),
    Metric("peak_managed_memory_bytes", "GPU memory", "peak managed memory", "bytes",
           "peak managed (Unified) memory (nsys memKind 4, 6)",
           rank=lambda r: r.peak_managed_memory_bytes, across="max", better="lower",
           sources=NSYS_GPU),
    Metric("htod_bytes", "Memory traffic", "HtoD", "bytes",
           "bytes copied host to device (memcpy HtoD)",
           rank=lambda r: _direction_bytes(r, "HtoD"), across="sum", better="lower",
           sources=GPU_ACTIVITY),
    Metric("dtoh_bytes", "Memory traffic", "DtoH", "bytes",
           "bytes copied device to host (memcpy DtoH)",
           rank=lambda r: _direction_bytes(r, "DtoH"), across="sum", better="lower",
           sources=GPU_ACTIVITY),
    Metric("um_share_pct", "Memory traffic", "UM share of memory operations", "%",
           "Unified-Memory migrations, percent of the memcpys and memsets (by count)",
           rank=lambda r: r.unified_memory.share_of_memory_ops_pct, better="lower",
           sources=NSYS_GPU),
    Metric("um_time_share_pct", "Memory traffic", "UM share of memory time", "%",
           "Unified-Memory migrations, percent of the memcpy and memset time",
           rank=lambda r: r.unified_memory.share_of_memory_time_pct, better="lower",
           sources=NSYS_GPU),
    Metric("cpu_page_faults", "Unified Memory", "CPU page faults", "count",
           "Unified-Memory page faults on the CPU (nsys CUDA_UM_CPU_PAGE_FAULT_EVENTS)",
           rank=lambda r: r.unified_memory.cpu_page_faults, across="sum", better="lower",
           sources=NSYS_GPU),
    Metric("gpu_page_faults", "Unified Memory", "GPU page faults", "count",
           "Unified-Memory page faults on the GPU (sum of numberOfPageFaults)",
           rank=lambda r: r.unified_memory.gpu_page_faults, across="sum", better="lower",
           sources=NSYS_GPU),
    Metric("migrated_htod_bytes", "Unified Memory", "migrated HtoD", "bytes",
           "bytes Unified Memory migrated host to device",
           rank=lambda r: r.unified_memory.migrated_htod_bytes, across="sum", better="lower",
           sources=NSYS_GPU),
    Metric("migrated_dtoh_bytes", "Unified Memory", "migrated DtoH", "bytes",
           "bytes Unified Memory migrated device to host",
           rank=lambda r: r.unified_memory.migrated_dtoh_bytes, across="sum", better="lower",
           sources=NSYS_GPU),
    # ---- CPU activity (host)
    Metric("cpu_op_s", "CPU activity", "CPU operator time", "s",
           "union of each thread's CPU operators (Kineto cpu_op; nsys: PyTorch's NVTX operator"
           " ranges), summed over threads",
           rank=lambda r: sum(t.cpu_op_ns for t in r.threads), rank_unit="ns", across="sum",
           better="lower", sources=OPERATOR_SOURCES),
    Metric("osrt_s", "CPU activity", "OS-runtime time (nsys)", "s",
           "time threads spent in OS-runtime calls (nsys OSRT_API), summed over threads",
           rank=lambda r: sum(t.osrt_ns for t in r.threads), rank_unit="ns", across="sum",
           better="lower", sources=NSYS_OSRT),
    Metric("cond_wait_s", "CPU activity", "pthread_cond_wait & sem waits", "s",
           "time in pthread_cond_(timed)wait and sem_(timed)wait calls, all threads",
           rank=_waits, rank_unit="ns", across="sum", better="lower", sources=NSYS_OSRT),
    Metric("main_thread_osrt_s", "CPU activity", "main thread OS-runtime", "s",
           "the main thread's time in OS-runtime calls",
           rank=_main_osrt, rank_unit="ns", across="sum", better="lower", sources=NSYS_OSRT),
    Metric("main_thread_wait_s", "CPU activity", "main thread blocking waits", "s",
           "union of the main thread's blocking waits (condition variables, semaphores,"
           " mutexes, joins) inside the span",
           rank=lambda r: r.main_thread_wait_ns, rank_unit="ns", across="sum", better="lower",
           sources=NSYS_OSRT),
    Metric("pt_autograd_0_osrt_s", "CPU activity", "pt_autograd_0 OS-runtime", "s",
           "OS-runtime time of the threads named pt_autograd_0 (autograd's backward thread)",
           run=_autograd_osrt, better="lower", sources=NSYS_OSRT),
    # ---- sync (host)
    Metric("sync_calls", "Sync overhead", "sync calls", "count",
           "CUDA synchronisation API calls (cuda*Synchronize*, cudaStreamWaitEvent)",
           rank=lambda r: r.sync.calls, across="sum", better="lower", sources=SYNC),
    Metric("sync_s", "Sync overhead", "sync API time", "s",
           "summed time of the CUDA synchronisation API calls",
           rank=lambda r: r.sync.total_ns, rank_unit="ns", across="sum", better="lower",
           sources=SYNC),
    Metric("sync_share_pct", "Sync overhead", "sync API share of span", "%",
           "union of the sync calls of all threads inside the span, percent of the span",
           rank=lambda r: _pct_of_span(r.sync.wall_ns, r), better="lower", sources=SYNC),
    Metric("sync_idle_share_pct", "Sync overhead", "sync while GPU idle", "%",
           "the sync calls' union while the GPU was idle, percent of the span: what syncs"
           " cost the GPU (a sync that waits for a busy GPU costs it nothing)",
           rank=lambda r: _pct_of_span(r.sync.idle_wall_ns, r), better="lower", sources=SYNC),
    # ---- steps (host, the workload's metrics.json)
    Metric("traced_steps", "Steps", "traced steps", "count",
           "training-step ranges (step_N, train_step, ProfilerStep#N, ...) of the chosen family",
           rank=lambda r: r.steps.count if r.steps else None, across="max"),
    Metric("step_time_mean_ms", "Steps", "step time mean", "ms",
           "mean duration of the traced training-step ranges",
           rank=lambda r: r.steps.mean_ns if r.steps else None, rank_unit="ns",
           better="lower", basis=_step_basis),
    Metric("step_time_p90_ms", "Steps", "step time p90", "ms",
           "90th percentile of the traced training-step ranges",
           rank=lambda r: r.steps.p90_ns if r.steps else None, rank_unit="ns",
           better="lower", basis=_step_basis),
    Metric("workload_step_median_s", "Steps", "step time median (workload)", "s",
           "the workload's own median step time (its metrics.json), slowest rank",
           rank=lambda r: r.workload.median_step_time_s if r.workload else None, across="max",
           better="lower", sources=WORKLOAD_FILE),
    Metric("capture_slowdown_pct", "Steps", "capture slowdown (workload)", "%",
           "the workload's median step inside the capture window against its median step"
           " outside it (its metrics.json: step walls and cuda_profiler_window): what the"
           " profiler cost the steps it recorded",
           rank=lambda r: r.profiler_overhead.slowdown_pct if r.profiler_overhead else None,
           across="max", better="lower", sources=WORKLOAD_FILE),
    Metric("profiler_overhead_pct", "Steps", "profiler overhead recorded", "%",
           "nsys's own overhead records of the process (PROFILER_OVERHEAD,"
           " CUPTI_ACTIVITY_KIND_OVERHEAD), their union inside the GPU span, percent of the span",
           rank=lambda r: r.profiler_overhead.recorded_pct_of_span if r.profiler_overhead
           else None, better="lower", sources=NSYS_GPU),
    Metric("tokens_per_s", "Steps", "throughput (workload)", "tok/s",
           "the workload's own training throughput (its metrics.json), summed over ranks",
           rank=lambda r: r.workload.tokens_per_s if r.workload and r.workload.tokens_per_s
           else None, across="sum", better="higher", sources=WORKLOAD_FILE),
    Metric("step_time_median_s", "Steps", "step time median", "s",
           "the workload's median step time (slowest rank), else the traced steps' p50",
           run=_median_step_s, better="lower"),
    Metric("data_wait_s", "Steps", "data wait (ranges)", "s",
           "union of the data-loading ranges (DataLoader, get_batch, data, ...) inside the span",
           rank=lambda r: r.data_wait_ns, rank_unit="ns", across="sum", better="lower"),
    Metric("data_wait_span_pct", "Steps", "data wait share of span", "%",
           "the data-loading ranges' union inside the span, percent of the span",
           rank=lambda r: _pct_of_span(r.data_wait_ns, r), better="lower"),
    Metric("data_wait_pct", "Steps", "data wait share of steps", "%",
           "the data-loading ranges' union, percent of the traced steps' summed time",
           rank=lambda r: 100 * r.data_wait_ns / r.steps.total_ns
           if r.steps and r.steps.total_ns else None, better="lower"),
    # ---- why the GPU waits (idle_causes): idle intervals by what the host did in them
    Metric("idle_input_ms_per_step", "Idle causes", "GPU idle for input", "ms",
           "GPU-idle time per step claimed for input: the main thread loaded or made the batch,"
           " or waited on the loader while its workers ran (idle_causes: input)",
           rank=_idle_ms("input"), better="lower", sources=GPU),
    Metric("idle_host_ms_per_step", "Idle causes", "GPU idle for host compute", "ms",
           "GPU-idle time per step claimed for host work that is not the batch's: on the main"
           " thread, or on autograd's thread while backward() waits (idle_causes: host-compute)",
           rank=_idle_ms("host-compute"), better="lower", sources=GPU),
    Metric("idle_launch_ms_per_step", "Idle causes", "GPU idle waiting for launches", "ms",
           "GPU-idle time per step before work launched after the GPU ran dry: µs gaps between"
           " short kernels, and host windows spent in the launch path (idle_causes:"
           " launch-bound)",
           rank=_idle_ms("launch-bound"), better="lower", sources=GPU),
    Metric("idle_sync_ms_per_step", "Idle causes", "GPU idle in syncs", "ms",
           "GPU-idle time per step claimed for CUDA syncs: the host in a sync call, and the"
           " drain after one (idle_causes: sync)",
           rank=_idle_ms("sync"), better="lower", sources=GPU),
    Metric("idle_comm_ms_per_step", "Idle causes", "GPU idle for communication", "ms",
           "GPU-idle time per step claimed for collectives (idle_causes: communication)",
           rank=_idle_ms("communication"), better="lower", sources=GPU),
    Metric("idle_copy_staging_ms_per_step", "Idle causes",
           "GPU idle for pageable copies' host side", "ms",
           "GPU-idle time per step claimed for the host side of copies from or to pageable memory:"
           " the main thread in the copy's call (the driver staging it), releasing the mapped"
           " batch it had just copied (idle_causes: copy-staging; host-device-copies adds it)",
           rank=_idle_ms("copy-staging"), better="lower", sources=GPU),
    Metric("idle_unclassified_ms_per_step", "Idle causes", "GPU idle, cause unclassified",
           "ms",
           "GPU-idle time per step in intervals whose evidence singles out no cause by the"
           " margin (idle_causes: unclassified)",
           rank=_idle_ms("unclassified"), better="lower", sources=GPU),
    Metric("idle_short_ms_per_step", "Idle causes", "GPU idle in short gaps", "ms",
           "GPU-idle time per step in µs gaps before work launched in time (back to back)",
           rank=_idle_ms("short-gaps"), better="lower", sources=GPU),
    # ---- what removing each cause would leave of the step (critical_path: the replay)
    *(_projected(lever, label) for lever, label in PROJECTED),
    # ---- communication (breakdown, communication, cross_rank)
    Metric("comm_share_pct", "Communication", "communication share of kernel time (HTA)", "%",
           "HTA kernel types with communication (NCCL kernels), percent of the kernel-type"
           " time of all entries",
           rank=comm_pct, run=_comm_run, better="lower", sources=GPU),
    Metric("comm_comp_overlap_pct", "Communication", "comm/comp overlap (HTA)", "%",
           "HTA: communication time overlapped by computation, percent of the communication"
           " time (entries with communication)",
           rank=lambda r: r.comm_comp_overlap_pct, better="higher", sources=GPU),
    Metric("collective_start_skew_us", "Communication", "collective start skew, median", "us",
           "latest minus earliest start of each collective matched across ranks, median",
           run=_skew("collective_start_skew"), better="lower"),
    Metric("step_time_skew_us", "Communication", "step time skew, median", "us",
           "longest minus shortest duration of each step present on every rank, median",
           run=_skew("step_time_skew"), better="lower"),
    # ---- kernels (kernels)
    Metric("kernels", "Kernels", "kernels", "count",
           "kernels launched in the capture",
           rank=lambda r: r.activity.kernel_count, across="sum", sources=GPU),
    Metric("kernel_time_ms", "Kernels", "kernel time", "ms",
           "summed kernel durations",
           rank=lambda r: r.activity.kernel_ns, rank_unit="ns", across="sum", better="lower",
           sources=GPU, rank_measured=_gpu_entry),
    Metric("memcpy_time_ms", "Kernels", "memcpy time", "ms",
           "summed memcpy durations",
           rank=lambda r: r.activity.memcpy_ns, rank_unit="ns", across="sum", better="lower",
           sources=GPU_ACTIVITY),
    Metric("memset_time_ms", "Kernels", "memset time", "ms",
           "summed memset durations",
           rank=lambda r: r.activity.memset_ns, rank_unit="ns", across="sum", better="lower",
           sources=GPU_ACTIVITY),
    Metric("kernel_names", "Kernels", "kernel names", "count",
           "distinct kernel names",
           rank=lambda r: r.kernel_names, across="max", sources=GPU),
    Metric("fp32_gemm_pct", "Kernels", "fp32 GEMM share of kernel time", "%",
           "GEMM kernels on CUDA cores in fp32 (kernel_classes.gemm_precision), percent of kernel"
           " time",
           rank=lambda r: r.fp32_gemm_pct, better="lower", sources=GPU),
    Metric("tensor_core_gemm_pct", "Kernels", "tensor-core GEMM share of kernel time", "%",
           "GEMM kernels on tensor cores (kernel_classes.gemm_precision), percent of kernel time",
           rank=lambda r: r.tensor_core_gemm_pct, better="higher", sources=GPU),
    # ---- GPU metrics (gpu_metrics: what the SMs did while the kernels ran)
    _gpu_metric("sm_active_pct", "SMs active", "%",
                f"cycles an SM had at least one warp in flight, percent ({_SPAN})", "higher"),
    _gpu_metric("sm_issue_pct", "SM issue", "%",
                f"SM instruction issue rate, percent of its peak ({_SPAN})", "higher"),
    _gpu_metric("tensor_active_pct", "tensor cores active", "%",
                f"cycles the tensor pipe was active, percent ({_SPAN})", "higher"),
    _gpu_metric("dram_read_pct", "DRAM read", "%",
                f"DRAM read throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("dram_write_pct", "DRAM write", "%",
                f"DRAM write throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("pcie_rx_pct", "PCIe receive", "%",
                f"PCIe receive (host to GPU) throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("pcie_tx_pct", "PCIe transmit", "%",
                f"PCIe transmit (GPU to host) throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("c2c_rx_pct", "NVLink-C2C receive", "%",
                f"GH200 NVLink-C2C receive throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("c2c_tx_pct", "NVLink-C2C transmit", "%",
                f"GH200 NVLink-C2C transmit throughput, percent of its peak ({_SPAN})", None),
    _gpu_metric("nvlink_rx_pct", "NVLink receive", "%",
                f"NVLink receive user data (requests and responses), percent of peak ({_SPAN})",
                None),
    _gpu_metric("nvlink_tx_pct", "NVLink transmit", "%",
                f"NVLink transmit user data (requests and responses), percent of peak ({_SPAN})",
                None),
    _gpu_metric("gpc_clock_mhz", "GPC clock", "MHz",
                f"graphics (SM) clock frequency ({_SPAN})", "higher"),
]  # fmt: skip


# ---- families: one metric per name the data holds
def _kernel_types(ranks: Sequence[RankMetrics]) -> list[str]:
    types: dict[str, float] = {}
    for r in ranks:
        for k, v in r.kernel_types.items():
            types[k] = types.get(k, 0.0) + v
    return sorted(types, key=lambda k: -types[k])


# short names of HTA's kernel types for the terminal (the JSON keeps HTA's)
_TYPE_SHORT = {"COMPUTATION": "comp", "COMMUNICATION": "comm", "MEMORY": "mem"}


def type_label(name: str) -> str:
    """`COMPUTATION overlapping COMMUNICATION` → `comp + comm`."""
    return " + ".join(_TYPE_SHORT.get(p, p.lower()) for p in name.split(" overlapping "))


def _kernel_type(name: str) -> Metric:
    return Metric(
        f"kernel_type_pct[{name}]", "Kernel types (HTA)", type_label(name), "%",
        f"HTA kernel types: time when exactly {name} ran, percent of the kernel-type time",
        rank=lambda r: r.kernel_types.get(name, 0.0) if r.kernel_types else None, sources=GPU,
    )  # fmt: skip


def _directions(ranks: Sequence[RankMetrics]) -> list[str]:
    return sorted({c.direction for r in ranks for c in r.copies})


def _copy(direction: str) -> Metric:
    return Metric(
        f"copy_bytes[{direction}]", "Memory traffic", f"{direction} copies", "bytes",
        f"bytes of the {direction} memcpys",
        rank=lambda r: float(_direction_bytes(r, direction)), across="sum", better="lower",
        sources=GPU_ACTIVITY,
    )  # fmt: skip


def _top_threads(ranks: Sequence[RankMetrics]) -> list[str]:
    names: dict[str, int] = {}
    for r in ranks:
        for t in r.threads:
            names[t.name] = names.get(t.name, 0) + t.cpu_op_ns + t.osrt_ns
    return sorted(names, key=lambda n: -names[n])[:4]  # cpu_op / OS-runtime time


def _thread(name: str) -> Metric:
    def ns(r: RankMetrics) -> float | None:
        ts = [t for t in r.threads if t.name == name]
        return sum(t.cpu_op_ns + t.osrt_ns for t in ts) if ts else None

    label = name if name.startswith("thread") else f"thread {name}"
    return Metric(
        f"thread_s[{name}]", "CPU activity", label, "s",
        f"CPU operators and OS-runtime time of the threads named {name}",
        rank=ns, rank_unit="ns", across="sum",
    )  # fmt: skip


# the memory family's (catalogue/memory_entries.py), after the others
CATALOGUE += MEMORY

FAMILIES: list[Family] = [
    Family("kernel_type_pct[TYPE]", "Kernel types (HTA)", "TYPE", "%",
           "HTA kernel types (get_gpu_kernel_breakdown): time when exactly a set of types ran"
           " (COMPUTATION, COMMUNICATION, MEMORY, overlapping), percent of their sum",
           _kernel_types, _kernel_type, GPU),
    Family("copy_bytes[DIRECTION]", "Memory traffic", "DIRECTION copies", "bytes",
           "bytes of the memcpys of one direction (HtoD, DtoH, DtoD, PtoP, UM ...)",
           _directions, _copy, GPU_ACTIVITY),
    Family("thread_s[NAME]", "CPU activity", "thread NAME", "s",
           "CPU operators and OS-runtime time of a thread (the four busiest)",
           _top_threads, _thread),
]  # fmt: skip
