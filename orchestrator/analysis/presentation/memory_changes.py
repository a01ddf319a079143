"""What changed in GPU memory between a good run and another (`changes.what_changed` adds it):
the peak, and the category whose bytes at the peak moved most, in one sentence ("memory:
activations at the peak -13.38 GiB (13.38 GiB -> 0 B): the peak fell 11.13 GiB (16.01 GiB ->
4.88 GiB)"). Only where both runs recorded memory at the allocator's level; a move smaller than
`MOVED_PCT` % of the peak and `MOVED_BYTES` is not said to have moved."""

from __future__ import annotations

from orchestrator.analysis.families.memory_classes import LABELS
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.metrics import Metrics
from orchestrator.core.human import size

MOVED_PCT = 5.0
MOVED_BYTES = 64 << 20


def _uses(m: Metrics) -> list[MemoryUse]:
    return [r.memory for r in m.ranks if r.memory is not None and r.memory.level == "allocator"]


def _peak(uses: list[MemoryUse]) -> MemoryUse | None:
    return max(uses, key=lambda u: u.peak_allocated_bytes or 0) if uses else None


def categories(m: Metrics) -> dict[str, int]:
    """What held the peak of the rank whose peak is highest, by category."""
    use = _peak(_uses(m))
    return {c.name: c.bytes for c in use.categories} if use is not None else {}


def sentence(base: Metrics, run: Metrics) -> str | None:
    """The memory part of "what changed", None when either run has no allocator history or
    nothing moved."""
    b, r = _peak(_uses(base)), _peak(_uses(run))
    if b is None or r is None or b.peak_allocated_bytes is None or r.peak_allocated_bytes is None:
        return None
    bc, rc = categories(base), categories(run)
    moves = sorted(
        ((rc.get(k, 0) - bc.get(k, 0), k) for k in set(bc) | set(rc)), key=lambda x: -abs(x[0])
    )
    d_peak = r.peak_allocated_bytes - b.peak_allocated_bytes
    floor = max(MOVED_BYTES, MOVED_PCT / 100 * b.peak_allocated_bytes)
    parts = []
    if moves and abs(moves[0][0]) >= floor:
        d, k = moves[0]
        parts.append(
            f"{LABELS.get(k, k)} at the peak {'+' if d > 0 else '-'}{size(abs(d))}"
            f" ({size(bc.get(k, 0))} -> {size(rc.get(k, 0))})"
        )
    if abs(d_peak) >= floor:
        parts.append(
            f"the peak {'grew' if d_peak > 0 else 'fell'} {size(abs(d_peak))}"
            f" ({size(b.peak_allocated_bytes)} -> {size(r.peak_allocated_bytes)})"
        )
    return "memory: " + ": ".join(parts) if parts else None
