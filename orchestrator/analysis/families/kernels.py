"""Kernels of one entry: per-name totals (top kernels), and the shares of kernel time in fp32 and
tensor-core GEMMs (`kernel_classes.gemm_precision`, docs/metrics.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from orchestrator.analysis.families.kernel_classes import gemm_precision, is_compute
from orchestrator.analysis.families.stats import pct
from orchestrator.analysis.metrics import KernelStat
from orchestrator.analysis.timeline import model as T

TOP_KERNELS = 25
CHUNK_ROWS = 1 << 20


@dataclass
class KernelSummary:
    top: list[KernelStat]
    fp32_gemm_pct: float
    tensor_core_gemm_pct: float
    names: int


def kernel_summary(rows: T.GpuTable, names: list[str], kernel_ns: int) -> KernelSummary:
    """Top kernels by total time, GEMM precision shares and the number of distinct names."""
    counts = np.zeros(len(names), dtype=np.int64)
    totals = np.zeros(len(names), dtype=np.float64)
    # in row chunks (bounded temporaries); float sums of integer ns are exact below 2**53 ns
    # (104 days), so the order of the additions does not change them
    for lo in range(0, rows.size, CHUNK_ROWS):
        sl = slice(lo, lo + CHUNK_ROWS)
        k = rows.kind[sl] == T.KERNEL
        ids = rows.name[sl][k]
        counts += np.bincount(ids, minlength=len(names))
        totals += np.bincount(
            ids, weights=rows.end[sl][k] - rows.start[sl][k], minlength=len(names)
        )
    if not counts.any():
        return KernelSummary([], 0.0, 0.0, 0)
    present = np.flatnonzero(counts)
    # the same name may have several ids only if a reader interned it twice; merge by name
    merged: dict[str, list[int]] = {}
    for i in present.tolist():
        m = merged.setdefault(names[i], [0, 0])
        m[0] += int(counts[i])
        m[1] += round(totals[i])
    fp32 = tc = 0
    for name, (_, tot) in merged.items():
        prec = gemm_precision(name)
        if prec == "fp32":
            fp32 += tot
        elif prec == "tensor-core":
            tc += tot
    ranked = sorted(merged.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_KERNELS]
    top = [
        KernelStat(
            name=name,
            count=cnt,
            total_ns=tot,
            mean_ns=tot / cnt if cnt else 0.0,
            share_pct=pct(tot, kernel_ns),
            compute=is_compute(name),
        )
        for name, (cnt, tot) in ranked
    ]
    return KernelSummary(top, pct(fp32, kernel_ns), pct(tc, kernel_ns), len(merged))
