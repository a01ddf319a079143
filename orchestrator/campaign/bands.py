"""Noise bands: what a metric's value usually is, learned from its history of good nights.

A band's centre is the median of the history, its half-width `width` robust standard
deviations (1.4826 x the median absolute deviation, which equals the standard deviation for
normal noise and ignores a few wild nights), never less than `floor_pct` of the centre (a
history of identical values would otherwise make any change an alarm). A night regresses
when it lies outside the band on the threshold's bad side *and* past the threshold measured
from the centre: the band keeps jitter quiet, the threshold keeps a real but harmless shift
(a band made narrow by a quiet history) from alarming.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from orchestrator.campaign.model import Band, Threshold
from orchestrator.core.base import Strict

# MAD x 1.4826 estimates the standard deviation of normally distributed noise.
MAD_TO_SIGMA = 1.4826


class NoiseBand(Strict):
    """A band learned from `nights` good nights (`samples` values: repeats count each)."""

    center: float
    sigma: float
    half_width: float
    low: float
    high: float
    nights: int
    samples: int


def learn(values: Sequence[float], band: Band, nights: int | None = None) -> NoiseBand | None:
    """The band of `values` (non-finite ones left out); None without any value."""
    xs = [v for v in values if math.isfinite(v)]
    if not xs:
        return None
    center = statistics.median(xs)
    sigma = MAD_TO_SIGMA * statistics.median(abs(x - center) for x in xs)
    half = max(band.width * sigma, abs(center) * band.floor_pct / 100)
    return NoiseBand(
        center=center,
        sigma=sigma,
        half_width=half,
        low=center - half,
        high=center + half,
        nights=len(xs) if nights is None else nights,
        samples=len(xs),
    )


def outside(value: float, band: NoiseBand, threshold: Threshold) -> bool:
    """Whether `value` is outside the band on a side the threshold calls bad."""
    worse = threshold.worse
    return ("up" in worse and value > band.high) or ("down" in worse and value < band.low)


def judge(value: float, band: NoiseBand, threshold: Threshold) -> str | None:
    """Why `value` regressed against the band (a sentence fragment), or None."""
    if not outside(value, band, threshold):
        return None
    why = threshold.crossed(value, band.center, band.half_width)
    if why is None:
        return None
    return f"{why}, outside the band {band.low:.4g}..{band.high:.4g}"


def gross(value: float, base: float, threshold: Threshold, factor: float) -> str | None:
    """Why `value` is beyond any plausible noise against `base` (the warm-up's rule: more
    than `factor` times it, or less than 1/`factor`, on a side the threshold calls bad, and
    past the threshold itself), or None. A base at or below zero has no ratio: only the
    threshold (points) can say."""
    worse = threshold.worse
    up = "up" in worse and (value > base * factor if base > 0 else value > base)
    down = "down" in worse and base > 0 and value < base / factor
    if not (up or down):
        return None
    past = threshold.crossed(value, base)
    if past is None and not (threshold.needs_band and base > 0):
        return None
    if base <= 0:
        return f"{past}, from {base:.4g} in the warm-up"
    ratio = value / base
    shown = f"x{ratio:.2f}" if up else f"/{1 / ratio:.2f}" if ratio > 0 else "to zero or below"
    limit = f"x{factor:g}" if up else f"/{factor:g}"
    return f"{shown} (beyond {limit}, more than noise moves a metric in the warm-up)"
