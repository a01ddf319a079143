"""The metrics lane of a report's step picture: under the streams and threads of the
representative step, one strip per GPU metric the set has (SMs active, tensor cores, DRAM
read and write, PCIe or NVLink-C2C), each bucket of the window (`gpu_metric_model.MetricLane`)
shaded by its value (0-100 % of the metric's peak) with the value on hover: where in the step
the SMs were active, the tensor cores worked, the memory or the host link was busy.
"""

from __future__ import annotations

from xml.sax.saxutils import escape as xml_escape

from orchestrator.analysis.gpu_metric_model import MetricLane
from orchestrator.analysis.presentation import labels as L

LABELS = {
    "sm_active_pct": ("SMs active", "#2ca02c"),
    "tensor_active_pct": ("tensor cores active", "#ff7f0e"),
    "dram_read_pct": ("DRAM read", "#1f77b4"),
    "dram_write_pct": ("DRAM write", "#17becf"),
    "pcie_rx_pct": ("PCIe receive", "#9467bd"),
    "pcie_tx_pct": ("PCIe transmit", "#8c564b"),
    "c2c_rx_pct": ("NVLink-C2C receive", "#9467bd"),
    "c2c_tx_pct": ("NVLink-C2C transmit", "#8c564b"),
}


def strips(
    lane: MetricLane, width_ns: int, top: int, label_h: int, bar_h: int, row: int
) -> list[str]:
    """SVG parts of the lane's strips from `top` down, one row (`row` px) each; x in percent
    of the window (`width_ns`), as the step picture draws its events."""
    parts = []
    i = 0
    for key, (label, color) in LABELS.items():
        values = lane.series.get(key)
        if not values or all(v is None for v in values):
            continue
        y = top + row * i
        i += 1
        have = [v for v in values if v is not None]
        mean = sum(have) / len(have)
        parts.append(
            f'<text x="0" y="{y + label_h - 3}">{xml_escape(label)}: mean {mean:.0f} %'
            f" (nsys GPU metrics)</text>"
            f'<rect x="0" y="{y + label_h}" width="100%" height="{bar_h}" fill="#f6f6f6"/>'
        )
        w = 100.0 * lane.bucket_ns / max(1, width_ns)
        for b, v in enumerate(values):
            if v is None:
                continue
            x = 100.0 * b * lane.bucket_ns / max(1, width_ns)
            at = L.dur(b * lane.bucket_ns)
            shade = max(0.0, min(1.0, v / 100))
            parts.append(
                f'<rect class="ev" x="{x:.3f}%" y="{y + label_h}" width="{w:.3f}%"'
                f' height="{bar_h}" fill="{color}" fill-opacity="{shade:.2f}">'
                f"<title>{xml_escape(label)} {v:.1f} % at +{xml_escape(at)}</title></rect>"
            )
    return parts


def count(lane: MetricLane | None) -> int:
    """How many strips the lane draws."""
    if lane is None:
        return 0
    return sum(1 for k in LABELS if any(v is not None for v in (lane.series.get(k) or [])))
