"""Rules that turn metrics into likely causes and the knob to turn (from the seed material).

Each rule cites the metrics that fired it (`evidence`) and the thresholds below. The knobs are
phrased for the workload that ran (`KNOBS`, by `Metrics.workload_kind`): NeMo's Hydra overrides
(quoted below), the reference workload's flags, or generic PyTorch.

Every piece of advice carries what its cause costs a step (`cost_ms`, `costs`), and `advise`
ranks them by it (`ranked`): the order analyze, the verdict, the report and `analyze --json`
show.

- data-loader: GPU idle >= 10 % of the span and either the data-wait ranges (their union inside
  the span) or the idle `idle_causes` claims for input (loading on the main thread, waiting on
  the loader while its workers run) >= 5 % of it → `model.data.num_workers=4` (more
  data-loader workers); the message gives the GPU time lost per step and its evidence. The
  main thread's blocking waits (condition variables, semaphores, ... inside the span) are cited
  when measured, but never fire the rule alone: a wait says the thread waited, not that it
  waited for data.
- offload-traffic: HtoD + DtoH copies >= 10 % of GPU activity time, both directions present, and
  evidence that activation offloading is on (`RankMetrics.offloading`: the workload's
  metrics.json, the run's spec.lock.yaml or the trace's forward/backward copy pattern)
  → the memory/speed trade-off: fewer offloaded layers (`+model.cpu_offloading_num_layers`) or
  `+model.cpu_offloading=False`.
- host-device-copies: the same copy share without evidence of offloading, or the host side of
  pageable copies (`idle_causes` claims for copy-staging: the driver staging the copy, the host
  releasing the pageable batch it copied) >= 5 % of the median step → pinned host memory,
  asynchronous copies overlapped with compute, fewer and larger transfers; costed as the time
  only copies ran plus the idle claimed for their host side.
- fp32-kernels: fp32 GEMM kernels (`kernel_classes.gemm_precision`) >= 10 % of kernel time
  → `trainer.precision=bf16-mixed`.
- unified-memory: UM migrations >= 5 % of memory operations or >= 10 % of their time (with the
  migrated bytes by cause, nsys `migrationCause`, where the trace says)
  → keep the working set on the GPU (`model.peft.peft_scheme=lora`) or prefetch.
- host-compute, launch-bound, idle-unclassified: the idle claimed for that cause >= 5 % of the
  span → the cause's knob (`idle_causes.KNOBS`), its evidence in the message.
- sync-overhead: CUDA sync calls while the GPU is idle >= 10 % of the span, or the idle claimed
  for sync (the calls and the drains after them) >= 5 % → remove per-step host syncs. A sync that
  waits for a busy GPU costs the GPU nothing and does not count.
- low-overlap: communication kernels >= 10 % of the kernel-type time and computation overlaps
  < 50 % of the communication time (HTA's comm/comp overlap) → overlap gradient reduction with
  backward (DDP buckets, NeMo `overlap_grad_sync`); on a rank that waits for a named straggler
  (it starts its collectives last) the communication time is mostly that wait: the advice says so
  and points at the straggler first.
- straggler: the cross-rank view names a rank that starts its collectives last (or has the
  slowest steps) → look at that rank's host work, GPU and node.

No per-rank rule fires on a rank without kernels: its span (first to last copy or memset) is
no window to judge data waits, copies or syncs by (`verdict.holdings` says what such a trace
holds instead).

Each knob respects what the run was set to (`Metrics.settings`: its metrics.json, the command
nsys launched, its spec.lock.yaml) and says what it checked (`Advice.checked`): no "more
workers" as if the run had none when it ran with 4 (it says the wait remains with 4), no
"--peft lora" for a run that uses LoRA, no "bf16" for a run in bf16 (its fp32 GEMMs run outside
autocast), no "offload fewer layers" without offloading on.
"""

from __future__ import annotations

from orchestrator.analysis.metrics import IdleCause, Metrics, RankMetrics
from orchestrator.analysis.presentation import capture_cost, costs
from orchestrator.analysis.presentation.projections import Projection
from orchestrator.analysis.settings import RunSettings, is_low_precision, uses_lora
from orchestrator.core.base import Strict

