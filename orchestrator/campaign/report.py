"""The campaign report: HTML (variant x metric table, regressions highlighted, trend plots as
inline SVG, no network), Markdown and JSON, side by side in the campaign's folder."""

from __future__ import annotations

import html
import json
from pathlib import Path

import jinja2
from markupsafe import Markup

from orchestrator.analysis.labels import human, num
from orchestrator.campaign.model import METRICS
from orchestrator.campaign.results import CampaignResult, history
from orchestrator.paths import TEMPLATES_DIR
from orchestrator.store import Store

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def fmt(value: float | None, metric: str = "") -> str:
    """A headline number as it reads, in the unit its name says (`peak_gpu_memory_bytes` in GiB,
    `*_s` / `*_us` as durations, `*_pct` in percent); never an exponent."""
    if value is None:
        return "-"
    if metric.endswith("_bytes"):
        return human(value, "B")
    if metric.endswith("_pct"):
        return human(value, "%")
    if metric.endswith("_per_s"):
        return f"{num(value)}/s"
    if metric.endswith("_us"):
        return human(value, "us")
    if metric.endswith("_s"):
        return human(value, "s")
    return num(value)


def trend_svg(
    series: dict[str, list[float | None]],
    labels: list[str],
    title: str,
    w: int = 520,
    h: int = 200,
    metric: str = "",
) -> Markup:
    """One line per variant over the nights (x); an inline SVG with its own axis labels."""
    pts = [v for s in series.values() for v in s if v is not None]
    pad_l, pad_r, pad_t, pad_b = 60, 130, 22, 28
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img"><title>{html.escape(title)}</title>',
        f'<text x="{pad_l}" y="14" font-size="12">{html.escape(title)}</text>',
        f'<rect x="{pad_l}" y="{pad_t}" width="{w - pad_l - pad_r}" height="{h - pad_t - pad_b}" '
        'fill="none" stroke="#999"/>',
    ]
    if pts and labels:
        lo, hi = min(pts), max(pts)
        if hi == lo:
            lo, hi = lo - (abs(lo) * 0.05 or 1), hi + (abs(hi) * 0.05 or 1)
        n = len(labels)

        def xy(i: int, v: float) -> tuple[float, float]:
            x = pad_l + (w - pad_l - pad_r) * (i / (n - 1) if n > 1 else 0.5)
            y = pad_t + (h - pad_t - pad_b) * (1 - (v - lo) / (hi - lo))
            return x, y

        parts.append(
            f'<text x="{pad_l - 4}" y="{pad_t + 10}" font-size="10" '
            f'text-anchor="end">{fmt(hi, metric)}</text>'
        )
        parts.append(
            f'<text x="{pad_l - 4}" y="{h - pad_b}" font-size="10" '
            f'text-anchor="end">{fmt(lo, metric)}</text>'
        )
        parts.append(
            f'<text x="{pad_l}" y="{h - 8}" font-size="10">{html.escape(labels[0])}</text>'
        )
        if n > 1:
            parts.append(
                f'<text x="{w - pad_r}" y="{h - 8}" font-size="10" text-anchor="end">'
                f"{html.escape(labels[-1])}</text>"
            )
        for k, (variant, values) in enumerate(series.items()):
            color = PALETTE[k % len(PALETTE)]
            coords = [xy(i, v) for i, v in enumerate(values) if v is not None]
            if len(coords) > 1:
                path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
                parts.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>'
                )
            for x, y in coords:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')
            parts.append(
                f'<text x="{w - pad_r + 6}" y="{pad_t + 12 * (k + 1)}" font-size="10" '
                f'fill="{color}">{html.escape(variant)}</text>'
            )
    else:
        parts.append(f'<text x="{pad_l + 8}" y="{h / 2}" font-size="11">no data yet</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    return env


def write(store: Store, result: CampaignResult, out_dir: Path, nights: int = 14) -> dict[str, Path]:
    """campaign.html, campaign.md, campaign.json in out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = list(result.thresholds) or ["step_time_s"]
    shown = list(dict.fromkeys(metrics + [k for v in result.variants for k in v.metrics]))
    shown = [m for m in shown if m in METRICS]
    plots = []
    for metric in metrics:
        past = history(store, result.name, metric, nights)
        labels = [rec.campaign_id.removeprefix(result.name + "-")[:15] for rec, _ in past]
        names = [v.variant for v in result.variants]
        series = {n: [vals.get(n) for _, vals in past] for n in names}
        plots.append(
            trend_svg(series, labels, f"{metric}: last {len(past)} campaigns", metric=metric)
        )
    regressed = {(f.variant, f.metric): f for f in result.regressions}
    ctx = {
        "r": result,
        "metrics": shown,
        "thresholds": result.thresholds,
        "descriptions": METRICS,
        "regressed": regressed,
        "findings": {(f.variant, f.metric): f for v in result.variants for f in v.findings},
        "plots": plots,
    }
    env = _env()
    paths = {
        "html": out_dir / "campaign.html",
        "md": out_dir / "campaign.md",
        "json": out_dir / "campaign.json",
    }
    paths["html"].write_text(env.get_template("report/campaign.html.j2").render(**ctx))
    paths["md"].write_text(env.get_template("report/campaign.md.j2").render(**ctx))
    data = result.model_dump()
    data["regressions"] = [f.model_dump() for f in result.regressions]
    data["failed"] = [v.variant for v in result.failed]
    paths["json"].write_text(json.dumps(data, indent=2) + "\n")
    return paths
