"""The memory lane of a report, under the step picture: the memory history of an entry
(`MemoryUse.lane`) as stacked columns, one per bucket, each at the bucket's highest allocation
and split by what held it (parameters, gradients, optimizer state, activations, ...), the
reserved memory as a line above them, each training step's end as a tick and the peak marked;
every column's values on hover. Then the table of what held the peak, and an out of memory's
box, in the report's template."""

from __future__ import annotations

from xml.sax.saxutils import escape as xml_escape

from markupsafe import Markup

from orchestrator.analysis.families.memory_classes import LABELS
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.presentation import labels as L

COLORS = {
    "parameters": "#2ca02c",
    "gradients": "#1f77b4",
    "optimizer_state": "#bcbd22",
    "activations": "#d62728",
    "temporaries": "#9467bd",
    "inputs": "#7f7f7f",
    "retained": "#e377c2",
    "unknown": "#c7c7c7",
}
ORDER = list(COLORS)  # bottom to top
HEIGHT = 120


def svg_lane(use: MemoryUse, title: str) -> Markup | None:
    """The lane's SVG, None without a lane."""
    lane = use.lane
    if lane is None or not (lane.allocated or lane.reserved):
        return None
    n = max(len(lane.allocated), len(lane.reserved))
    top = max([*lane.allocated, *lane.reserved, 1])
    width = lane.bucket_ns * n
    y0 = 22
    parts = [
        f'<text x="0" y="12" fill="#555">{xml_escape(title)}: memory allocated (columns, by'
        f" what held it) and reserved (line), up to {xml_escape(L.size(top))}</text>",
        f'<svg x="0" y="{y0}" width="100%" height="{HEIGHT}" viewBox="0 0 1000 100"'
        ' preserveAspectRatio="none"><rect x="0" y="0" width="1000" height="100" fill="#fafafa"'
        ' stroke="#ccc" vector-effect="non-scaling-stroke"/>',
    ]
    w = 1000 / n
    for j in range(n):
        y = 100.0
        tip = [f"{L.dur(lane.bucket_ns * j)}"]
        for name in ORDER:
            values = lane.categories.get(name)
            if not values:
                continue
            v = values[j]
            if v <= 0:
                continue
            h = 100.0 * v / top
            y -= h
            parts.append(
                f'<rect x="{w * j:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}"'
                f' fill="{COLORS[name]}"/>'
            )
            tip.append(f"{LABELS.get(name, name)} {L.size(v)}")
        if not lane.categories and lane.allocated:
            h = 100.0 * lane.allocated[j] / top
            parts.append(
                f'<rect x="{w * j:.2f}" y="{100 - h:.2f}" width="{w:.2f}" height="{h:.2f}"'
                ' fill="#1f77b4"/>'
            )
        if lane.allocated:
            tip.append(f"allocated {L.size(lane.allocated[j])}")
        if lane.reserved:
            tip.append(f"reserved {L.size(lane.reserved[j])}")
        parts.append(
            f'<rect x="{w * j:.2f}" y="0" width="{w:.2f}" height="100" fill="transparent">'
            f"<title>{xml_escape('; '.join(tip))}</title></rect>"
        )
    if lane.reserved and len(lane.reserved) == n:
        pts = " ".join(
            f"{w * (j + 0.5):.1f},{100 - 100.0 * v / top:.2f}" for j, v in enumerate(lane.reserved)
        )
        parts.append(
            f'<polyline fill="none" stroke="#333" stroke-width="1.2"'
            f' vector-effect="non-scaling-stroke" points="{pts}"/>'
        )
    for t in lane.step_ends_ns:
        x = 1000.0 * t / max(1, width)
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="6" stroke="#555"'
            ' vector-effect="non-scaling-stroke"/>'
        )
    if lane.peak_ns is not None:
        x = 1000.0 * lane.peak_ns / max(1, width)
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="100" stroke="#d62728"'
            ' stroke-dasharray="3,3" vector-effect="non-scaling-stroke"/>'
        )
    parts.append("</svg>")
    y = y0 + HEIGHT + 16
    legend = [(LABELS.get(k, k), COLORS[k]) for k in ORDER if lane.categories.get(k)]
    legend += [("reserved", "#333"), ("peak", "#d62728")]
    for k, (label, color) in enumerate(legend):
        x = 100.0 / 4 * (k % 4)
        yy = y + 16 * (k // 4)
        parts.append(
            f'<rect x="{x:.2f}%" y="{yy - 9}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x:.2f}%" dx="14" y="{yy}">{xml_escape(label)}</text>'
        )
    bottom = y + 16 * ((len(legend) + 3) // 4)
    span = L.dur(width)
    parts.append(
        f'<text x="100%" y="{bottom}" text-anchor="end" fill="#555">{xml_escape(span)} of'
        f" history; ticks: each step's end</text>"
    )
    return Markup(
        f'<svg class="plot" width="100%" height="{bottom + 6}" role="img" font-size="11"'
        f' font-family="system-ui, sans-serif"><title>{xml_escape(title)}</title>'
        + "".join(parts)
        + "</svg>"
    )


def peak_rows(use: MemoryUse) -> list[tuple[str, str, str, str, str]]:
    """(category, at the peak, share of the peak, its own high, how it was classed)."""
    total = use.peak_allocated_bytes or 0
    return [
        (
            LABELS.get(c.name, c.name),
            L.size(c.bytes),
            f"{100 * c.bytes / total:.0f} %" if total and c.name != "cache" else "",
            L.size(c.max_bytes),
            c.how,
        )
        for c in use.categories
        if c.bytes > 0 or c.max_bytes > 0
    ]