IDLE_PCT = 10.0
DATA_WAIT_PCT = 5.0
COPY_PCT = 10.0
FP32_PCT = 10.0
UM_OPS_PCT = 5.0
UM_TIME_PCT = 10.0
SYNC_PCT = 10.0
COMM_SHARE_PCT = 10.0
LOW_OVERLAP_PCT = 50.0
IDLE_CAUSE_PCT = 5.0  # an idle cause (host compute, ...) of the median step (the span)

# The knob of each rule in the words of the workload that ran (`Metrics.workload_kind`): NeMo's
# Hydra overrides, the reference workload's own flags (workloads/sft.py), or generic PyTorch.
KNOBS: dict[str, dict[str, str]] = {
    "data-loader": {
        "nemo": "model.data.num_workers=4 (more data-loader worker processes)",
        "reference": "--num-workers 4 (DataLoader worker processes; 0 loads in the loop)",
        "generic": "DataLoader(num_workers=4, pin_memory=True): load the next batches in"
        " worker processes while the GPU computes",
    },
    "offload-traffic": {
        "nemo": "+model.cpu_offloading_num_layers=<fewer> (or +model.cpu_offloading=False"
        " when memory allows)",
        "reference": "drop --offload-activations when GPU memory allows (or"
        " --activation-checkpointing: recompute instead of copying)",
        "generic": "offload fewer activation layers to the CPU, or none when GPU memory allows"
        " (activation checkpointing recomputes instead of copying)",
    },
    "fp32-kernels": {
        "nemo": "trainer.precision=bf16-mixed",
        "reference": "--precision bf16",
        "generic": "bf16 mixed precision: torch.autocast('cuda', dtype=torch.bfloat16) (or"
        " torch.backends.cuda.matmul.allow_tf32=True)",
    },
    "unified-memory": {
        "nemo": "keep the working set on the GPU (model.peft.peft_scheme=lora) or prefetch"
        " (cudaMemPrefetchAsync / rmm prefetch)",
        "reference": "--peft lora (a working set that stays on the GPU), or drop"
        " --unified-memory / a smaller --um-host-touch-mb",
        "generic": "keep the working set on the GPU (e.g. LoRA instead of full fine-tuning)"
        " or prefetch (cudaMemPrefetchAsync / rmm prefetch)",
    },
    "low-overlap": {
        "nemo": "model.optim.overlap_grad_sync=True (and model.optim.overlap_param_sync=True):"
        " overlap the reduction with backward",
        "reference": "the reference workload's --ddp has no overlap flag: DDP(bucket_cap_mb=...)"
        " in workloads/distributed.py (smaller buckets start the all-reduce earlier)",
        "generic": "overlap the reduction with backward: DDP bucket_cap_mb (smaller buckets"
        " start earlier), FSDP backward_prefetch, NeMo/Megatron overlap_grad_sync",
    },
}


def knob(rule: str, kind: str) -> str:
    """The knob of `rule` in the words of the workload kind (generic for an unknown kind)."""
    words = KNOBS[rule]
    return words.get(kind, words["generic"])


class Advice(Strict):
    """One fired rule. `checked`: the run's setting the knob was chosen by (or that no source
    said it), so a reader sees why this knob and not another."""

    rule: str
    rank: int
    cause: str
    knob: str
    evidence: dict[str, float]
    message: str
    checked: str | None = None
    # the GPU time the cause costs (`costs`): ms per step, or in the whole capture where the
    # run has no steps (`cost_basis`); None where no time can be put on it (GPU-metric rules)
    cost_ms: float | None = None
    cost_basis: str | None = None
    # what the knob would leave of the step (`projections`), set by `advise`
    projection: Projection | None = None


class AdviceGroup(Strict):
    """One rule that fired alike on many ranks, for reading (`fold`): the ranks, the range of
    each piece of evidence over them, and one of them as the example."""

    rule: str
    ranks: list[int]
    of: int  # entries analysed
    cause: str
    knob: str
    evidence_range: dict[str, tuple[float, float]]
    example: Advice
    message: str
    checked: str | None = None
    projection: Projection | None = None


FOLD_OVER = 3  # a rule that fires on more ranks than this is one line for all of them


