"""Communication of one entry (HTA 0.5.0, `hta/analyzers/communication_analysis.py`): how much
of the communication time computation overlaps, and the collectives the cross-rank view lines
up across ranks. Communication kernels are HTA's: names matching `^nccl.*Kernel` (NCCL kernels
in a Kineto trace or in the CUPTI kernel table of an nsys export)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.families.breakdown import HtaView
from orchestrator.analysis.families.kernel_classes import COMMUNICATION, COMPUTATION
from orchestrator.analysis.timeline import model as T


def comm_comp_overlap_pct(v: HtaView) -> float | None:
    """HTA `get_comm_comp_overlap`: the time when communication and computation kernels run at
    once, as a share of the communication time (both as unions); None without communication."""
    a0, a1 = v.groups(COMMUNICATION)
    comm_time = int((a1 - a0).sum())
    if a0.size == 0 or comm_time <= 0:
        return None
    c0, c1 = v.intersection(COMMUNICATION, COMPUTATION)
    return min(100.0, 100.0 * int((c1 - c0).sum()) / comm_time)


@dataclass
class Collectives:
    """Communication kernels of one entry, sorted by start (ns)."""

    start: Any
    end: Any
    name: list[str]


def collectives(rows: T.GpuTable, names: list[str], names_cls: Any) -> Collectives:
    """The communication kernels of the entry (rows sorted by start)."""
    m = (rows.kind == T.KERNEL) & (names_cls[rows.name] == COMMUNICATION) if rows.size else None
    if m is None or not bool(m.any()):
        empty = np.zeros(0, dtype=np.int64)
        return Collectives(empty, empty, [])
    return Collectives(rows.start[m], rows.end[m], [names[i] for i in rows.name[m].tolist()])
