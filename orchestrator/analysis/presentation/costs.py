"""What each finding costs a step, in GPU time it would give back (issue 35 item 3): one unit
for every rule, so that analyze, the verdict, the report and `--json` rank them alike.

- an idle cause (`idle_causes`: input, host compute, launch-bound, sync, communication,
  unclassified): the GPU-idle time per step claimed for it;
- host-device copies: the time per step in which only copies and memsets ran (HTA's MEMORY
  kernel type: a copy overlapped by computation costs nothing), its copies' part;
- fp32 GEMMs: their kernel time per step (an upper bound: the same GEMMs on tensor cores still
  take a fraction of it);
- Unified-Memory migrations: their time per step;
- communication not overlapped: the time per step in which only communication kernels ran
  (HTA's COMMUNICATION kernel type alone);
- a straggler: how late it reaches the collectives per step (or how much longer its steps are).

"Per step" divides by the steps the idle attribution counted (those that start inside the GPU
span), else by the traced steps; with no steps a cost is the whole capture's (`per`), which
ranks the findings of one run the same way.
"""

from __future__ import annotations

from orchestrator.analysis.metrics import RankMetrics


def per(r: RankMetrics) -> tuple[int, str]:
    """(what costs divide by, the unit's words): steps, else 1 for the whole capture."""
    if r.idle_causes is not None and r.idle_causes.steps:
        return r.idle_causes.steps, "per step"
    if r.steps is not None and r.steps.count:
        return r.steps.count, "per step"
    return 1, "in the capture"


def idle(r: RankMetrics, *causes: str) -> float:
    """GPU-idle ms per step claimed for `causes` (over the steps the span shows whole:
    `idle_causes.per_step`)."""
    if r.idle_causes is None:
        return 0.0
    return sum(c.ms_per_step for c in r.idle_causes.causes if c.cause in causes)


def exposed_copies(r: RankMetrics) -> float:
    """ms per step in which only copies (of the memory operations) ran."""
    mem_only = r.kernel_types_ns.get("MEMORY", 0)
    a = r.activity
    moved = a.memcpy_ns + a.memset_ns
    share = a.memcpy_ns / moved if moved else 0.0
    n, _ = per(r)
    return mem_only * share / n / 1e6


def fp32_gemms(r: RankMetrics) -> float:
    n, _ = per(r)
    return r.fp32_gemm_pct / 100 * r.activity.kernel_ns / n / 1e6


def um_migrations(r: RankMetrics) -> float:
    n, _ = per(r)
    return sum(c.total_ns for c in r.unified_memory.by_cause) / n / 1e6


def comm_alone(r: RankMetrics) -> float:
    n, _ = per(r)
    return r.kernel_types_ns.get("COMMUNICATION", 0) / n / 1e6