def rank_ranges(ranks: list[int]) -> str:
    """`0-36, 38-63`: sorted ranks as runs of consecutive numbers."""
    out: list[str] = []
    rs = sorted(set(ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


def _num(v: float) -> str:
    return f"{v:.0f}" if v == int(v) else f"{v:.1f}"


def fold(advice: list[Advice], entries: int, over: int = FOLD_OVER) -> list[Advice | AdviceGroup]:
    """The advice to show: a rule that fires with the same cause and knob on more than `over`
    ranks becomes one `AdviceGroup` (in the place of its first rank); the rest stay as they are.
    `advise` keeps every rank's advice (JSON); 64 ranks then read as a few lines."""
    groups: dict[tuple[str, str, str], list[Advice]] = {}
    for a in advice:
        groups.setdefault((a.rule, a.cause, a.knob), []).append(a)
    out: list[Advice | AdviceGroup] = []
    for a in advice:
        same = groups[(a.rule, a.cause, a.knob)]
        if len(same) <= over:
            out.append(a)
            continue
        if a is not same[0]:
            continue
        keys = [k for k in a.evidence if all(k in b.evidence for b in same)]
        ranges = {
            k: (min(b.evidence[k] for b in same), max(b.evidence[k] for b in same)) for k in keys
        }
        shown = ", ".join(
            f"{k} {_num(lo)}" if lo == hi else f"{k} {_num(lo)}-{_num(hi)}"
            for k, (lo, hi) in ranges.items()
        )
        ranks = [b.rank for b in same]
        out.append(
            AdviceGroup(
                rule=a.rule,
                ranks=ranks,
                of=entries,
                cause=a.cause,
                knob=a.knob,
                evidence_range=ranges,
                example=a,
                checked=a.checked,
                projection=a.projection,
                message=(
                    f"ranks {rank_ranges(ranks)} ({len(same)} of {entries}): {shown}; e.g."
                    f" {a.message}"
                ),
            )
        )
    return out


def _unknown(what: str) -> str:
    return f"the run's settings do not say {what} (no metrics.json config, command or spec)"


def data_loader_knob(kind: str, st: RunSettings) -> tuple[str, str]:
    """(knob, checked) of the data-loader rule: more workers from none; from some, the wait
    remains with them, so twice as many and cheaper items."""
    w = st.data_workers
    if w is None or not isinstance(w.value, int) or isinstance(w.value, bool):
        return knob("data-loader", kind), _unknown("how many data-loader workers it used")
    if w.value == 0:
        return knob("data-loader", kind), w.source
    more = max(2 * w.value, w.value + 2)
    words = {
        "nemo": f"model.data.num_workers={more}",
        "reference": f"--num-workers {more}",
        "generic": f"DataLoader(num_workers={more}, pin_memory=True, prefetch_factor=4)",
    }
    return (
        f"{words.get(kind, words['generic'])}: the wait remains with {w.value} workers, so"
        " loading one batch takes longer than a step; also make items cheaper (tokenise and"
        " collate ahead of training)",
        w.source,
    )


def unified_memory_knob(kind: str, st: RunSettings) -> tuple[str, str]:
    """(knob, checked) of the unified-memory rule: LoRA only for a run that does not use it."""
    p = st.peft
    if p is not None and uses_lora(p.value):
        words = {
            "nemo": "prefetch the pages the host touches (cudaMemPrefetchAsync / rmm prefetch),"
            " or run without Unified Memory (unified_memory: false)",
            "reference": "a smaller --um-host-touch-mb (the host touches fewer managed pages)"
            " or drop --unified-memory",
            "generic": "prefetch the pages the host touches (cudaMemPrefetchAsync / rmm"
            " prefetch), or keep host access off the managed pool",
        }
        return f"{words.get(kind, words['generic'])}; it already uses {p.value}", p.source
    return knob("unified-memory", kind), p.source if p is not None else _unknown(
        "which PEFT scheme it used"
    )


def fp32_knob(kind: str, st: RunSettings) -> tuple[str, str]:
    """(knob, checked) of the fp32 rule: bf16 only for a run that does not use it already."""
    pr = st.precision
    if pr is not None and is_low_precision(pr.value):
        return (
            f"it already runs {pr.value}: these GEMMs run outside autocast (an fp32 layer or"
            " loss); find them in the top kernels and cast them to bf16, or allow TF32"
            " (torch.backends.cuda.matmul.allow_tf32=True)",
            pr.source,
        )
    return knob("fp32-kernels", kind), pr.source if pr is not None else _unknown(
        "which precision it used"
    )


def _rules(r: RankMetrics, kind: str = "generic", st: RunSettings | None = None) -> list[Advice]:
    st = st or RunSettings()
    out: list[Advice] = []
    if not r.activity.kernel_count:
        return out  # no kernels: no window to judge by (verdict.holdings says what it holds)
    span = r.span_ns or 1
    n_per, basis = costs.per(r)
    # both are unions clipped to the span (the readers' job), so neither can pass 100 %
    data_wait_pct = 100 * r.data_wait_ns / span
    inputs = _input_causes(r)
    input_ns = sum(c.total_ns for c in inputs)
    input_pct = 100 * input_ns / span
    if r.idle_pct >= IDLE_PCT and (data_wait_pct >= DATA_WAIT_PCT or input_pct >= DATA_WAIT_PCT):
        evidence = {"idle_pct": r.idle_pct, "data_wait_pct_of_span": data_wait_pct}
        detail = ""
        if r.main_thread_wait_ns is not None:
            main_wait_pct = 100 * r.main_thread_wait_ns / span
            evidence["main_thread_wait_pct_of_span"] = main_wait_pct
            detail = f", main-thread ({r.main_thread}) blocking waits {main_wait_pct:.1f}%"
        data_knob, checked = data_loader_knob(kind, st)
        if inputs and input_pct >= DATA_WAIT_PCT:
            # the seed's terms: what the GPU loses per step to input, and the evidence
            per_step = sum(c.ms_per_step for c in inputs)
            evidence["input_idle_pct_of_span"] = input_pct
            evidence["input_idle_ms_per_step"] = per_step
            top = max(inputs, key=lambda c: c.total_ns)
            message = (
                f"rank {r.rank}: the GPU waits {per_step:.1f} ms {basis} for input"
                f" ({top.label}; {input_pct:.1f}% of the span; {top.evidence})"
            )
        else:
            message = (
                f"rank {r.rank}: GPU idle {r.idle_pct:.1f}% of the span, data-wait ranges"
                f" {data_wait_pct:.1f}% of it{detail}"
            )
        # the idle claimed for input; data-wait ranges alone (no interval claimed) cost their
        # union inside the span, an upper bound
        cost = costs.idle(r, "input") * n_per * 1e6 if inputs else r.data_wait_ns
        out.append(
            Advice(
                rule="data-loader",
                rank=r.rank,
                cause="the GPU sits idle while the main thread waits for input data",
                knob=data_knob,
                checked=checked,
                evidence=evidence,
                message=message,
                cost_ms=cost / n_per / 1e6,
                cost_basis=basis,
            )
        )
    out += _idle_rules(r, n_per, basis)
    by_dir = {c.direction: c for c in r.copies}
    htod, dtoh = by_dir.get("HtoD"), by_dir.get("DtoH")
    activity = r.activity.kernel_ns + r.activity.memcpy_ns + r.activity.memset_ns
    copy_ns = (htod.total_ns if htod else 0) + (dtoh.total_ns if dtoh else 0)
    copy_pct = 100 * copy_ns / activity if activity else 0.0
    copy_evidence = {
        "htod_dtoh_pct_of_gpu_activity": copy_pct,
        "htod_bytes": float(htod.bytes if htod else 0),
        "dtoh_bytes": float(dtoh.bytes if dtoh else 0),
    }
    if htod and dtoh and copy_pct >= COPY_PCT and r.offloading:
        out.append(
            Advice(
                rule="offload-traffic",
                rank=r.rank,
                cause=(
                    "host<->device copies take a large share of GPU time with activation CPU"
                    " offloading on: offloading trades GPU memory for speed"
                ),
                knob=knob("offload-traffic", kind),
                checked=r.offloading_evidence,
                evidence=copy_evidence,
                message=(
                    f"rank {r.rank}: HtoD+DtoH copies are {copy_pct:.1f}% of GPU activity time"
                    f" with activation offloading on ({r.offloading_evidence})"
                ),
                cost_ms=costs.exposed_copies(r),
                cost_basis=basis,
            )
        )
    staging = costs.idle(r, "copy-staging")
    copies_ms = costs.exposed_copies(r) + staging
    staging_pct = _of_step_pct(r, staging)
    if not (htod and dtoh and copy_pct >= COPY_PCT and r.offloading) and (
        ((htod or dtoh) and copy_pct >= COPY_PCT) or staging_pct >= IDLE_CAUSE_PCT
    ):
        out.append(
            Advice(
                rule="host-device-copies",
                rank=r.rank,
                cause="host<->device copies take a large share of GPU time",
                knob=(
                    "copy from pinned host memory (pin_memory=True / cudaMallocHost), overlap"
                    " copies with compute (non_blocking=True / cudaMemcpyAsync on a side"
                    " stream), and move data fewer times in larger pieces (keep it on the GPU)"
                ),
                evidence={**copy_evidence, f"copy_staging_ms_{basis.replace(' ', '_')}": staging},
                message=(
                    f"rank {r.rank}: HtoD+DtoH copies are {copy_pct:.1f}% of GPU activity time;"
                    f" {costs.exposed_copies(r):.1f} ms {basis} only copies ran"
                    + (
                        f", and the GPU idles {staging:.1f} ms {basis} for the host side of"
                        f" copies from pageable memory ({_staging_evidence(r)})"
                        if staging > 0
                        else ""
                    )
                ),
                cost_ms=copies_ms,
                cost_basis=basis,
            )
        )
    if r.fp32_gemm_pct >= FP32_PCT:
        out.append(
            Advice(
                rule="fp32-kernels",
                rank=r.rank,
                cause="GEMMs run in fp32 without tensor cores",
                knob=fp32_knob(kind, st)[0],
                checked=fp32_knob(kind, st)[1],
                evidence={"fp32_gemm_pct_of_kernel_time": r.fp32_gemm_pct},
                message=(
                    f"rank {r.rank}: fp32 GEMM kernels are {r.fp32_gemm_pct:.1f}% of kernel time"
                    f" ({costs.fp32_gemms(r):.1f} ms {basis}; on tensor cores a fraction of it)"
                ),
                cost_ms=costs.fp32_gemms(r),
                cost_basis=basis,
            )
        )
    um = r.unified_memory
    # why pages moved (nsys migrationCause): eviction means an oversubscribed GPU, page faults
    # and the speculative prefetch that follows them mean pages touched on the other side
    moved = sum(c.bytes for c in um.by_cause)
    causes: dict[str, float] = {}
    for c in um.by_cause:
        causes[c.cause] = causes.get(c.cause, 0.0) + (100 * c.bytes / moved if moved else 0.0)
    causes = dict(sorted(causes.items(), key=lambda kv: -kv[1]))
    if um.migrations and (
        um.share_of_memory_ops_pct >= UM_OPS_PCT or um.share_of_memory_time_pct >= UM_TIME_PCT
    ):
        out.append(
            Advice(
                rule="unified-memory",
                rank=r.rank,
                cause="Unified-Memory pages migrate between CPU and GPU on demand",
                knob=unified_memory_knob(kind, st)[0],
                checked=unified_memory_knob(kind, st)[1],
                evidence={
                    "um_share_of_memory_ops_pct": um.share_of_memory_ops_pct,
                    "um_share_of_memory_time_pct": um.share_of_memory_time_pct,
                    "gpu_page_faults": float(um.gpu_page_faults or 0),
                    **{f"um_{k.replace(' ', '_')}_bytes_pct": v for k, v in causes.items()},
                },
                message=(
                    f"rank {r.rank}: UM migrations are {um.share_of_memory_ops_pct:.1f}% of memory"
                    f" operations ({um.share_of_memory_time_pct:.1f}% of their time)"
                    + (
                        "; migrated bytes by cause: "
                        + ", ".join(f"{k} {v:.0f}%" for k, v in causes.items())
                        if causes
                        else ""
                    )
                ),
                cost_ms=costs.um_migrations(r),
                cost_basis=basis,
            )
        )
    # only the sync time while the GPU is idle costs GPU time: a host waiting for a busy GPU
    # (`.item()` at a step's end) is not overhead
    sync_pct = 100 * r.sync.idle_wall_ns / span
    sync_cost = costs.idle(r, "sync") if r.idle_causes is not None else None
    sync_cost_pct = 100 * (sync_cost or 0.0) * n_per * 1e6 / span
    if sync_pct >= SYNC_PCT or sync_cost_pct >= IDLE_CAUSE_PCT:
        if sync_cost is None:
            sync_cost = r.sync.idle_wall_ns / n_per / 1e6
        out.append(
            Advice(
                rule="sync-overhead",
                rank=r.rank,
                cause="the host blocks on CUDA synchronisation while the GPU is idle",
                knob="remove per-step host syncs (.item(), torch.cuda.synchronize())",
                evidence={
                    "sync_pct_of_span": sync_pct,
                    "sync_calls": float(r.sync.calls),
                    "sync_all_pct_of_span": 100 * r.sync.wall_ns / span,
                },
                message=(
                    f"rank {r.rank}: the GPU idles {sync_cost:.1f} ms {basis} in and after CUDA"
                    f" syncs (the calls block {sync_pct:.1f}% of the span while the GPU is idle;"
                    f" {_sync_evidence(r)})"
                ),
                cost_ms=sync_cost,
                cost_basis=basis,
            )
        )
    comm = sum(v for k, v in r.kernel_types.items() if "COMMUNICATION" in k)
    overlap = r.comm_comp_overlap_pct
    if overlap is not None and comm >= COMM_SHARE_PCT and overlap < LOW_OVERLAP_PCT:
        out.append(
            Advice(
                rule="low-overlap",
                rank=r.rank,
                cause=(
                    "communication kernels mostly run while no computation does: the GPU waits"
                    " for gradients (or parameters) to be exchanged"
                ),
                knob=knob("low-overlap", kind),
                evidence={
                    "comm_comp_overlap_pct": overlap,
                    "communication_pct_of_kernel_time": comm,
                },
                message=(
                    f"rank {r.rank}: communication kernels are {comm:.1f}% of the GPU kernel time"
                    f" and only {overlap:.1f}% of their time overlaps computation"
                ),
                cost_ms=costs.comm_alone(r),
                cost_basis=basis,
            )
        )
    return out


def _input_causes(r: RankMetrics) -> list[IdleCause]:
    """The idle claimed for input (`idle_causes`): loading on the main thread, or waiting on the
    loader while its workers ran."""
    if r.idle_causes is None:
        return []
    return [c for c in r.idle_causes.causes if c.cause == "input"]


def _sync_evidence(r: RankMetrics) -> str:
    c = (
        next((c for c in r.idle_causes.causes if c.cause == "sync"), None)
        if r.idle_causes
        else None
    )
    return c.evidence if c is not None else f"{r.sync.calls} sync calls"


# the idle causes that are advice of their own (input is the data-loader rule's)
IDLE_RULES = {
    "host-compute": ("host-compute", "the GPU sits idle while the host computes between launches"),
    "launch-bound": ("launch-bound", "the GPU runs out of work between short kernels: launching"
                     " them takes longer than running them"),
    "unclassified": ("idle-unclassified", "the GPU sits idle and no cause outweighs the others"),
}  # fmt: skip


def _idle_rules(r: RankMetrics, n_per: int, basis: str) -> list[Advice]:
    """An advice per idle cause (host compute, launch-bound, unclassified) that costs
    IDLE_CAUSE_PCT of the median step (of the span where the rank has no steps), costed as the
    idle claimed for it, with its evidence."""
    if r.idle_causes is None:
        return []
    span = r.span_ns or 1
    step = r.steps.p50_ns if r.steps is not None and r.steps.p50_ns else None
    out = []
    for c in r.idle_causes.causes:
        share = 100 * c.ms_per_step * 1e6 / step if step else 100 * c.total_ns / span
        if c.cause not in IDLE_RULES or share < IDLE_CAUSE_PCT:
            continue
        rule, cause = IDLE_RULES[c.cause]
        cost = c.ms_per_step
        evidence = {
            f"{c.cause}_ms_{basis.replace(' ', '_')}": cost,
            f"{c.cause}_pct_of_span": 100 * c.total_ns / span,
        }
        ranked_by, outside = cost, ""
        # a capture's cost lands on every launch: ranked by what the launches cost outside it
        per_step = c.cause == "launch-bound" and basis == "per step"
        found = capture_cost.launch_cost(r, cost) if per_step else None
        if found is not None:
            ranked_by, outside = found
            evidence["launch-bound_ms_outside_capture"] = ranked_by
        out.append(
            Advice(
                rule=rule,
                rank=r.rank,
                cause=cause,
                knob=c.knob,
                evidence=evidence,
                message=f"rank {r.rank}: the GPU idles {cost:.1f} ms {basis}{_of_step(r, cost)}"
                f" for {c.label} ({c.evidence}){outside}",
                cost_ms=ranked_by,
                cost_basis=basis,
            )
        )
    return out


def _staging_evidence(r: RankMetrics) -> str:
    if r.idle_causes is None:
        return ""
    return "; ".join(c.evidence for c in r.idle_causes.causes if c.cause == "copy-staging")


def _of_step_pct(r: RankMetrics, ms: float) -> float:
    """`ms` as a percentage of the median step (of the span where the rank has no steps)."""
    if r.steps is not None and r.steps.p50_ns:
        return 100 * ms * 1e6 / r.steps.p50_ns
    n, _ = costs.per(r)
    return 100 * ms * 1e6 * n / (r.span_ns or 1)


def _of_step(r: RankMetrics, ms: float) -> str:
    """` (12 % of the median step)` where the rank has steps."""
    if r.steps is None or not r.steps.p50_ns:
        return ""
    return f" ({100 * ms * 1e6 / r.steps.p50_ns:.0f} % of the median step)"


def ranked(advice: list[Advice]) -> list[Advice]:
    """Advice by what it costs, most first (the order every view shows); advice without a
    cost after, in the order it came."""
    return sorted(advice, key=lambda a: (a.cost_ms is None, -(a.cost_ms or 0.0)))


def _straggler(metrics: Metrics) -> list[Advice]:
    s = metrics.cross_rank.straggler
    if s is None:
        return []
    late = s.evidence.get("late_us_per_step")
    cost = (
        late / 1e3
        if late is not None
        else s.evidence.get("median_step_ms", 0.0)
        - s.evidence.get("median_step_ms_over_ranks", 0.0)
    )
    return [
        Advice(
            rule="straggler",
            rank=s.rank,
            cause=(
                f"{s.entry} reaches the collectives late and every other rank waits for it"
                if s.rule == "starts collectives last"
                else f"{s.entry}'s steps take longer than the other ranks'"
            ),
            knob=(
                f"look at {s.entry}: its host work before the collectives (data loading,"
                " logging, checkpoint I/O, garbage collection), its GPU (clocks, thermal"
                " throttling, errors) and its node (other processes, CPU binding); balance the"
                " inputs across ranks (sequence-length bucketing)"
            ),
            evidence=s.evidence,
            message=s.message,
            cost_ms=cost,
            cost_basis="per step",
        )
    ]


def _waiting(a: Advice, metrics: Metrics) -> Advice:
    """A low-overlap rank that waits for a straggler: most of its communication time is the
    wait, which no overlap setting removes, so the advice points at the straggler first."""
    s = metrics.cross_rank.straggler
    if a.rule != "low-overlap" or s is None or s.rule != "starts collectives last":
        return a
    if a.rank == s.rank:
        return a
    return a.model_copy(
        update={
            "cause": (
                f"communication kernels run long and alone because they wait for {s.entry}"
                " (the straggler) to join the collectives"
            ),
            "knob": f"fix the straggler ({s.entry}) first, then: {a.knob}",
            "evidence": {**a.evidence, "straggler_rank": float(s.rank)},
            "message": f"{a.message}; much of it is waiting for {s.entry}, the straggler",
        }
    )
