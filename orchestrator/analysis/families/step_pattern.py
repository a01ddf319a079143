"""Slow steps and their cause (issue 35 item 4): which steps take markedly longer than the
median, whether they come at a period (every Nth step: logging, evaluation, checkpointing every
N steps), and which idle cause makes the difference.

A step is slow when it lasts more than `SLOW` times the median step and at least `MIN_EXTRA_NS`
more. Slow steps at equal spacing (two or more, spacing of two or more) are periodic. Their cause
is the idle class (`idle_causes`, claimed per interval) whose time in the slow steps exceeds its
mean in the other steps by most; each interval's claims count in the step that holds them (its
input in the step it precedes, the rest in the step it follows). Without such a class the
pattern is reported with its cause unknown (the extra time is on the GPU: longer kernels).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.analysis.metrics import StepPattern

SLOW = 1.15
MIN_EXTRA_NS = 1_000_000


def find(
    rows: list[tuple[str, int, int]],
    a: Any,
    h: Any,
    claims: list[dict[str, int]],
    evidence: dict[str, str],
) -> StepPattern | None:
    """The slow steps of `rows` (name, start, duration) and what makes them slow; None when no
    step is, or fewer than three steps were found. `a`, `h`, `claims`: the judged intervals
    (`idle_causes.Judged`); `evidence`: each class's evidence text."""
    if len(rows) < 3:
        return None
    dur = np.array([d for _, _, d in rows], dtype=np.int64)
    med = float(np.median(dur))
    slow = np.flatnonzero((dur > SLOW * med) & (dur - med >= MIN_EXTRA_NS))
    if slow.size == 0 or slow.size == dur.size:
        return None
    starts = np.array([s for _, s, _ in rows], dtype=np.int64)
    per: dict[str, Any] = {}
    for i, cl in enumerate(claims):
        for cls, ns in cl.items():
            at = int(h[i]) - 1 if cls == "input" else int(a[i])
            k = int(np.searchsorted(starts, at, side="right")) - 1
            if 0 <= k < len(rows) and at < starts[k] + dur[k]:
                per.setdefault(cls, np.zeros(len(rows), dtype=np.int64))[k] += ns
    normal = np.setdiff1d(np.arange(len(rows)), slow)
    best, best_ns = None, 0.0
    for cls, v in per.items():
        if cls == "unclassified":
            continue
        excess = float(v[slow].mean() - v[normal].mean())
        if excess > best_ns:
            best, best_ns = cls, excess
    extra = float(dur[slow].mean() - med)
    every = None
    if slow.size >= 2:
        d = np.diff(slow)
        if int(d.min()) == int(d.max()) >= 2:
            every = int(d[0])
    return StepPattern(
        slow_steps=[rows[int(k)][0] for k in slow],
        of=len(rows),
        every=every,
        median_ms=med / 1e6,
        extra_ms=extra / 1e6,
        cause=best if best is not None and best_ns >= 0.5 * extra else None,
        cause_ms=best_ns / 1e6 if best is not None else 0.0,
        evidence=evidence.get(best, "") if best is not None else "",
    )
