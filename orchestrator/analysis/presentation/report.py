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

import functools
import json
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.gpu_metric_model import MetricLane
from orchestrator.analysis.metrics import Metrics, RankMetrics, StepView
from orchestrator.analysis.presentation import gpu_metric_lane
from orchestrator.analysis.presentation import labels as L
from orchestrator.analysis.presentation.advice import Advice, fold
from orchestrator.analysis.presentation.advise import advise
from orchestrator.analysis.presentation.compare import Comparison, compare, key_rows
from orchestrator.analysis.presentation.verdict import verdict
from orchestrator.core.escape import markdown, plain
from orchestrator.core.shipped import templates_dir

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
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
# Charts are as wide as the page and never scaled: x positions are percentages of the chart's
# width, y positions and text sizes pixels, so text reads at FONT px at 640 px as at 1280 px.
# Row labels sit above their bars, never beside them, so a narrow page keeps the bars wide.
FONT = 11
LABEL_H, BAR_H, ROW_GAP = 13, 14, 6
ROW = LABEL_H + BAR_H + ROW_GAP
# below this many steps a histogram says nothing: the durations are listed instead
HIST_MIN_STEPS = 8
# the narrowest chart the labels inside bars are sized for (a 640 px page less its margins)
NARROW_PX = 590


def _env() -> Environment:
    return _environment(str(templates_dir() / "report"))


