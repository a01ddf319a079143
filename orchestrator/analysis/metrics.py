"""The Metrics model: one contract for what an nsys export or a Kineto trace says.

All times are integer nanoseconds (fields ending in `_ns`), all sizes bytes, percentages are
0-100. Definitions (also in docs/metrics.md):

- **span**: from the start of the first to the end of the last GPU activity (kernel, memcpy,
  memset) of one device of one rank.
- **busy**: length of the union of all kernel, memcpy and memset intervals over all streams of
  the device (overlaps on different streams count once). **idle** = span - busy.
- **idle gap**: a hole between two consecutive busy intervals of that union (so there are
  `merged intervals - 1` gaps); distribution: count, total, mean, p50/p90 (linear
  interpolation between order statistics), max and decade histogram buckets.
- **temporal**: Holistic Trace Analysis's temporal breakdown. HTA takes every GPU event of a rank
  (every event on a GPU stream), `span` = last end - first start, `idle` = span - union of all
  of them, `compute` = union of the events whose name HTA classifies as computation (not
  `^nccl.*Kernel`, not `^Memcpy|^Memset|^dma`, not containing `Memcpy` or `Sync`),
  `non_compute` = union - compute (i.e. time when only memory/communication/other events ran).
  For Kineto traces HTA also drops the kernels launched in the last `ProfilerStep` (when there are
  at least two) and rounds fractional-microsecond timestamps (ceil start, floor end): gh-run does
  the same, so `temporal` can differ slightly from `idle_pct` for Kineto traces.
- **activity**: summed durations of kernels, memcpys and memsets, and each one's share of their
  sum (equal to the share of busy time when activities do not overlap; the seed's
  "99.5% kernels vs 0.5% memory" reading).
- **copies**: memcpys by direction (HtoD, DtoH, DtoD, PtoP, UM HtoD/DtoH/DtoD migrations, other)
  with count, bytes, summed duration and bandwidth = bytes / summed duration (GB/s = 1e9 B/s).
- **unified memory**: CPU and GPU page faults (GPU: sum of `numberOfPageFaults`, and by access
  type), bytes migrated per direction (UM memcpy kinds), the migrations by direction and cause
  (nsys `migrationCause`: page fault, speculative prefetch, user prefetch, eviction, access
  counters), and the UM share of memory operations (UM migrations / all memcpys and memsets, by
  count) and of memory-operation time.
- **top kernels**: per kernel name: count, total, mean, share of kernel time; `compute` tells
  HTA's class.
- **nvtx**: NVTX push/pop and start/end ranges (Kineto: `user_annotation` and
  `gpu_user_annotation`) per name: count, total, mean, min, max. PyTorch's own operator ranges
  (`emit_nvtx`, nsys `--pytorch=autograd-nvtx`) are operators, not listed here.
- **operators**: CPU operators per name (Kineto `cpu_op`; an nsys export's PyTorch operator
  ranges, their op ids and shapes stripped): count, total, mean and self time (the time not
  spent in the operators each called, where its thread's operators nest), the 40 largest.
- **steps**: the durations of training-step ranges (names like `train_step`, `step_12`,
  `ProfilerStep#3`, `Training Step 7`, `iteration 4`); the family with most ranges wins.
- **threads**: CPU threads by name with the time they spent in OS-runtime calls (nsys `OSRT_API`,
  e.g. `pthread_cond_wait`, by function) and, for Kineto, the union of their `cpu_op` intervals.
- **sync**: CUDA synchronisation API calls (`cudaDeviceSynchronize`, `cudaStreamSynchronize`,
  `cudaEventSynchronize`, `cudaStreamWaitEvent`, ...): count and time.
- **data_wait_ns**: length of the union of the ranges whose name says the step waits for data
  (`DataLoader`, `dataloader`, `data_load`, `get_batch`, `next_batch`, `data_wait`, `data`;
  Kineto: CPU-side `user_annotation` ranges), clipped to the span: nested ranges count once,
  so data_wait_ns <= span_ns (without GPU activity: the unclipped union).
- **main thread**: the thread whose tid equals its process id, in the process that owns the CUDA
  streams (nsys `TARGET_INFO_CUDA_STREAM`/`TARGET_INFO_CUDA_CONTEXT_INFO`); when that does not
  single one out, the one named `pt_main_thread`/`python`/`python3`/`MainThread`.
  **main_thread_wait_ns**: the union of its blocking waits (`host.BLOCKING_WAITS`: condition
  variables, semaphores, mutexes, joins; not poll/read) clipped to the span; None when the trace
  has no OS-runtime rows or no main thread is identified (Kineto: always None).
- **offloading**: whether activation CPU offloading was on (True/False) with the evidence, or
  None when nothing says: the workload's metrics.json (`config.offload_activations`,
  `offloaded_bytes_per_step`), the run's `spec.lock.yaml` (`workload.cpu_offloading_layers`,
  a `cpu_offloading` override), else the Kineto trace's pattern (most DtoH bytes launched inside
  `forward` ranges and most HtoD bytes inside `backward` ranges).
- **peak_gpu_memory_bytes**: nsys `CUDA_GPU_MEMORY_USAGE_EVENTS` (running sum of allocations
  minus frees, per device, of device memory only: `memKind` 2 device, 3 array, 5 device static)
  or Kineto `[memory]` events (max `Total Allocated` on CUDA).
- **peak_pinned_memory_bytes**, **peak_managed_memory_bytes**: the same running sum for pinned
  host memory (`memKind` 1: e.g. offloaded activations) and managed memory (4, 6: Unified
  Memory, e.g. RMM's managed pool), kept apart because neither is device memory the GPU holds.
- **peak_gpu_memory_source**: where `peak_gpu_memory_bytes` came from. When the workload's own
  `metrics.json` (or `metrics_rank<N>.json` for rank N) sits beside a Kineto trace, its
  `peak_gpu_memory_bytes` (torch.cuda.max_memory_allocated over the whole run) wins over the
  trace's `[memory]` events (trace window only), and its step times land in `workload`.
- **timeline**: the span cut into equal buckets with the busy fraction (0-1) of each.
"""

