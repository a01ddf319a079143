"""Reports: a self-contained HTML file (inline CSS and SVG plots made here, no scripts, no
network), Markdown and JSON with the same numbers. Templates: templates/report/.

Plots: GPU busy fraction over time (per rank), time breakdown bars (HTA compute / non-compute /
idle per rank), HTA kernel types per rank (stacked bars, overlap categories included), top
kernels (share of kernel time), step-time distribution (histogram).

Many ranks: the cross-rank view (min / median / max per metric with the worst rank named, the
skews, the straggler) comes first; the per-rank table and each rank's details are folded
(`<details>`) beyond `FOLD_RANKS` entries.
Every string from a trace is escaped (Jinja autoescape; SVG text through `xml_escape`).
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from orchestrator.analysis import labels as L
from orchestrator.analysis.advice import Advice, advise, fold
from orchestrator.analysis.compare import Comparison, compare
from orchestrator.analysis.metrics import Metrics, RankMetrics, StepView
from orchestrator.analysis.verdict import verdict
from orchestrator.escape import markdown, plain
from orchestrator.shipped import templates_dir

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
W, H = 720, 220
FOLD_RANKS = 8  # beyond this many entries the per-rank parts of a report are folded
# HTA kernel types: computation green, communication blue, memory orange, overlaps in between
TYPE_COLORS = {
    "COMPUTATION": "#2ca02c",
    "COMMUNICATION": "#1f77b4",
    "MEMORY": "#ff7f0e",
    "COMPUTATION overlapping COMMUNICATION": "#17becf",
    "COMPUTATION overlapping MEMORY": "#bcbd22",
    "COMMUNICATION overlapping MEMORY": "#9467bd",
    "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": "#7f7f7f",
}


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(templates_dir() / "report")),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Control and bidi characters of trace text are shown as escapes, not embedded raw.
        finalize=lambda v: plain(v) if type(v) is str else v,
    )
    env.filters["ms"] = lambda ns: f"{(ns or 0) / 1e6:,.3f}"
    env.filters["s"] = lambda ns: f"{(ns or 0) / 1e9:,.3f}"
    env.filters["pct"] = lambda v: f"{v:.2f}"
    env.filters["gib"] = lambda b: "n/a" if b is None else f"{b / 2**30:,.2f}"
    env.filters["num"] = lambda v: "n/a" if v is None else f"{v:,.3f}".rstrip("0").rstrip(".")
    env.filters["human"] = L.human  # value, unit → "1.23 GiB", "45.60 ms", "12.3 %"
    env.filters["size"] = lambda b: "n/a" if b is None else L.size(b)
    env.filters["dur"] = L.dur
    env.filters["kname"] = L.short_kernel
    # Trace text in report.md: Markdown-escaped, then HTML-escaped by autoescape.
    env.filters["md"] = lambda v: markdown(str(v))
    return env


def _svg(body: str, title: str, width: int = W, height: int = H) -> Markup:
    # every dynamic text inside went through xml_escape
    return Markup(
        f'<svg class="plot" width="{width}"'
        f' height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{xml_escape(title)}</title>{body}</svg>"
    )


def svg_busy_timeline(ranks: list[RankMetrics]) -> Markup:
    """Busy fraction per time bucket, one line per rank (0 = idle, 1 = busy)."""
    left, right, top, bottom = 40, 10, 10, 30
    pw, ph = W - left - right, H - top - bottom
    parts = [
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>',
        f'<text x="4" y="{top + 8}" font-size="10">1.0</text>',
        f'<text x="4" y="{top + ph}" font-size="10">0.0</text>',
        f'<text x="{left}" y="{H - 8}" font-size="10">time →</text>',
    ]
    for i, r in enumerate(ranks):
        fr = r.timeline.busy_fraction
        if not fr:
            continue
        n = len(fr)
        pts = " ".join(
            f"{left + pw * (j + 0.5) / n:.1f},{top + ph * (1 - v):.1f}" for j, v in enumerate(fr)
        )
        color = COLORS[i % len(COLORS)]
        parts.append(f'<polyline class="series" fill="none" stroke="{color}" points="{pts}"/>')
        parts.append(
            f'<text x="{W - 150}" y="{top + 12 + 12 * i}" font-size="10" fill="{color}">'
            f"{xml_escape(f'rank {r.rank} dev {r.devices}')}</text>"
        )
    return _svg("".join(parts), "GPU busy fraction over time")


def svg_breakdown(ranks: list[RankMetrics]) -> Markup:
    """Stacked horizontal bars: HTA compute / non-compute / idle per rank."""
    rows = max(1, len(ranks))
    height = 40 + 22 * rows
    left, pw = 110, W - 130
    parts = []
    legend = [("compute", "#2ca02c"), ("non-compute", "#ff7f0e"), ("idle", "#d62728")]
    for k, (lab, col) in enumerate(legend):
        parts.append(f'<rect x="{left + 110 * k}" y="4" width="10" height="10" fill="{col}"/>')
        parts.append(f'<text x="{left + 110 * k + 14}" y="13" font-size="10">{lab}</text>')
    for i, r in enumerate(ranks):
        y = 24 + 22 * i
        x = float(left)
        t = r.temporal
        for v, (_, col) in zip((t.compute_pct, t.non_compute_pct, t.idle_pct), legend, strict=True):
            w = pw * max(0.0, v) / 100
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{col}"/>'
            )
            x += w
        parts.append(
            f'<text x="4" y="{y + 12}" font-size="10">'
            f"{xml_escape(f'rank {r.rank} dev {r.devices}')}</text>"
        )
    return _svg("".join(parts), "Time breakdown (HTA)", height=height)


def _entry_label(r: RankMetrics, ranks: list[RankMetrics]) -> str:
    multi = sum(1 for x in ranks if x.rank == r.rank) > 1
    return f"rank {r.rank} dev {','.join(map(str, r.devices))}" if multi else f"rank {r.rank}"


def svg_kernel_types(m: Metrics) -> Markup:
    """Stacked bars: HTA kernel types (percent of the time GPU kernels ran) of all ranks
    together, then of each rank; compact rows when there are many ranks."""
    rows: list[tuple[str, dict[str, float]]] = [("all ranks", m.aggregate.kernel_types)]
    rows += [(_entry_label(r, m.ranks), r.kernel_types) for r in m.ranks if r.kernel_types]
    if len(rows) == 2:  # one rank: its bar is the aggregate
        rows = rows[1:]
    bar = 14 if len(rows) <= 16 else 7
    step = bar + (6 if len(rows) <= 16 else 2)
    types = [t for t in TYPE_COLORS if any(t in kt for _, kt in rows)]
    legend_rows = (len(types) + 1) // 2
    top = 8 + 14 * legend_rows
    height = top + step * max(1, len(rows)) + 6
    left, pw = 110, W - 130
    parts = []
    for k, t in enumerate(types):
        lx, ly = 4 + 360 * (k % 2), 4 + 14 * (k // 2)
        parts.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{TYPE_COLORS[t]}"/>')
        parts.append(f'<text x="{lx + 14}" y="{ly + 9}" font-size="10">{xml_escape(t)}</text>')
    for i, (label, kt) in enumerate(rows):
        y = top + step * i
        x = float(left)
        for t in types:
            w = pw * max(0.0, kt.get(t, 0.0)) / 100
            if w > 0:
                parts.append(
                    f'<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}"'
                    f' fill="{TYPE_COLORS[t]}"><title>{xml_escape(label)}: {xml_escape(t)}'
                    f" {kt.get(t, 0.0):.1f}%</title></rect>"
                )
            x += w
        if bar >= 10 or i == 0 or i == len(rows) - 1:
            parts.append(
                f'<text x="4" y="{y + bar - 2}" font-size="{min(10, bar + 2)}">'
                f"{xml_escape(label)}</text>"
            )
    return _svg("".join(parts), "Kernel types (HTA)", height=height)


def svg_top_kernels(r: RankMetrics, n: int = 10) -> Markup:
    """Horizontal bars: share of kernel time of the top kernels of one rank."""
    ks = r.top_kernels[:n]
    height = 20 + 20 * max(1, len(ks))
    left, pw = 330, W - 390
    parts = []
    for i, k in enumerate(ks):
        y = 10 + 20 * i
        name = L.short_kernel(k.name, 55)
        parts.append(
            f'<text x="4" y="{y + 12}" font-size="10"><title>{xml_escape(plain(k.name))}</title>'
            f"{xml_escape(plain(name))}</text>"
        )
        parts.append(
            f'<rect class="bar" x="{left}" y="{y}" width="{pw * k.share_pct / 100:.1f}"'
            f' height="14" fill="#1f77b4"/>'
        )
        parts.append(
            f'<text x="{left + pw * k.share_pct / 100 + 4:.1f}" y="{y + 12}" font-size="10">'
            f"{k.share_pct:.1f}%</text>"
        )
    return _svg("".join(parts), f"Top kernels, rank {r.rank}", height=height)


def svg_step_hist(r: RankMetrics, bins: int = 30) -> Markup:
    """Histogram of step durations of one rank."""
    durs = r.steps.durations_ns if r.steps else []
    left, bottom, top = 40, 30, 10
    pw, ph = W - left - 10, H - top - bottom
    parts = [
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>'
    ]
    if durs:
        lo, hi = min(durs), max(durs)
        width = (hi - lo) / bins or 1
        counts = [0] * bins
        for d in durs:
            counts[min(bins - 1, int((d - lo) / width))] += 1
        cmax = max(counts)
        for i, c in enumerate(counts):
            h = ph * c / cmax
            parts.append(
                f'<rect class="bar" x="{left + pw * i / bins:.1f}" y="{top + ph - h:.1f}"'
                f' width="{pw / bins - 1:.1f}" height="{h:.1f}" fill="#9467bd"/>'
            )
        parts.append(f'<text x="{left}" y="{H - 8}" font-size="10">{lo / 1e6:.2f} ms</text>')
        parts.append(f'<text x="{W - 80}" y="{H - 8}" font-size="10">{hi / 1e6:.2f} ms</text>')
    return _svg("".join(parts), f"Step-time distribution, rank {r.rank}")


VIEW_W, VIEW_LEFT, ROW_H, ROW_GAP, VIEW_TOP = 960, 190, 16, 5, 26
VIEW_COLORS = {
    "kernels": "#2ca02c",
    "memsets": "#7f7f7f",
    "nvtx": "#9467bd",
    "waits": "#d62728",
    "thread": "#17becf",
}
COPY_COLORS = {"HtoD": "#ff7f0e", "DtoH": "#8c564b", "DtoD": "#bcbd22", "PtoP": "#e377c2"}
NCCL_COLOR = "#1f77b4"


def _view_color(kind: str, label: str, name: str) -> str:
    if kind == "kernels" and name.lower().startswith("nccl"):
        return NCCL_COLOR
    if kind == "copies":
        return COPY_COLORS.get(label.removeprefix("copies ").removeprefix("UM "), "#e377c2")
    return VIEW_COLORS.get(kind, "#7f7f7f")


def _ticks(width_ns: int, n: int = 5) -> list[int]:
    """Round tick positions (ns) across a window: steps of 1, 2 or 5 times a power of ten."""
    if width_ns <= 0:
        return [0]
    raw = width_ns / n
    mag = 10 ** (len(str(int(raw))) - 1)
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return list(range(0, width_ns + 1, step))


def svg_step_view(v: StepView, title: str) -> Markup:
    """One step as the timeline shows it: a row per GPU stream (kernels; NCCL in blue), copy
    direction, memsets, NVTX level, the main thread's blocking waits and the busiest threads.
    Every event has its full name, count and time on hover (`<title>`); merged events are drawn
    paler the more idle time lies between them."""
    width = max(1, v.end_ns - v.start_ns)
    pw = VIEW_W - VIEW_LEFT - 10
    height = VIEW_TOP + (ROW_H + ROW_GAP) * max(1, len(v.rows)) + 6
    parts = []
    for t in _ticks(width):
        x = VIEW_LEFT + pw * t / width
        parts.append(
            f'<line x1="{x:.1f}" y1="{VIEW_TOP - 6}" x2="{x:.1f}" y2="{height - 4}"'
            ' stroke="#e4e4e4"/>'
            f'<text x="{x:.1f}" y="{VIEW_TOP - 10}" font-size="10" text-anchor="middle">'
            f"{xml_escape(L.dur(t))}</text>"
        )
    for i, row in enumerate(v.rows):
        y = VIEW_TOP + (ROW_H + ROW_GAP) * i
        label = L.short_kernel(row.label, 30) if row.kind == "thread" else row.label
        parts.append(
            f'<text x="4" y="{y + 12}" font-size="11"><title>{xml_escape(plain(row.label))}:'
            f" {row.source_events} events, {xml_escape(L.dur(row.busy_ns))}</title>"
            f"{xml_escape(plain(label[:30]))}</text>"
            f'<rect x="{VIEW_LEFT}" y="{y}" width="{pw}" height="{ROW_H}" fill="#f6f6f6"/>'
        )
        for ev in row.events:
            x = VIEW_LEFT + pw * ev.start_ns / width
            w = max(0.6, pw * (ev.end_ns - ev.start_ns) / width)
            extent = max(1, ev.end_ns - ev.start_ns)
            opacity = min(1.0, max(0.3, ev.busy_ns / extent)) if ev.count > 1 else 1.0
            what = (
                f"{ev.name} and {ev.count - 1} more: {L.dur(ev.busy_ns)} busy in {L.dur(extent)}"
                if ev.count > 1
                else f"{ev.name}: {L.dur(extent)}"
            )
            text = ""
            if row.kind in ("nvtx", "waits", "thread") and w > 50:
                short = L.short_kernel(ev.name, int(w / 6.5))
                text = (
                    f'<text x="{x + 3:.1f}" y="{y + 12}" font-size="10" fill="#fff"'
                    f' pointer-events="none">{xml_escape(plain(short))}</text>'
                )
            parts.append(
                f'<rect class="ev" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW_H}"'
                f' fill="{_view_color(row.kind, row.label, ev.name)}"'
                f' fill-opacity="{opacity:.2f}"><title>{xml_escape(plain(what))}'
                f" (at +{xml_escape(L.dur(ev.start_ns))})</title></rect>{text}"
            )
    return _svg("".join(parts), title, width=VIEW_W, height=height)


MAX_VIEWS = 4  # step pictures drawn per run (the JSON has every entry's)


def _legend(names: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Short labels for runs, and the legend (label, full name) when they are letters or
    shorter than the names."""
    short = L.short_labels(names)
    cols = L.column_labels(short, width=24)
    legend = [(c, n) for c, n in zip(cols, names, strict=True) if c != n]
    return cols, legend if len(names) > 1 else []