# One per process: compiling report.html.j2 and report.md.j2 costs more than laying out a
# report (about 0.25 s each), and a process that writes several reports (a campaign, the
# tests) would compile them again for each. Jinja keeps the compiled templates in the
# environment, and the templates are gh-run's own, never a project's.
@functools.cache
def _environment(folder: str) -> Environment:
    env = Environment(
        loader=FileSystemLoader(folder),
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
    env.filters["sig"] = L.num  # three significant digits, thousands separated
    env.filters["human"] = L.human  # value, unit → "1.23 GiB", "45.60 ms", "12.3 %"
    env.filters["size"] = lambda b: "n/a" if b is None else L.size(b)
    env.filters["dur"] = L.dur
    env.filters["kname"] = L.short_kernel
    # Trace text in report.md: Markdown-escaped, then HTML-escaped by autoescape.
    env.filters["md"] = lambda v: markdown(str(v))
    return env


def _p(x: float) -> str:
    """A horizontal position or width as a percentage of the chart's width."""
    return f"{max(0.0, min(100.0, x)):.3f}%"


def _svg(body: str, title: str, height: int) -> Markup:
    # every dynamic text inside went through xml_escape
    return Markup(
        f'<svg class="plot" width="100%" height="{height}" role="img" font-size="{FONT}"'
        f' font-family="system-ui, sans-serif"><title>{xml_escape(title)}</title>{body}</svg>'
    )


def _text(x: str, y: float, s: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x}" y="{y:.0f}"{extra}>{xml_escape(plain(s))}</text>'


def time_unit(width_ns: float) -> tuple[str, float]:
    """The one unit a time axis over `width_ns` is labelled in (s, ms, µs, ns) and its size."""
    for unit, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if width_ns >= 2 * f:
            return unit, f
    return "ns", 1.0


def _ticks(width_ns: int, n: int = 5) -> list[int]:
    """Round tick positions (ns) across a window: steps of 1, 2 or 5 times a power of ten."""
    if width_ns <= 0:
        return [0]
    raw = width_ns / n
    mag = 10 ** (len(str(int(raw))) - 1)
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return list(range(0, width_ns + 1, step))


def tick_label(t_ns: int, unit: str, factor: float) -> str:
    """A tick's label in the axis's one unit without needless decimals ("0", "100 ms",
    "2.5 ms"); the unit on every tick but 0."""
    if t_ns == 0:
        return "0"
    return f"{t_ns / factor:.6g} {unit}"


def _axis(width_ns: int, y_text: float, y0: float, y1: float) -> str:
    """Tick lines from y0 to y1 and labels at y_text across a window of `width_ns`."""
    unit, factor = time_unit(width_ns)
    ticks = _ticks(width_ns)
    out = []
    for i, t in enumerate(ticks):
        x = 100.0 * t / max(1, width_ns)
        anchor = "start" if i == 0 else "end" if x > 96 else "middle"
        out.append(
            f'<line x1="{_p(x)}" y1="{y0:.0f}" x2="{_p(x)}" y2="{y1:.0f}" stroke="#e4e4e4"/>'
            + _text(_p(x), y_text, tick_label(t, unit, factor), text_anchor=anchor, fill="#555")
        )
    return "".join(out)


def _swatches(items: list[tuple[str, str]], y: float, per_row: int = 3) -> tuple[str, float]:
    """Colour swatches with labels in columns of the chart's width; returns the SVG and the y
    below it."""
    out = []
    col = 100.0 / per_row
    for k, (label, color) in enumerate(items):
        x = col * (k % per_row)
        yy = y + 16 * (k // per_row)
        out.append(
            f'<rect x="{_p(x)}" y="{yy - 9:.0f}" width="10" height="10" fill="{color}"/>'
            f'<text x="{_p(x)}" dx="14" y="{yy:.0f}">{xml_escape(plain(label))}</text>'
        )
    rows = (len(items) + per_row - 1) // per_row
    return "".join(out), y + 16 * rows


def svg_busy_timeline(ranks: list[RankMetrics]) -> Markup:
    """Busy fraction per time bucket, one line per entry (0 = idle, 1 = busy), on one time axis
    from the first entry's first GPU activity; the legend below the plot, never on a curve."""
    series = [r for r in ranks if r.timeline.busy_fraction and r.timeline.bucket_ns]
    t0 = min((r.timeline.start_ns for r in series), default=0)
    t1 = max(
        (
            r.timeline.start_ns + r.timeline.bucket_ns * len(r.timeline.busy_fraction)
            for r in series
        ),
        default=1,
    )
    width = max(1, t1 - t0)
    top, ph = 22, 130
    parts = [
        _text("0", 12, "busy fraction of each bucket (1 = a kernel, copy or memset all the time)",
              fill="#555"),
        f'<svg x="0" y="{top}" width="100%" height="{ph}" viewBox="0 0 1000 100"'
        ' preserveAspectRatio="none">'
        '<rect x="0" y="0" width="1000" height="100" fill="#fafafa" stroke="#ccc"'
        ' vector-effect="non-scaling-stroke"/>',
    ]  # fmt: skip
    for i, r in enumerate(series):
        tl = r.timeline
        pts = " ".join(
            f"{1000 * (tl.start_ns - t0 + tl.bucket_ns * (j + 0.5)) / width:.1f},"
            f"{100 * (1 - v):.1f}"
            for j, v in enumerate(tl.busy_fraction)
        )
        parts.append(
            f'<polyline class="series" fill="none" stroke="{COLORS[i % len(COLORS)]}"'
            f' stroke-width="1.5" vector-effect="non-scaling-stroke" points="{pts}"/>'
        )
    parts.append("</svg>")
    parts.append(
        _text("4", top + 12, "1", fill="#555") + _text("4", top + ph - 4, "0", fill="#555")
    )
    parts.append(_axis(width, top + ph + 14, top + ph, top + ph + 4))
    unit, _ = time_unit(width)
    parts.append(_text("100%", top + ph + 28, f"time from the first GPU activity ({unit})",
                       text_anchor="end", fill="#555"))  # fmt: skip
    legend, bottom = _swatches(
        [(_entry_label(r, ranks), COLORS[i % len(COLORS)]) for i, r in enumerate(series)],
        top + ph + 48,
        per_row=4,
    )
    parts.append(legend)
    return _svg("".join(parts), "GPU busy fraction over time", int(bottom))


def _bars(
    rows: list[tuple[str, list[tuple[float, str, str]]]], y: float, bar: int = BAR_H
) -> tuple[str, float]:
    """Labelled stacked bars (label above its bar): per row [(percent, colour, hover)]."""
    out = []
    compact = len(rows) > 16
    for i, (label, segs) in enumerate(rows):
        if not compact or i in (0, len(rows) - 1):
            out.append(_text("0", y + LABEL_H - 3, label))
        by = y + (LABEL_H if not compact or i in (0, len(rows) - 1) else 0)
        x = 0.0
        for pct, color, hover in segs:
            w = max(0.0, pct)
            if w > 0:
                out.append(
                    f'<rect class="bar" x="{_p(x)}" y="{by:.0f}" width="{_p(w)}" height="{bar}"'
                    f' fill="{color}"><title>{xml_escape(plain(hover))}</title></rect>'
                )
            x += w
        y = by + bar + (ROW_GAP if not compact else 2)
    return "".join(out), y


def svg_breakdown(ranks: list[RankMetrics]) -> Markup:
    """Stacked bars: HTA compute / non-compute / idle per entry."""
    legend_items = [("compute", "#2ca02c"), ("non-compute", "#ff7f0e"), ("idle", "#d62728")]
    legend, y = _swatches(legend_items, 12)
    rows = []
    for r in ranks:
        t = r.temporal
        label = _entry_label(r, ranks)
        segs = [
            (v, col, f"{label}: {name} {v:.1f} %")
            for v, (name, col) in zip(
                (t.compute_pct, t.non_compute_pct, t.idle_pct), legend_items, strict=True
            )
        ]
        rows.append((label, segs))
    bars, bottom = _bars(rows, y + 4)
    return _svg(legend + bars, "Time breakdown (HTA)", int(bottom))


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
    types = [t for t in TYPE_COLORS if any(t in kt for _, kt in rows)]
    legend, y = _swatches([(t.lower(), TYPE_COLORS[t]) for t in types], 12, per_row=2)
    bar_rows = [
        (label, [(kt.get(t, 0.0), TYPE_COLORS[t], f"{label}: {t} {kt.get(t, 0.0):.1f} %")
                 for t in types])
        for label, kt in rows
    ]  # fmt: skip
    bars, bottom = _bars(bar_rows, y + 4, BAR_H if len(rows) <= 16 else 7)
    return _svg(legend + bars, "Kernel types (HTA)", int(bottom))


def svg_top_kernels(r: RankMetrics, n: int = 10) -> Markup:
    """Horizontal bars: share of kernel time of the top kernels of one rank, each named so that
    kernels of one short name are told apart (`labels.distinct_kernels`); the full name on
    hover."""
    ks = r.top_kernels[:n]
    names = L.distinct_kernels([k.name for k in r.top_kernels], 70)
    top = max((k.share_pct for k in ks), default=1.0) or 1.0
    parts = []
    y = 4.0
    for k in ks:
        w = 85.0 * k.share_pct / top  # room for the share after the longest bar
        parts.append(
            f'<text x="0" y="{y + LABEL_H - 3:.0f}"><title>{xml_escape(plain(k.name))}</title>'
            f"{xml_escape(plain(names[k.name]))}</text>"
            f'<rect class="bar" x="0" y="{y + LABEL_H:.0f}" width="{_p(w)}" height="{BAR_H}"'
            f' fill="#1f77b4"><title>{xml_escape(plain(k.name))}</title></rect>'
            + _text(_p(w), y + LABEL_H + BAR_H - 3, f"{k.share_pct:.1f} %", dx="4")
        )
        y += ROW
    return _svg("".join(parts), f"Top kernels, rank {r.rank}", int(y))


def svg_step_hist(r: RankMetrics, bins: int = 30) -> Markup | None:
    """Histogram of the step durations of one rank; None below `HIST_MIN_STEPS` steps (the
    report lists them instead: two bars say nothing a list does not)."""
    durs = r.steps.durations_ns if r.steps else []
    if len(durs) < HIST_MIN_STEPS:
        return None
    bins = min(bins, max(5, len(durs) // 2))
    lo, hi = min(durs), max(durs)
    width = (hi - lo) / bins or 1
    counts = [0] * bins
    for d in durs:
        counts[min(bins - 1, int((d - lo) / width))] += 1
    cmax = max(counts)
    top, ph = 18, 120
    parts = [
        _text("0", 12, f"steps per bin (most: {cmax})", fill="#555"),
        f'<rect x="0" y="{top}" width="100%" height="{ph}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for i, c in enumerate(counts):
        h = ph * c / cmax
        parts.append(
            f'<rect class="bar" x="{_p(100 * i / bins)}" y="{top + ph - h:.1f}"'
            f' width="{_p(100 / bins * 0.9)}" height="{h:.1f}" fill="#9467bd">'
            f"<title>{c} steps of {xml_escape(L.dur(lo + i * width))} to"
            f" {xml_escape(L.dur(lo + (i + 1) * width))}</title></rect>"
        )
    parts.append(_text("0", top + ph + 14, L.dur(lo), fill="#555"))
    parts.append(_text("100%", top + ph + 14, L.dur(hi), text_anchor="end", fill="#555"))
    parts.append(_text("50%", top + ph + 14, "step duration", text_anchor="middle", fill="#555"))
    return _svg("".join(parts), f"Step-time distribution, rank {r.rank}", top + ph + 22)


VIEW_COLORS = {
    "kernels": "#2ca02c",
    "memsets": "#7f7f7f",
    "nvtx": "#9467bd",
    "waits": "#d62728",
    "thread": "#17becf",
}
COPY_COLORS = {"HtoD": "#ff7f0e", "DtoH": "#8c564b", "DtoD": "#bcbd22", "PtoP": "#e377c2"}
NCCL_COLOR = "#1f77b4"
# what each kind of row of the step picture shows, for the legend above it (only the kinds a
# picture has are named)
VIEW_LEGEND = {
    "kernels": "GPU streams (kernels green, NCCL blue)",
    "copies": "copies by direction (HtoD orange, DtoH brown, DtoD olive)",
    "memsets": "memsets grey",
    "nvtx": "NVTX ranges purple",
    "waits": "the main thread's blocking waits red",
    "thread": "the busiest CPU threads teal",
}


def view_legend(views: list[StepView]) -> str:
    """The legend of step pictures: the kinds of rows they have, in the order they are drawn."""
    kinds = {row.kind for v in views for row in v.rows}
    return ", ".join(text for kind, text in VIEW_LEGEND.items() if kind in kinds)


def _view_color(kind: str, label: str, name: str) -> str:
    if kind == "kernels" and name.lower().startswith("nccl"):
        return NCCL_COLOR
    if kind == "copies":
        return COPY_COLORS.get(label.removeprefix("copies ").removeprefix("UM "), "#e377c2")
    return VIEW_COLORS.get(kind, "#7f7f7f")


def svg_step_view(v: StepView, title: str, lane: MetricLane | None = None) -> Markup:
    """One step as the timeline shows it: a row per GPU stream (kernels; NCCL in blue), copy
    direction, memsets, NVTX level, the main thread's blocking waits and the busiest threads,
    each row's label above it. Every event has its full name, count and time on hover
    (`<title>`); merged events are drawn paler the more idle time lies between them. `lane`:
    the GPU metrics of the window, as strips under the rows (`gpu_metric_lane`)."""
    width = max(1, v.end_ns - v.start_ns)
    top = 18
    n_rows = max(1, len(v.rows)) + gpu_metric_lane.count(lane)
    parts = [_axis(width, 12, top - 2, top + ROW * n_rows)]
    for i, row in enumerate(v.rows):
        y = top + ROW * i
        label = L.short_kernel(row.label, 40) if row.kind == "thread" else row.label
        parts.append(
            f'<text x="0" y="{y + LABEL_H - 3}"><title>{xml_escape(plain(row.label))}:'
            f" {row.source_events} events, {xml_escape(L.dur(row.busy_ns))}</title>"
            f"{xml_escape(plain(label[:48]))}</text>"
            f'<rect x="0" y="{y + LABEL_H}" width="100%" height="{BAR_H}" fill="#f6f6f6"/>'
        )
        for ev in row.events:
            x = 100.0 * ev.start_ns / width
            w = max(0.08, 100.0 * (ev.end_ns - ev.start_ns) / width)
            extent = max(1, ev.end_ns - ev.start_ns)
            opacity = min(1.0, max(0.3, ev.busy_ns / extent)) if ev.count > 1 else 1.0
            what = (
                f"{ev.name} and {ev.count - 1} more: {L.dur(ev.busy_ns)} busy in {L.dur(extent)}"
                if ev.count > 1
                else f"{ev.name}: {L.dur(extent)}"
            )
            text = ""
            chars = int(w / 100 * NARROW_PX / 6.5)  # what fits at the narrowest page
            if row.kind in ("nvtx", "waits", "thread") and chars >= 6:
                short = L.short_kernel(ev.name, chars)
                text = (
                    f'<text x="{_p(x)}" dx="3" y="{y + LABEL_H + BAR_H - 3}" fill="#fff"'
                    f' pointer-events="none">{xml_escape(plain(short))}</text>'
                )
            parts.append(
                f'<rect class="ev" x="{_p(x)}" y="{y + LABEL_H}" width="{_p(w)}"'
                f' height="{BAR_H}" fill="{_view_color(row.kind, row.label, ev.name)}"'
                f' fill-opacity="{opacity:.2f}"><title>{xml_escape(plain(what))}'
                f" (at +{xml_escape(L.dur(ev.start_ns))})</title></rect>{text}"
            )
    if lane is not None:
        below = top + ROW * max(1, len(v.rows))
        parts += gpu_metric_lane.strips(lane, width, below, LABEL_H, BAR_H, ROW)
    return _svg("".join(parts), title, top + ROW * n_rows + 4)


MAX_VIEWS = 4  # step pictures drawn per run (the JSON has every entry's)


def _legend(names: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Short labels for runs, and the legend (label, full name) when they are letters or
    shorter than the names."""
    short = L.short_labels(names)
    cols = L.column_labels(short, width=24)
    legend = [(c, n) for c, n in zip(cols, names, strict=True) if c != n]
    return cols, legend if len(names) > 1 else []


def rank_table(m: Metrics) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The per-rank table turned on its side: a row per metric (the metric catalogue's `RANKS`
    view), a column per entry (it grows down, not off the page's right edge)."""
    heads = [_entry_label(r, m.ranks) for r in m.ranks]
    rows = [row for _, group in views.rows("ranks", m.ranks, digits=1) for row in group]
    return heads, [(row.label, [row.show(r) for r in m.ranks]) for row in rows]


def ranges(r: RankMetrics) -> list[tuple[str, int, int, float, int | None]]:
    """The rank's NVTX / annotation ranges, a GPU-side range (`… [gpu]`: the span of the
    kernels launched under the range on its own thread) beside its CPU-side one instead of a
    row of its own: (name, count, total, mean, GPU-side total or None)."""
    gpu = {x.name.removesuffix(" [gpu]"): x for x in r.nvtx if x.name.endswith(" [gpu]")}
    out = []
    for x in r.nvtx:
        if x.name.endswith(" [gpu]"):
            continue
        g = gpu.pop(x.name, None)
        out.append((x.name, x.count, x.total_ns, x.mean_ns, g.total_ns if g else None))
    out += [(n + " [gpu]", g.count, g.total_ns, g.mean_ns, None) for n, g in gpu.items()]
    return out


def timeline_hints(m: Metrics) -> list[str]:
    """How to open each input's whole timeline, each way said once: a hint that several inputs
    share (the exports of one job, whose reports were left on the cluster) names them, instead
    of the same sentence once per input."""
    by_hint: dict[str, list[str]] = {}
    for s in m.sources:
        by_hint.setdefault(s.open_with or s.path, []).append(Path(s.path).name)
    return [
        hint if len(names) == 1 else f"{hint}: {', '.join(names)}"
        for hint, names in by_hint.items()
    ]


def _run_context(
    m: Metrics, label: str, name: str, records: dict[str, str] | None = None
) -> dict[str, object]:
    fired = advise(m, records)
    v = verdict(m, fired)
    views = [
        (L.dur(r.step_view.end_ns - r.step_view.start_ns), r, r.step_view)
        for r in m.ranks
        if r.step_view is not None
    ]
    in_verdict = {f.rule for f in v.findings if f.rule}
    from orchestrator.analysis.presentation import memory_findings, memory_lane

    memory = [
        (
            _entry_label(r, m.ranks),
            r.memory,
            memory_lane.svg_lane(r.memory, f"{_entry_label(r, m.ranks)}: {r.memory.source}"),
            memory_lane.peak_rows(r.memory),
        )
        for r in m.ranks
        if r.memory is not None
    ][:MAX_VIEWS]
    ooms = [
        (
            memory_findings.oom_sentence(r.rank, r.memory.oom),
            memory_findings.knob(*[memory_findings.oom_knob(r.memory.oom, m.workload_kind)[0],
                                   m.workload_kind])
            + f" ({memory_findings.oom_knob(r.memory.oom, m.workload_kind)[1]})",
        )
        for r in m.ranks
        if r.memory is not None and r.memory.oom is not None
    ]  # fmt: skip
    return {
        "memory": memory,
        "ooms": ooms,
        "memory_only": bool(m.sources) and all(s.kind == "torch-snapshot" for s in m.sources),
        "label": label,
        "name": name,
        "m": m,
        "verdict": v,
        "advice": fired,
        "views": [
            (
                _entry_label(r, m.ranks),
                sv,
                svg_step_view(
                    sv,
                    f"{_entry_label(r, m.ranks)}: {sv.window} ({length})",
                    r.gpu_metrics.lane if r.gpu_metrics else None,
                ),
            )
            for length, r, sv in views[:MAX_VIEWS]
        ],
        "views_left": max(0, len(views) - MAX_VIEWS),
        "views_legend": view_legend([sv for _, _, sv in views[:MAX_VIEWS]]),
        # the advice the verdict does not already show (a rule that fires alike on many ranks
        # is one entry)
        "more_advice": fold([a for a in fired if a.rule not in in_verdict], len(m.ranks)),
        "fold": len(m.ranks) > FOLD_RANKS,
        "rank_table": rank_table(m),
        # per entry, in the order of m.ranks
        "kernel_names": [L.distinct_kernels([k.name for k in r.top_kernels[:15]]) for r in m.ranks],
        "ranges": [ranges(r)[:15] for r in m.ranks],
        # the threads that did something in the trace; the rest are counted
        "threads": [[t for t in r.threads if t.osrt_ns or t.cpu_op_ns][:12] for r in m.ranks],
        "settings": m.settings.items(),
        "timeline": timeline_hints(m),
        "plots": {
            "timeline": svg_busy_timeline(m.ranks),
            "breakdown": svg_breakdown(m.ranks),
            "kernel_types": svg_kernel_types(m) if m.aggregate.kernel_types else None,
            "kernels": [
                (_entry_label(r, m.ranks), svg_top_kernels(r)) for r in m.ranks if r.top_kernels
            ],
            "steps": [
                (
                    _entry_label(r, m.ranks),
                    svg_step_hist(r),
                    ", ".join(L.dur(d) for d in r.steps.durations_ns[:HIST_MIN_STEPS]),
                )
                for r in m.ranks
                if r.steps
            ],
        },
    }


def compare_view(c: Comparison) -> list[tuple[str, str, list[str], list[str]]]:
    """A comparison's rows as the report shows them: (metric, the row's one unit, each run's
    value in it or "not measured", each change)."""
    out = []
    for row in c.rows:
        shown = L.row_unit(row.values, row.unit)
        measured = row.measured or [True] * len(row.values)
        cells = [
            L.in_unit(v, row.unit, shown) if ok else L.NOT_MEASURED
            for v, ok in zip(row.values, measured, strict=True)
        ]
        out.append((row.metric, "" if shown == "count" else shown, cells, row.change[1:]))
    return out


def write_report(
    metrics_list: list[Metrics],
    out_dir: Path,
    title: str = "gh-run analysis",
    records: dict[str, str] | None = None,
) -> dict[str, Path]:
    """Write report.html, report.md and report.json into out_dir; returns their paths.
    `records`: the rules whose projections were often wrong (store/scores.py), said beside
    their projections as `analyze` says them.

    Several runs: the report opens with what changed in each against the first (the verdict
    `compare` prints), then a short table of what matters (`compare.key_rows`), the whole
    comparison folded below; then each run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = _env()
    names = [m.label or f"run {i}" for i, m in enumerate(metrics_list)]
    short, legend = _legend(names)
    runs = [_run_context(m, short[i], names[i], records) for i, m in enumerate(metrics_list)]
    comparison: Comparison | None = (
        compare(metrics_list, labels=names) if len(metrics_list) > 1 else None
    )
    rows = compare_view(comparison) if comparison else []
    key = key_rows(comparison) if comparison else []
    ctx = {
        "title": title,
        "runs": runs,
        "comparison": comparison,
        "compare_rows": rows,
        "groups": [r.group for r in comparison.rows] if comparison else [],
        "key_rows": [next(row for row in rows if row[0] == k.metric) for k in key],
        # each figure of the short table defined once under it, one click from its name and
        # from "what changed" (which names the same step figure)
        "key_defs": [(k.key, k.metric, views.metric(k.key).definition) for k in key],
        "changes": list(zip(short[1:], comparison.changes, strict=True)) if comparison else [],
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