# No `from __future__ import annotations`: Pydantic would compile and evaluate each of the
# ~200 string annotations of these models when they are defined, a few ms of every analyze
# (bench/bench_cli.py); every name a field uses is defined above it.
from typing import Literal

from orchestrator.analysis.gpu_metric_model import GpuMetrics
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.settings import RunSettings
from orchestrator.core.base import Strict

SCHEMA = "gh-run.metrics/1"


class Source(Strict):
    """One input file and how its rank (or ranks: one per process of an nsys export that ran
    GPU work) was found."""

    path: str
    kind: Literal["nsys-sqlite", "kineto-json", "torch-snapshot"]
    tool_version: str | None = None
    rank: int
    rank_rule: str
    ranks: list[int] = []
    rank_note: str | None = None
    missing: list[str] = []
    notes: list[str] = []
    # how to open the whole timeline of this input in a viewer (Nsight Systems, Perfetto)
    open_with: str | None = None


class Bucket(Strict):
    """Histogram bucket [lo_ns, hi_ns); hi_ns None = unbounded."""

    lo_ns: int
    hi_ns: int | None
    count: int
    total_ns: int


class GapStats(Strict):
    """Distribution of idle gaps between merged busy intervals."""

    count: int = 0
    total_ns: int = 0
    mean_ns: float = 0.0
    p50_ns: float = 0.0
    p90_ns: float = 0.0
    max_ns: int = 0
    buckets: list[Bucket] = []


class Temporal(Strict):
    """HTA temporal breakdown (see the module docstring)."""

    span_ns: int = 0
    idle_ns: int = 0
    compute_ns: int = 0
    non_compute_ns: int = 0
    idle_pct: float = 0.0
    compute_pct: float = 0.0
    non_compute_pct: float = 0.0
    basis: str = ""
    # events that HTA's rounding (start up, end down to whole microseconds) turned inside out
    # (end before start: sub-microsecond events within one microsecond), counted as empty
    clamped_events: int = 0


