"""Reports: a self-contained HTML file (inline CSS and SVG plots made here, no scripts, no
network), Markdown and JSON with the same numbers. Templates: templates/report/.

Plots: GPU busy fraction over time (per rank), time breakdown bars (HTA compute / non-compute /
idle per rank), top kernels (share of kernel time), step-time distribution (histogram).
Every string from a trace is escaped (Jinja autoescape; SVG text through `xml_escape`).
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from orchestrator.analysis.advice import Advice, advise
from orchestrator.analysis.compare import Comparison, compare
from orchestrator.analysis.metrics import Metrics, RankMetrics
from orchestrator.escape import markdown, plain

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "report"
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
W, H = 720, 220


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
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


def svg_top_kernels(r: RankMetrics, n: int = 10) -> Markup:
    """Horizontal bars: share of kernel time of the top kernels of one rank."""
    ks = r.top_kernels[:n]
    height = 20 + 20 * max(1, len(ks))
    left, pw = 330, W - 390
    parts = []
    for i, k in enumerate(ks):
        y = 10 + 20 * i
        name = k.name if len(k.name) <= 55 else k.name[:52] + "..."
        parts.append(f'<text x="4" y="{y + 12}" font-size="10">{xml_escape(plain(name))}</text>')
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


def write_report(
    metrics_list: list[Metrics], out_dir: Path, title: str = "gh-run analysis"
) -> dict[str, Path]:
    """Write report.html, report.md and report.json into out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = _env()
    runs = []
    for i, m in enumerate(metrics_list):
        label = m.label or f"run {i}"
        runs.append(
            {
                "label": label,
                "m": m,
                "advice": advise(m),
                "plots": {
                    "timeline": svg_busy_timeline(m.ranks),
                    "breakdown": svg_breakdown(m.ranks),
                    "kernels": [svg_top_kernels(r) for r in m.ranks if r.top_kernels],
                    "steps": [svg_step_hist(r) for r in m.ranks if r.steps],
                },
            }
        )
    comparison: Comparison | None = compare(metrics_list) if len(metrics_list) > 1 else None
    ctx = {"title": title, "runs": runs, "comparison": comparison}
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
    }
    paths["json"].write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return paths
