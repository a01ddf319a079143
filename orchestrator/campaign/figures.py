"""Which figure judges a threshold: the metric it names, or, only where the campaign file says
so (`thresholds.METRIC.fallback: [...]`), another figure that measures the same thing.

A figure measures "the same thing" as a metric when both belong to one idea below: the step
time is the workload's own median (`step_time_s`, its metrics.json) or the mean of the traced
step ranges (`step_time_mean_ms`, the trace analysis, the figure `compare` shows). A fallback
figure's values are taken in the metric's unit (`in_unit`), so a threshold's points, percent
and band widths mean what they say whichever figure judged; the baseline is read in the same
figure as tonight (`choose`): nights are never compared across figures.

Nothing falls back on its own: a threshold whose metric was not measured, with no fallback the
file allows, is not judged (results.py: its own state, never a pass).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Idea:
    """One thing a campaign can watch, and the figures that measure it, each with its scale to
    the idea's unit (value x scale = the value in that unit)."""

    name: str
    unit: str
    figures: dict[str, float]


IDEAS = (Idea("step time", "s", {"step_time_s": 1.0, "step_time_mean_ms": 1e-3}),)


def idea_of(key: str) -> Idea | None:
    return next((i for i in IDEAS if key in i.figures), None)


def alternatives(key: str) -> list[str]:
    """The other figures that measure what `key` measures (none: `key` is alone)."""
    idea = idea_of(key)
    return [f for f in idea.figures if f != key] if idea else []


def check_fallback(key: str, fallback: list[str]) -> str | None:
    """Why `fallback` is not a valid fallback list for a threshold on `key` (a sentence
    fragment after the field's name), or None."""
    others = alternatives(key)
    for fig in fallback:
        if fig == key:
            return f"{fig} is the threshold's own metric; list other figures, or remove fallback"
        if fig not in others:
            what = idea_of(key)
            if what is None:
                return (
                    f"{fig} does not measure what {key} measures, and no other figure does; "
                    "remove fallback"
                )
            return (
                f"{fig} does not measure {what.name}; a fallback must measure the same thing "
                f"as {key}: {', '.join(others)}"
            )
    if len(set(fallback)) != len(fallback):
        return "names a figure twice; list each once"
    return None


def in_unit(fig: str, key: str, value: float) -> float:
    """`value` of figure `fig` in the unit of metric `key` (the same idea)."""
    if fig == key:
        return value
    idea = idea_of(key)
    assert idea is not None and fig in idea.figures, (fig, key)
    return value * idea.figures[fig] / idea.figures[key]


def choose(
    chain: list[str], tonight: Callable[[str], bool], reference: Callable[[str], bool]
) -> str | None:
    """The figure that judges: the first of `chain` (the metric, then its fallbacks in the
    file's order) that tonight and the reference both have; else the first tonight has (the
    reference is then missing: a first night, or a baseline that cannot judge); None when
    tonight has none of them."""
    have = [f for f in chain if tonight(f)]
    return next((f for f in have if reference(f)), have[0] if have else None)