class Activity(Strict):
    """Summed durations of GPU activity by kind and their shares of the sum."""

    kernel_count: int = 0
    memcpy_count: int = 0
    memset_count: int = 0
    kernel_ns: int = 0
    memcpy_ns: int = 0
    memset_ns: int = 0
    kernel_pct: float = 0.0
    memcpy_pct: float = 0.0
    memset_pct: float = 0.0


class CopyDirection(Strict):
    """Memory copies of one direction."""

    direction: str
    count: int
    bytes: int
    total_ns: int
    bandwidth_gb_s: float | None


class UmMigrationCause(Strict):
    """UM migrations of one direction for one cause (nsys `migrationCause`: "page fault" =
    CUPTI's coherence migration, driven by a CPU or GPU fault; "speculative prefetch" = the
    driver moving neighbouring pages with a faulted one; "user prefetch" = cudaMemPrefetchAsync;
    "eviction" = pages pushed out of a full GPU (oversubscription); "access counters")."""

    direction: str
    cause: str
    count: int
    bytes: int
    total_ns: int


class UnifiedMemory(Strict):
    """Unified-Memory page faults and migrations; None = not traced."""

    cpu_page_faults: int | None = None
    gpu_page_faults: int | None = None
    gpu_fault_groups: int | None = None
    migrations: int = 0
    migrated_htod_bytes: int = 0
    migrated_dtoh_bytes: int = 0
    migrated_dtod_bytes: int = 0
    migration_ns: int = 0
    share_of_memory_ops_pct: float = 0.0
    share_of_memory_time_pct: float = 0.0
    # migrations by direction and cause (nsys exports with `migrationCause`; empty otherwise)
    by_cause: list[UmMigrationCause] = []
    # GPU page faults by the access that raised them (read, write, atomic, prefetch)
    gpu_faults_by_access: dict[str, int] = {}


class KernelStat(Strict):
    """One kernel name."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    share_pct: float
    compute: bool


class RangeStat(Strict):
    """One NVTX / annotation range name."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int


class StepPattern(Strict):
    """Steps markedly slower than the median (`step_pattern`): which, of how many, at what period
    (every Nth step; None: no period), how much longer on average, and the idle cause whose time
    in them makes most of the difference (None: none does: the GPU's own work is longer)."""

    slow_steps: list[str]
    of: int
    every: int | None = None
    median_ms: float
    extra_ms: float
    cause: str | None = None
    cause_ms: float = 0.0
    evidence: str = ""


