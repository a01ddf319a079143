"""What nsys GPU metrics add to the verdict and the advice: beside the time-based busy figure,
what the SMs did in that time ("GPU busy 96 % of the span; SMs active 84 %, tensor cores
32 %"), and three rules, each citing the metrics that fired it:

- low-tensor-activity: GEMM kernels (`kernel_classes.gemm_precision`: fp32 and tensor-core
  GEMMs) are >= 30 % of the kernel time, yet the tensor cores were active < 10 % of the cycles of
  the span while the SMs were active >= 50 % (the GEMMs run, on CUDA cores) -> precision (bf16 /
  TF32) for a run in fp32, else shapes (dimensions multiples of 8/16, larger batches). Evidence: the
  fp32 recording (tests/data/gpu_metrics: GEMMs 87.5 % of kernel time, tensor active 2.2 %)
  against bf16 (36 %).
- memory-bound: in the representative step's lane, >= 20 % of the time DRAM read + write
  throughput is >= 60 % of its peak -> fuse elementwise work (torch.compile), lower precision
  (half the bytes). The thresholds are nsys's "percent of peak sustained" read as Nsight
  Compute reads memory throughput: above about 60 % the DRAM, not the SMs, sets the pace.
- host-link-traffic: PCIe (H100/H200) or NVLink-C2C (GH200) receive + transmit >= 20 % of its
  peak over the span -> host-device traffic: on GH200 the Unified-Memory pages or offloaded
  activations crossing C2C; pinned, larger, overlapped transfers; prefetch managed memory.

No rule fires on an entry without samples ("not measured", never a guess).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.analysis.gpu_metric_model import GpuMetrics

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics
    from orchestrator.analysis.presentation.advice import Advice
    from orchestrator.analysis.settings import RunSettings

GEMM_PCT = 30.0
TENSOR_LOW_PCT = 10.0
SM_BUSY_PCT = 50.0
DRAM_BOUND_PCT = 60.0
DRAM_PHASE_SHARE = 20.0
LINK_PCT = 20.0

TITLES = {
    "low-tensor-activity": "GEMMs run but the tensor cores idle",
    "memory-bound": "DRAM throughput sets the pace",
    "host-link-traffic": "Host-device traffic fills the GPU's host link",
}


def sentence(m: Metrics) -> str | None:
    """The verdict's line of what the SMs did, over the entries that were sampled (None: no
    entry was, so nothing is said rather than a 0)."""
    from orchestrator.analysis.catalogue import views

    sampled = [r for r in m.ranks if r.gpu_metrics is not None]
    if not sampled:
        return None
    busy = views.value("gpu_busy_pct", m, check=False)
    sm = views.value("sm_active_pct", m)
    tensor = views.value("tensor_active_pct", m)
    parts = []
    if sm is not None:
        parts.append(f"SMs active {sm:.0f} %")
    if tensor is not None:
        parts.append(f"tensor cores {tensor:.0f} %")
    if not parts:
        return None
    head = f"GPU busy {busy:.0f} % of the span; " if busy is not None else ""
    over = f", {len(sampled)} of {len(m.ranks)} entries sampled" if len(m.ranks) > 1 else ""
    least = min(sampled, key=lambda r: r.gpu_metrics.covered_pct if r.gpu_metrics else 100.0)
    covered = least.gpu_metrics.covered_pct if least.gpu_metrics else 100.0
    part = (
        f"; rank {least.rank}'s samples cover {covered:.0f} % of its span: its node's sampler"
        " captured a shorter window"
        if covered < 95
        else ""
    )
    return f"{head}{', '.join(parts)} (nsys GPU metrics{over}{part})."


def _gemm_pct(r: RankMetrics) -> float:
    return (r.fp32_gemm_pct or 0.0) + (r.tensor_core_gemm_pct or 0.0)


def _tensor_rule(r: RankMetrics, g: GpuMetrics, kind: str, st: RunSettings) -> Advice | None:
    from orchestrator.analysis.presentation.advice import Advice, fp32_knob
    from orchestrator.analysis.settings import is_low_precision

    tensor, sm = g.value("tensor_active_pct"), g.value("sm_active_pct")
    gemm = _gemm_pct(r)
    if tensor is None or sm is None or gemm < GEMM_PCT:
        return None
    if tensor >= TENSOR_LOW_PCT or sm < SM_BUSY_PCT:
        return None
    evidence = {"gemm_pct_of_kernel_time": gemm, "tensor_active_pct": tensor, "sm_active_pct": sm}
    steps = [s.means["tensor_active_pct"] for s in g.steps if "tensor_active_pct" in s.means]
    per_step = ""
    if steps:
        evidence["tensor_active_pct_step_max"] = max(steps)
        per_step = f" (at most {max(steps):.1f} % in any of {len(steps)} steps)"
    pr = st.precision
    if (r.fp32_gemm_pct or 0) >= (r.tensor_core_gemm_pct or 0) and not (
        pr is not None and is_low_precision(pr.value)
    ):
        knob, checked = fp32_knob(kind, st)
    else:
        knob = (
            "shapes the tensor cores take: hidden, head and vocabulary sizes and the batch in"
            " multiples of 8 (bf16) or 16 (fp8), larger GEMMs per launch (a larger batch)"
        )
        checked = pr.source if pr is not None else "the run's precision was not found"
    return Advice(
        rule="low-tensor-activity",
        rank=r.rank,
        cause="the GEMMs run on CUDA cores, not on the tensor cores",
        knob=knob,
        checked=checked,
        evidence=evidence,
        message=(
            f"rank {r.rank}: GEMMs are {gemm:.1f}% of kernel time but the tensor cores were active"
            f" {tensor:.1f}% of the span{per_step} while the SMs were active {sm:.1f}%"
        ),
    )


def _memory_rule(r: RankMetrics, g: GpuMetrics) -> Advice | None:
    from orchestrator.analysis.presentation.advice import Advice

    lane = g.lane
    if lane is None:
        return None
    rd, wr = lane.series.get("dram_read_pct"), lane.series.get("dram_write_pct")
    if rd is None or wr is None:
        return None
    both = [a + b for a, b in zip(rd, wr, strict=True) if a is not None and b is not None]
    if not both:
        return None
    share = 100.0 * sum(v >= DRAM_BOUND_PCT for v in both) / len(both)
    if share < DRAM_PHASE_SHARE:
        return None
    return Advice(
        rule="memory-bound",
        rank=r.rank,
        cause="the kernels wait for DRAM: memory-bound phases",
        knob="fewer bytes per step: fuse elementwise operations (torch.compile), bf16 instead"
        " of fp32 activations, larger batches for the GEMMs",
        evidence={"dram_bound_share_pct": share, "dram_peak_pct": max(both)},
        message=(
            f"rank {r.rank}: DRAM read + write throughput is >= {DRAM_BOUND_PCT:.0f}% of its"
            f" peak for {share:.0f}% of the representative step (peak {max(both):.0f}%)"
        ),
    )


def _link_rule(r: RankMetrics, g: GpuMetrics) -> Advice | None:
    from orchestrator.analysis.presentation.advice import Advice

    for link, name in (("c2c", "NVLink-C2C"), ("pcie", "PCIe")):
        rx, tx = g.value(f"{link}_rx_pct"), g.value(f"{link}_tx_pct")
        if rx is None and tx is None:
            continue
        total = (rx or 0.0) + (tx or 0.0)
        if total < LINK_PCT:
            return None
        um = r.unified_memory.share_of_memory_ops_pct
        why = f"; Unified Memory is {um:.1f}% of the memory operations" if um else ""
        return Advice(
            rule="host-link-traffic",
            rank=r.rank,
            cause=f"host-device traffic over {name}",
            knob="keep the working set on the GPU, prefetch managed memory"
            " (cudaMemPrefetchAsync), pinned and larger transfers overlapped with compute",
            evidence={f"{link}_rx_pct": rx or 0.0, f"{link}_tx_pct": tx or 0.0},
            message=(
                f"rank {r.rank}: {name} receive {rx or 0:.1f}% + transmit {tx or 0:.1f}% of its"
                f" peak over the span{why}"
            ),
        )
    return None


def rules(r: RankMetrics, kind: str, st: RunSettings) -> list[Advice]:
    """The rules that read an entry's GPU metrics (none without samples or kernels)."""
    g = r.gpu_metrics
    if g is None or not r.activity.kernel_count:
        return []
    found = [_tensor_rule(r, g, kind, st), _memory_rule(r, g), _link_rule(r, g)]
    return [a for a in found if a is not None]
