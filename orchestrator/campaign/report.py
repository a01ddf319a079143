"""The campaign report: HTML (variant x metric table, regressions highlighted, trend plots as
inline SVG, no network), Markdown and JSON, side by side in the campaign's folder."""

from __future__ import annotations

import functools
import html
import json
import math
from pathlib import Path
from typing import NamedTuple

import jinja2
from markupsafe import Markup

from orchestrator.analysis.timeline.kernel_names import short_kernel
from orchestrator.campaign.model import METRICS
from orchestrator.campaign.results import (
    CampaignResult,
    Finding,
    NightPoint,
    VariantResult,
    trend,
)
from orchestrator.core.escape import markdown
from orchestrator.core.human import human, num
from orchestrator.core.shipped import templates_dir
from orchestrator.store.db import Store


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
    if metric.endswith("_ms"):
        return human(value, "ms")
    if metric.endswith("_s"):
        return human(value, "s")
    return num(value)


def band_svg(
    nights: list[tuple[str, NightPoint]],
    title: str,
    band: tuple[float, float] | None = None,
    baseline: float | None = None,
    regressed: bool = False,
    w: int = 300,
    h: int = 150,
    metric: str = "",
    empty: str = "no data yet",
) -> Markup:
    """One variant's metric over the nights, tonight last: the band it was judged against
    shaded (or the baseline night's value dashed), a failed or missing night marked on the
    axis with its state (never drawn as a point at zero), the line broken there."""
    pad_l, pad_r, pad_t, pad_b = 52, 8, 20, 26
    pw, ph = w - pad_l - pad_r, h - pad_t - pad_b
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img"><title>{html.escape(title)}</title>',
        f'<text x="{pad_l}" y="13" font-size="11">{html.escape(title)}</text>',
        f'<rect x="{pad_l}" y="{pad_t}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    pts = [p.value for _, p in nights if p.value is not None and math.isfinite(p.value)]
    ref: list[float] = [*(band or ()), *([baseline] if baseline is not None else [])]
    if not nights or not (pts or ref):
        parts.append(
            f'<text x="{pad_l + 8}" y="{pad_t + ph / 2}" font-size="11">{html.escape(empty)}</text>'
        )
        parts.append("</svg>")
        return Markup("".join(parts))
    lo, hi = min(pts + ref), max(pts + ref)
    if hi == lo:
        lo, hi = lo - (abs(lo) * 0.05 or 1), hi + (abs(hi) * 0.05 or 1)
    span = hi - lo
    lo, hi = lo - span * 0.08, hi + span * 0.08
    n = len(nights)

    def x_of(i: int) -> float:
        return pad_l + pw * (i / (n - 1) if n > 1 else 0.5)

    def y_of(v: float) -> float:
        return pad_t + ph * (1 - (v - lo) / (hi - lo))

    if band is not None:
        y_hi, y_lo = y_of(band[1]), y_of(band[0])
        parts.append(
            f'<rect x="{pad_l}" y="{y_hi:.1f}" width="{pw}" height="{max(y_lo - y_hi, 1):.1f}" '
            'fill="#cfe3f7" stroke="none"><title>band '
            f"{fmt(band[0], metric)}..{fmt(band[1], metric)}</title></rect>"
        )
    elif baseline is not None:
        y = y_of(baseline)
        parts.append(
            f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + pw}" y2="{y:.1f}" stroke="#888" '
            f'stroke-dasharray="4 3"><title>baseline {fmt(baseline, metric)}</title></line>'
        )
    parts.append(
        f'<text x="{pad_l - 4}" y="{pad_t + 9}" font-size="9" text-anchor="end">'
        f"{fmt(hi, metric)}</text>"
        f'<text x="{pad_l - 4}" y="{pad_t + ph}" font-size="9" text-anchor="end">'
        f"{fmt(lo, metric)}</text>"
        f'<text x="{pad_l}" y="{h - 6}" font-size="9">{html.escape(nights[0][0])}</text>'
    )
    if n > 1:
        parts.append(
            f'<text x="{pad_l + pw}" y="{h - 6}" font-size="9" text-anchor="end">'
            f"{html.escape(nights[-1][0])}</text>"
        )
    segment: list[str] = []
    segments = []
    for i, (label, p) in enumerate(nights):
        if p.value is not None and math.isfinite(p.value):
            segment.append(f"{x_of(i):.1f},{y_of(p.value):.1f}")
            continue
        if segment:
            segments.append(segment)
        segment = []
        why = (
            "not run" if p.state == "ABSENT" else p.state if p.state != "COMPLETED" else "no value"
        )
        color = "#d62728" if p.state not in ("COMPLETED", "ABSENT") else "#888"
        x, y = x_of(i), pad_t + ph - 4
        parts.append(
            f'<g class="missing"><title>{html.escape(label)}: {html.escape(why)}</title>'
            f'<path d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} M{x - 4:.1f},{y + 4:.1f} '
            f'L{x + 4:.1f},{y - 4:.1f}" stroke="{color}" stroke-width="1.5"/></g>'
        )
    if segment:
        segments.append(segment)
    for seg in segments:
        if len(seg) > 1:
            path = " ".join(seg)
            parts.append(
                f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{path}"/>'
            )
    for i, (label, p) in enumerate(nights):
        if p.value is None or not math.isfinite(p.value):
            continue
        last = i == n - 1
        color = "#d62728" if last and regressed else "#1f77b4"
        parts.append(
            f'<circle cx="{x_of(i):.1f}" cy="{y_of(p.value):.1f}" r="{3.5 if last else 2.5}" '
            f'fill="{color}"><title>{html.escape(label)}: {fmt(p.value, metric)}</title></circle>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _env() -> jinja2.Environment:
    return _environment(str(templates_dir()))


# One per process, so that a process writing several campaign reports compiles each template
# once (gh-run's own templates, never a project's).
@functools.cache
def _environment(folder: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["kname"] = short_kernel
    env.filters["md"] = lambda v: markdown(str(v))
    return env


class Cell(NamedTuple):
    """One variant's judgement of one watched metric, as the report shows it: the value, what
    it was judged against, the change, and its notes by number (said once under the table)."""

    value: str
    against: str
    change: str
    css: str
    notes: list[int]


class Notes:
    """Footnotes said once each: a sentence shared by many cells (the warm-up's rule) is one
    note, referenced by number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ref(self, text: str | None) -> list[int]:
        if not text:
            return []
        if text not in self.texts:
            self.texts.append(text)
        return [self.texts.index(text) + 1]


def _against(f: Finding, metric: str, v: VariantResult) -> str:
    if f.unjudged is not None:
        return "not judged"
    if f.rule == "band" and f.band_low is not None and f.band_high is not None:
        low, high = fmt(f.band_low, metric), fmt(f.band_high, metric)
        return f"band {low}..{high} ({f.band_nights} nights)"
    if f.recorded:
        return "first night: sets the baseline"
    if f.rule == "warm-up":
        return f"warm-up: median {fmt(f.baseline, metric)}"
    return f"vs {fmt(f.baseline, metric)}"


def cell(f: Finding | None, metric: str, v: VariantResult, notes: Notes) -> Cell:
    """How a finding reads in the variants' table (no finding: the value alone)."""
    if f is None:
        return Cell(fmt(v.metrics.get(metric), metric), "", "", "", [])
    css = "regression" if f.regression else "unjudged" if f.unjudged else ""
    if v.state != "COMPLETED":
        css = "failed"
    against = _against(f, metric, v)
    if f.figure and f.figure != metric:
        against = f"judged by {f.figure}, {against}"
    # an unjudged threshold's sentence is in the list above the table
    refs = [*notes.ref(f.figure_note), *(notes.ref(f.note) if f.unjudged is None else [])]
    change = "" if f.unjudged is not None or f.recorded else (f.change or "")
    return Cell(fmt(f.value, metric), against, change, css, refs)


def write(store: Store, result: CampaignResult, out_dir: Path, nights: int = 14) -> dict[str, Path]:
    """campaign.html, campaign.md, campaign.json in out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Watched metrics: the campaign's thresholds, then those only a variant has.
    watched = [*result.thresholds, *(f.metric for v in result.variants for f in v.findings)]
    metrics = list(dict.fromkeys(watched)) or ["step_time_s"]
    # The other figures recorded (not judged): a table of their own, folded.
    others = list(dict.fromkeys(k for v in result.variants for k in v.metrics))
    others = [m for m in others if m in METRICS and m not in metrics]
    plots = []
    findings = {(f.variant, f.metric): f for v in result.variants for f in v.findings}
    notes = Notes()
    cells = {
        (v.variant, m): cell(findings.get((v.variant, m)), m, v, notes)
        for v in result.variants
        for m in metrics
    }
    for metric in metrics:
        past = trend(store, result.name, metric, nights)
        labels = [rec.campaign_id.removeprefix(result.name + "-")[:15] for rec, _ in past]
        row = []
        for v in result.variants:
            points = [
                (lab, pts.get(v.variant, NightPoint(value=None, state="ABSENT")))
                for lab, (_, pts) in zip(labels, past, strict=True)
            ]
            f = findings.get((v.variant, metric))
            band = (
                (f.band_low, f.band_high)
                if f and f.band_low is not None and f.band_high is not None
                else None
            )
            row.append(
                band_svg(
                    points,
                    f"{v.variant}: {metric}",
                    band=band,
                    baseline=f.baseline if f and band is None else None,
                    regressed=bool(f and f.regression),
                    metric=metric,
                    empty="not measured on any night" if f and f.unjudged else "no data yet",
                )
            )
        plots.append((metric, len(past), row))
    ctx = {
        "r": result,
        "metrics": metrics,
        "others": others,
        "thresholds": {
            m: ", ".join(
                f"{k} {v}" if not isinstance(v, list) else f"fallback {', '.join(v)}"
                for k, v in th.items()
                if v is not None and v != []
            )
            for m, th in result.thresholds.items()
        },
        "descriptions": METRICS,
        # every figure the page names, defined once at its foot (one click from each name)
        "defined": {
            m: METRICS[m]
            for m in dict.fromkeys(
                [*metrics, *others, *(f.figure for f in findings.values() if f.figure)]
            )
            if m in METRICS
        },
        "cells": cells,
        "notes": notes.texts,
        "plots": plots,
        "rule_words": RULE_WORDS,
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
    data["unjudged"] = [f.model_dump() for f in result.unjudged]
    data["failed"] = [v.variant for v in result.failed]
    paths["json"].write_text(json.dumps(data, indent=2) + "\n")
    return paths


# What a regression was measured against, by the rule that judged it.
RULE_WORDS = {
    "band": "band centre",
    "warm-up": "the good nights' median (warm-up)",
    "last-good": "baseline",
    "pinned": "pinned baseline",
}
