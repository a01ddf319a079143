"""The host-device link's bandwidth for copies from pinned memory, which the pinned-memory
projection (`critical_path`, lever "copies") runs each host-device copy at (issue 41).

A copy from pageable memory is staged by the driver through a pinned bounce buffer, chunk by
chunk, and runs at what the host's staging allows (3-9 GB/s on the H200 recordings of
tests/data/causes_h200 and heldout_h200); from pinned memory the copy engine runs at the link's
own rate (55 GB/s on the same H200). So a fixed speed-up ("pinned is 2x faster") is wrong by as
much as the host's staging is slow. The rate a pinned copy would get is, in order of evidence:

1. **measured**: the trace's own large copies of the same direction that already run at a
   pinned copy's rate (at least half the link's nominal one): their aggregate bandwidth;
2. **nominal**: the link the device name says it sits on (NVLink-C2C of a Grace Hopper or Grace
   Blackwell superchip, PCIe Gen5 x16 of a Hopper or Blackwell card, Gen4 of an Ampere or Ada
   card), at what a pinned `cudaMemcpy` reaches there, with a range wide enough for a slower
   slot; an unknown device gets the widest range.

A copy never gets slower in the projection: one already at that rate keeps its time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.timeline import model as T

GB = 1e9
# what a pinned copy reaches, bytes/s: (typical, best, worst). C2C: 450 GB/s a direction on
# paper, ~350-420 measured by copy-engine copies; PCIe: the raw rate (Gen5 x16: 32 GT/s x 16
# lanes x 128/130 = 63 GB/s) less the packet headers at a 256-byte payload (~12 %): 55 GB/s,
# as nvbandwidth reports on Hopper PCIe cards and the H200 of tests/data/causes_h200/img_pinned
# ran (55.1); Gen4 x16 half that. The worst end allows a slot of the generation below.
C2C = ("NVLink-C2C", (380 * GB, 420 * GB, 200 * GB))
GEN5 = ("PCIe Gen5 x16", (55 * GB, 57 * GB, 26 * GB))
GEN4 = ("PCIe Gen4 x16", (26 * GB, 28 * GB, 12 * GB))
UNKNOWN = ("a PCIe link of unknown generation", (26 * GB, 57 * GB, 12 * GB))
LINKS: tuple[tuple[re.Pattern[str], tuple[str, tuple[float, float, float]]], ...] = (
    (re.compile(r"(?i)\bG[HB]\s?\d{3}"), C2C),
    (re.compile(r"(?i)\b(H100|H200|H800|H20|B100|B200|B300|RTX PRO 6000|RTX 50\d0)\b"), GEN5),
    (
        re.compile(r"(?i)\b(A100|A800|A40|A30|A16|A10G?|A2|L40S?|L20|L4|RTX 40\d0|RTX 30\d0|"
                   r"RTX A\d+|RTX \d000 Ada)\b"),
        GEN4,
    ),
)  # fmt: skip
LARGE_BYTES = 1 << 20  # copies this large run at the link's rate, not its latency
OVERHEAD_NS = 1_000  # a pinned copy's fixed cost (a 1 KiB pinned copy takes ~1 µs)


@dataclass(frozen=True)
class Link:
    """The link a pinned copy would run on: its name, what the rate rests on, bytes/s at
    (typical, best, worst)."""

    name: str
    device: str
    basis: str  # "measured" or "nominal"
    bandwidth: tuple[float, float, float]
    copies: int = 0  # the measured copies

    def sentence(self) -> str:
        t, b, w = (x / GB for x in self.bandwidth)
        if self.basis == "measured":
            return (
                f"{t:.0f} GB/s, measured on {self.copies} copies of this trace that already ran"
                f" at that rate ({w:.0f}-{b:.0f})"
            )
        on = f"{self.device}'s " if self.device else ""
        return f"{t:.0f} GB/s, nominal for {on}{self.name} ({w:.0f}-{b:.0f}), not measured here"


def nominal(device: str) -> tuple[str, tuple[float, float, float]]:
    """The link a device of this name sits on (the first that its name matches)."""
    for pattern, link in LINKS:
        if pattern.search(device):
            return link
    return UNKNOWN


def pinned_link(tl: T.RankTimeline, rows: T.GpuTable) -> Link:
    """The link of the entry's copies (the device of its first host-device copy, else of its
    first row), nominal unless the trace measures it (the module docstring)."""
    copied = (rows.kind == T.MEMCPY) & np.isin(rows.copy, (1, 2))
    first = np.flatnonzero(copied)
    dev = int(rows.device[first[0]] if first.size else rows.device[0]) if rows.size else 0
    device = tl.device_names.get(dev, "")
    name, bw = nominal(device)
    big = copied & (rows.nbytes >= LARGE_BYTES) & (rows.end > rows.start)
    if big.any():
        b = rows.nbytes[big].astype(np.float64)
        d = (rows.end[big] - rows.start[big]).astype(np.float64)
        fast = b / d * 1e9 >= bw[0] / 2
        if fast.any():
            rate = float(b[fast].sum() / d[fast].sum() * 1e9)
            return Link(
                name, device, "measured", (rate, max(rate, bw[1]), min(rate / 2, bw[2])),
                int(fast.sum()),
            )  # fmt: skip
    return Link(name, device, "nominal", bw)


def pinned_ns(nbytes: Any, bandwidth: float) -> Any:
    """The time a copy of `nbytes` takes from pinned memory at `bandwidth` bytes/s."""
    return OVERHEAD_NS + np.asarray(nbytes, dtype=np.float64) / bandwidth * 1e9