def write_report(
    metrics_list: list[Metrics], out_dir: Path, title: str = "gh-run analysis"
) -> dict[str, Path]:
    """Write report.html, report.md and report.json into out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = _env()
    runs = []
    names = [m.label or f"run {i}" for i, m in enumerate(metrics_list)]
    short, legend = _legend(names)
    for i, m in enumerate(metrics_list):
        label = short[i]
        fired = advise(m)
        views = [
            (L.dur(r.step_view.end_ns - r.step_view.start_ns), r, r.step_view)
            for r in m.ranks
            if r.step_view is not None
        ]
        runs.append(
            {
                "label": label,
                "name": names[i],
                "m": m,
                "verdict": verdict(m, fired),
                "advice": fired,
                "views": [
                    (
                        _entry_label(r, m.ranks),
                        v,
                        svg_step_view(v, f"{_entry_label(r, m.ranks)}: {v.window} ({length})"),
                    )
                    for length, r, v in views[:MAX_VIEWS]
                ],
                "views_left": max(0, len(views) - MAX_VIEWS),
                # what the pages show: a rule that fires alike on many ranks is one entry
                "shown_advice": fold(fired, len(m.ranks)),
                "fold": len(m.ranks) > FOLD_RANKS,
                "labels": {id(r): _entry_label(r, m.ranks) for r in m.ranks},
                "plots": {
                    "timeline": svg_busy_timeline(m.ranks),
                    "breakdown": svg_breakdown(m.ranks),
                    "kernel_types": svg_kernel_types(m) if m.aggregate.kernel_types else None,
                    "kernels": [svg_top_kernels(r) for r in m.ranks if r.top_kernels],
                    "steps": [svg_step_hist(r) for r in m.ranks if r.steps],
                },
            }
        )
    comparison: Comparison | None = compare(metrics_list) if len(metrics_list) > 1 else None
    ctx = {
        "title": title,
        "runs": runs,
        "comparison": comparison,
        "short": short,
        "legend": legend,
    }
    paths = {
        "html": out_dir / "report.html",
        "md": out_dir / "report.md",
        "json": out_dir / "report.json",
    }
    paths["html"].write_text(env.get_template("report.html.j2").render(**ctx), encoding="utf-8")
    paths["md"].write_text(env.get_template("report.md.j2").render(**ctx), encoding="utf-8")
    advice: list[list[Advice]] = [r["advice"] for r in runs]  # type: ignore[misc]
    payload = {
        "title": title,
        "runs": [m.model_dump(mode="json") for m in metrics_list],
        "advice": [[a.model_dump(mode="json") for a in adv] for adv in advice],
        "comparison": comparison.model_dump(mode="json") if comparison else None,
        "legend": dict(legend),
    }
    paths["json"].write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return paths