class OperatorStat(Strict):
    """One CPU operator (Kineto `cpu_op`, PyTorch's NVTX operator ranges in an nsys export):
    its calls, their summed time, and the part of it not spent in the operators it called
    (`self_ns`; None where its thread's operators do not nest)."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    self_ns: int | None = None


class StepStats(Strict):
    """Training-step durations: of the workload's own step ranges, or of steps a rule found in
    the trace (`step_rules`: `rule` says which, `evidence` what it read). `realigned`: boundaries
    the idle attribution moved to where the workload's step ends (`step_rules.realign`);
    `pattern`: the slow steps and their cause."""

    family: str
    rule: str = "ranges"
    evidence: str | None = None
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    p90_ns: float
    min_ns: int
    max_ns: int
    durations_ns: list[int]
    realigned: int = 0
    pattern: StepPattern | None = None


class FunctionStat(Strict):
    """Calls of one function (OS runtime or CUDA API)."""

    name: str
    count: int
    total_ns: int


class ThreadStat(Strict):
    """One CPU thread."""

    tid: int
    pid: int | None = None
    name: str
    # the rank's main thread (`RankMetrics.main_thread`): names are not unique
    main: bool = False
    osrt_calls: int = 0
    osrt_ns: int = 0
    cpu_op_ns: int = 0
    functions: list[FunctionStat] = []


class SyncStats(Strict):
    """CUDA synchronisation API calls. `total_ns` sums the calls (two threads syncing at once
    count twice); `wall_ns` is their union clipped to the span: the time some host thread was
    blocked in a sync, which is what a share of the span is taken of (never over 100 %)."""

    calls: int = 0
    total_ns: int = 0
    wall_ns: int = 0
    # the part of wall_ns while the GPU was idle: what syncs cost the GPU (waiting for a busy
    # GPU costs it nothing)
    idle_wall_ns: int = 0
    functions: list[FunctionStat] = []


class IdleInterval(Strict):
    """One examined GPU-idle interval as it was judged: where, how long, the part of it before
    the next work's launch (the host window), each class's share of that window, the claims."""

    start_ns: int
    length_ns: int
    window_ns: int
    shares_pct: dict[str, float] = {}
    claims: dict[str, int] = {}  # class -> ns of the interval claimed for it
    evidence: str = ""


class IdleCause(Strict):
    """One cause of GPU idle time (`idle_causes`): its class, the idle time its intervals hold
    (per step where the rank has steps) and what the host did in them. `ms_per_step` is the GPU
    time the cause costs a step (what removing it would give back); `knob` what removes it."""

    cause: str
    label: str
    total_ns: int
    gaps: int
    ms_per_step: float
    share_of_idle_pct: float
    evidence: str
    knob: str = ""
    # the longest intervals claimed for this cause, as judged (at most `idle_causes.EXAMPLES`)
    examples: list[IdleInterval] = []


class LaunchStats(Strict):
    """How the host kept the GPU fed between short kernels (`idle_causes.launch_stats`): kernels
    and launches per step, the median kernel and the median spacing of their launches, the GPU
    idle in gaps shorter than the intervals examined whose next work was launched after the gap
    began (the GPU waited for the launch), and in those launched before (back to back)."""

    kernels: int = 0
    kernels_per_step: float = 0.0
    median_kernel_us: float = 0.0
    median_launch_interval_us: float = 0.0
    launch_wait_ns: int = 0
    launch_wait_gaps: int = 0
    back_to_back_ns: int = 0
    sync_drain_ns: int = 0
    sync_drain_gaps: int = 0


class IdleCauses(Strict):
    """Why the GPU waits: the idle intervals holding most idle time, by cause, largest first.
    `steps`: what the per-step figures divide by (0: no steps, figures over the span).
    `baseline_ms`: the host work that recurs before each batch's copy (`idle_classes`), over
    `preambles` batches; None with fewer than two."""

    steps: int = 0
    idle_ns: int = 0
    examined_ns: int = 0
    examined_gaps: int = 0
    min_gap_ns: int = 0
    causes: list[IdleCause] = []
    evidence_read: list[str] = []
    baseline_ms: float | None = None
    preambles: int = 0
    launch: LaunchStats | None = None


class LeverProjection(Strict):
    """One lever replayed on the step's dependency structure (`critical_path`): the step it
    would leave at the knob's typical effect (`step_ms`) and at the ends of its range, what
    it gives back, and the assumption in one line."""

    lever: str
    step_ms: float
    low_ms: float
    high_ms: float
    removed_ms: float
    assumption: str
    # the GPU's own time in the step it would leave (its work and its waits on its own side):
    # what a capture's cost on the host cannot stretch (`presentation.projections`)
    gpu_ms: float | None = None


class StepProjections(Strict):
    """The levers' projections of one entry: `base_ms` the step they start from (the mean
    step over the steps the span shows; the span where there are none: `basis`)."""

    base_ms: float
    basis: str
    # whole steps between the boundaries the span shows (0: fewer than two, the projection
    # scales the span by the step instead, which a wait at the step boundaries does not fit)
    whole_steps: int = 0
    levers: list[LeverProjection] = []
    # the GPU's own time in the step as captured (its work and its waits on its own side)
    gpu_ms: float | None = None


class Timeline(Strict):
    """Busy fraction (0-1) per equal time bucket of the span."""

    start_ns: int = 0
    bucket_ns: int = 0
    busy_fraction: list[float] = []


class StreamIdle(Strict):
    """Idle time of one GPU stream by cause (HTA's get_idle_time_breakdown)."""

    stream: int
    host_wait_ns: int = 0
    kernel_wait_ns: int = 0
    other_ns: int = 0


class IdleBreakdown(Strict):
    """HTA's `get_idle_time_breakdown`: the gaps between consecutive kernels, memcpys and
    memsets of each stream, by cause. host wait: the next one was launched after the previous
    one ended (the CPU did not enqueue work fast enough); kernel wait: a gap shorter than
    `kernel_wait_threshold_ns` (launch overhead of back-to-back work); other: the rest (e.g. a
    stream waiting for an event of another stream). Percentages are of the summed idle time of
    all streams. `clamped_gaps`: gaps where two events of one stream overlap (negative; HTA
    subtracts them), counted as zero."""

    host_wait_ns: int = 0
    kernel_wait_ns: int = 0
    other_ns: int = 0
    host_wait_pct: float = 0.0
    kernel_wait_pct: float = 0.0
    other_pct: float = 0.0
    kernel_wait_threshold_ns: int = 30_000
    clamped_gaps: int = 0
    streams: list[StreamIdle] = []


class ProfilerOverhead(Strict):
    """The profiler's own cost (`profiler_overhead`): what nsys recorded of its overhead inside
    the GPU span (union, percent of the span, the largest by name), and, where the workload's
    metrics.json gives each step's wall and the capture window, its median step inside the
    capture against outside it, and its mean step outside. None fields: not measured."""

    recorded_ns: int = 0
    recorded_pct_of_span: float = 0.0
    recorded_by_name: dict[str, int] = {}
    window_step_ms: float | None = None
    outside_step_ms: float | None = None
    # the mean step outside the capture (every step counted: a stall one step in N included),
    # over `outside_steps` steps
    outside_mean_ms: float | None = None
    outside_steps: int | None = None
    # of those, the steps after the window (past the one that pays the profiler's flush)
    outside_after: int | None = None
    slowdown_pct: float | None = None


class WorkloadReport(Strict):
    """Numbers the workload measured itself (its metrics.json), beside the trace."""

    path: str
    steps: int | None = None
    median_step_time_s: float | None = None
    step_times_s: list[float] = []
    tokens_per_s: float | None = None
    peak_gpu_memory_bytes: int | None = None


class ViewEvent(Strict):
    """One event of a step view (times from the view's start); `count` > 1: neighbours too
    small to see at the picture's resolution merged into one (`name` is the longest of them)."""

    start_ns: int
    end_ns: int
    name: str
    count: int = 1
    # summed time of the merged events (<= end - start: the gaps between them are idle)
    busy_ns: int = 0


class ViewRow(Strict):
    """One row of a step view: a GPU stream's kernels, copies of one direction, memsets, a
    level of NVTX ranges, the main thread's blocking waits, or a busy CPU thread."""

    kind: Literal["kernels", "copies", "memsets", "nvtx", "waits", "thread"]
    label: str
    events: list[ViewEvent] = []
    # events of the source in the window (before merging) and their summed time in it
    source_events: int = 0
    busy_ns: int = 0


class StepView(Strict):
    """One representative step of an entry (the median-duration training step; the whole span
    when the trace has no steps) as bounded rows of events, for the report's timeline picture."""

    window: str
    start_ns: int
    end_ns: int
    rows: list[ViewRow] = []
    # what the picture leaves out (streams or threads beyond the cap)
    left_out: list[str] = []


class RankMetrics(Strict):
    """Everything about one device of one rank."""

    rank: int
    devices: list[int]
    device_name: str | None = None
    source: str
    pid: int | None = None
    span_start_ns: int = 0
    span_end_ns: int = 0
    span_ns: int = 0
    busy_ns: int = 0
    idle_ns: int = 0
    busy_pct: float = 0.0
    idle_pct: float = 0.0
    idle_gaps: GapStats = GapStats()
    temporal: Temporal = Temporal()
    # HTA kernel types (get_gpu_kernel_breakdown, memory kernels included): percent of the time
    # GPU events of any type ran, per type and overlap of types, named as HTA names them
    kernel_types: dict[str, float] = {}
    kernel_types_ns: dict[str, int] = {}
    # HTA get_comm_comp_overlap: share of communication time overlapped by computation; None
    # without communication kernels
    comm_comp_overlap_pct: float | None = None
    idle_breakdown: IdleBreakdown | None = None
    # why the GPU waits (`idle_causes`), on the rank's first entry
    idle_causes: IdleCauses | None = None
    # what removing each cost would leave of the step (`critical_path`), on the first entry
    projections: StepProjections | None = None
    profiler_overhead: ProfilerOverhead | None = None
    activity: Activity = Activity()
    copies: list[CopyDirection] = []
    unified_memory: UnifiedMemory = UnifiedMemory()
    top_kernels: list[KernelStat] = []
    kernel_names: int = 0
    fp32_gemm_pct: float = 0.0
    tensor_core_gemm_pct: float = 0.0
    nvtx: list[RangeStat] = []
    # CPU operators by total time (`families.operators`), on the rank's first entry
    operators: list[OperatorStat] = []
    steps: StepStats | None = None
    # why no step was found (`step_rules`: each rule's reason for stepping aside)
    no_steps: str | None = None
    data_wait_ns: int = 0
    main_thread: str | None = None
    main_thread_rule: str | None = None
    main_thread_wait_ns: int | None = None
    offloading: bool | None = None
    offloading_evidence: str | None = None
    threads: list[ThreadStat] = []
    sync: SyncStats = SyncStats()
    peak_gpu_memory_bytes: int | None = None
    peak_gpu_memory_source: str | None = None
    # nsys: peaks of pinned host memory and of managed (Unified) memory, kept out of
    # peak_gpu_memory_bytes (device memory only); None when the trace has no such allocation
    peak_pinned_memory_bytes: int | None = None
    peak_managed_memory_bytes: int | None = None
    workload: WorkloadReport | None = None
    timeline: Timeline = Timeline()
    step_view: StepView | None = None
    # nsys GPU metrics of the entry's GPU (None: not sampled)
    gpu_metrics: GpuMetrics | None = None
    # memory over the history a source recorded (families/memory_use.py): a PyTorch snapshot
    # of this rank, else the trace's own memory events; None: no source recorded it
    memory: MemoryUse | None = None
    notes: list[str] = []
    # figures of the metric catalogue that a family computes from the entry's timeline
    # (`catalogue.Metric.compute`), by the metric's key; None where the entry has none
    figures: dict[str, float | None] = {}


class Aggregate(Strict):
    """Across ranks: means (and extremes) of the per-rank numbers."""

    ranks: int = 0
    span_ns: int = 0
    busy_pct_mean: float = 0.0
    idle_pct_mean: float = 0.0
    idle_pct_max: float = 0.0
    idle_gaps: int = 0
    temporal_idle_pct_mean: float = 0.0
    temporal_compute_pct_mean: float = 0.0
    temporal_non_compute_pct_mean: float = 0.0
    # HTA kernel types over all ranks: summed time per type / summed time of all types
    kernel_types: dict[str, float] = {}
    comm_comp_overlap_pct_mean: float | None = None
    kernel_pct_mean: float = 0.0
    memcpy_pct_mean: float = 0.0
    kernels: int = 0
    copy_bytes: int = 0
    htod_bytes: int = 0
    dtoh_bytes: int = 0
    um_share_of_memory_ops_pct_mean: float = 0.0
    step_mean_ns: float | None = None
    workload_step_median_s: float | None = None
    tokens_per_s: float | None = None
    sync_ns: int = 0
    osrt_ns: int = 0
    cpu_op_ns: int = 0
    peak_gpu_memory_bytes: int | None = None
    peak_pinned_memory_bytes: int | None = None
    peak_managed_memory_bytes: int | None = None


class RankSpread(Strict):
    """One metric across ranks: min / median / max, and the rank with the worst value."""

    metric: str
    unit: str
    min: float
    median: float
    max: float
    min_rank: str
    max_rank: str
    worst_rank: str
    # "higher" or "lower": which direction is worse for this metric
    worse: str
    # the metric's key in the catalogue (docs/metrics.md); `metric` is its label here
    key: str = ""


class SkewStats(Strict):
    """Spread of an event across ranks (max start - min start, or longest - shortest step),
    over the events matched on every rank."""

    matched: int = 0
    median_ns: float = 0.0
    p90_ns: float = 0.0
    max_ns: int = 0
    # the rank that was last (collectives) or slowest (steps), and how often
    latest_rank: str | None = None
    latest_share_pct: float = 0.0
    how: str = ""


class Straggler(Strict):
    """The rank that most likely holds the others back, with the evidence."""

    rank: int
    entry: str
    rule: str
    evidence: dict[str, float]
    message: str


class CrossRank(Strict):
    """The cross-rank view: spreads per metric, step-time and collective-start skew, straggler."""

    entries: int = 0
    metrics: list[RankSpread] = []
    step_time_skew: SkewStats | None = None
    collective_start_skew: SkewStats | None = None
    straggler: Straggler | None = None
    notes: list[str] = []


class RankedFinding(Strict):
    """One finding as every view ranks it: the rule, the entry, what it costs (ms per step, or
    in the whole capture where the run has no steps: `cost_basis`; None: no time can be put on
    it), why and the knob."""

    rule: str
    rank: int
    cost_ms: float | None = None
    cost_basis: str | None = None
    cause: str
    message: str
    knob: str
    # the step its knob would leave (presentation.projections), with the range, and the one
    # line every view shows (None: no projection; the line then says why where it can)
    projected_ms: float | None = None
    projected_low_ms: float | None = None
    projected_high_ms: float | None = None
    projection: str | None = None


class Metrics(Strict):
    """Top level: sources, per-rank metrics, the aggregate and the cross-rank view."""

    format: str = SCHEMA
    label: str | None = None
    # what ran, for the advice's wording: "nemo" (Hydra overrides), "reference" (the
    # workloads.sft flags) or "generic"; `workload_kind_evidence` says what told
    workload_kind: Literal["nemo", "reference", "generic"] = "generic"
    workload_kind_evidence: str | None = None
    # why several inputs were read as the ranks of one job (`captures.tied`); empty for one
    inputs_tied_by: list[str] = []
    # what the run was set to (workers, precision, PEFT, ...), each with where it was read
    settings: RunSettings = RunSettings()
    sources: list[Source]
    ranks: list[RankMetrics]
    aggregate: Aggregate
    cross_rank: CrossRank = CrossRank()
    # the findings (presentation.advise) ranked by what each costs a step, as analyze, the
    # verdict and the report show them: filled where the metrics are shown (analyze --json)
    findings: list[RankedFinding] = []


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def aggregate(ranks: list[RankMetrics]) -> Aggregate:
    """Aggregate per-rank metrics (means over ranks; sums of counts and bytes)."""
    if not ranks:
        return Aggregate()
    steps = [r.steps.mean_ns for r in ranks if r.steps]
    peaks = [r.peak_gpu_memory_bytes for r in ranks if r.peak_gpu_memory_bytes is not None]
    wl_steps = [
        r.workload.median_step_time_s
        for r in ranks
        if r.workload and r.workload.median_step_time_s is not None
    ]
    tok = [r.workload.tokens_per_s for r in ranks if r.workload and r.workload.tokens_per_s]
    bytes_by = {"HtoD": 0, "DtoH": 0}
    for r in ranks:
        for c in r.copies:
            if c.direction in bytes_by:
                bytes_by[c.direction] += c.bytes
    overlaps = [r.comm_comp_overlap_pct for r in ranks if r.comm_comp_overlap_pct is not None]
    return Aggregate(
        ranks=len(ranks),
        span_ns=max(r.span_ns for r in ranks),
        busy_pct_mean=_mean([r.busy_pct for r in ranks]),
        idle_pct_mean=_mean([r.idle_pct for r in ranks]),
        idle_pct_max=max(r.idle_pct for r in ranks),
        idle_gaps=sum(r.idle_gaps.count for r in ranks),
        temporal_idle_pct_mean=_mean([r.temporal.idle_pct for r in ranks]),
        temporal_compute_pct_mean=_mean([r.temporal.compute_pct for r in ranks]),
        temporal_non_compute_pct_mean=_mean([r.temporal.non_compute_pct for r in ranks]),
        kernel_types=kernel_type_shares(ranks),
        comm_comp_overlap_pct_mean=_mean(overlaps) if overlaps else None,
        kernel_pct_mean=_mean([r.activity.kernel_pct for r in ranks]),
        memcpy_pct_mean=_mean([r.activity.memcpy_pct for r in ranks]),
        kernels=sum(r.activity.kernel_count for r in ranks),
        copy_bytes=sum(c.bytes for r in ranks for c in r.copies),
        htod_bytes=bytes_by["HtoD"],
        dtoh_bytes=bytes_by["DtoH"],
        um_share_of_memory_ops_pct_mean=_mean(
            [r.unified_memory.share_of_memory_ops_pct for r in ranks]
        ),
        step_mean_ns=_mean(steps) if steps else None,
        workload_step_median_s=max(wl_steps) if wl_steps else None,
        tokens_per_s=sum(tok) if tok else None,
        sync_ns=sum(r.sync.total_ns for r in ranks),
        osrt_ns=sum(t.osrt_ns for r in ranks for t in r.threads),
        cpu_op_ns=sum(t.cpu_op_ns for r in ranks for t in r.threads),
        peak_gpu_memory_bytes=max(peaks) if peaks else None,
        peak_pinned_memory_bytes=_max_of([r.peak_pinned_memory_bytes for r in ranks]),
        peak_managed_memory_bytes=_max_of([r.peak_managed_memory_bytes for r in ranks]),
    )


def _max_of(values: list[int | None]) -> int | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def kernel_type_shares(ranks: list[RankMetrics]) -> dict[str, float]:
    """HTA's kernel-type percentages over ranks: summed time per type / summed time of all
    types (largest first)."""
    tot: dict[str, int] = {}
    for r in ranks:
        for k, v in r.kernel_types_ns.items():
            tot[k] = tot.get(k, 0) + v
    whole = sum(tot.values())
    if not whole:
        return {}
    return {k: 100.0 * v / whole for k, v in sorted(tot.items(), key=lambda kv: -kv[1]) if v}


def merged_operators(
    ranks: list[RankMetrics], n: int = 8
) -> list[tuple[str, int, int, int | None]]:
    """The CPU operators of every entry merged by name: (name, count, total_ns, self_ns; None
    where an entry measured no self time for it), the n with most time first."""
    tot: dict[str, list[int | None]] = {}
    for r in ranks:
        for o in r.operators:
            x = tot.setdefault(o.name, [0, 0, 0])
            x[0] = int(x[0] or 0) + o.count
            x[1] = int(x[1] or 0) + o.total_ns
            x[2] = None if x[2] is None or o.self_ns is None else x[2] + o.self_ns
    rows = [(k, int(v[0] or 0), int(v[1] or 0), v[2]) for k, v in tot.items()]
    rows.sort(key=lambda x: (-x[2], x[0]))
    return rows[:n]


def merged_top_kernels(ranks: list[RankMetrics], n: int = 8) -> list[tuple[str, int, int, float]]:
    """The top kernels of every entry merged by name: (name, count, total_ns, share of all
    entries' kernel time in percent), the n with most time first."""
    tot: dict[str, list[int]] = {}
    for r in ranks:
        for k in r.top_kernels:
            x = tot.setdefault(k.name, [0, 0])
            x[0] += k.count
            x[1] += k.total_ns
    whole = sum(r.activity.kernel_ns for r in ranks) or 1
    ranked = sorted(tot.items(), key=lambda kv: -kv[1][1])[:n]
    return [(name, c, t, 100.0 * t / whole) for name, (c, t) in ranked]
