"""Side-by-side comparison of runs, with deltas against the first (the baseline).

Rows are the metric catalogue's compare view (`catalogue.views.COMPARE`), grouped like the
seed's "with vs without offloading" table: GPU time, kernel continuity (idle gaps), GPU memory,
memory traffic, CPU activity, sync overhead, steps, communication (HTA's kernel types, overlap
and idle breakdown; the cross-rank skews), kernels. A run's value is the catalogue's
(`Metric.run_value`: per-rank numbers averaged over ranks, counts and bytes summed, peaks the
largest, each as its entry says); its unit is the row's.
delta_abs = value - baseline; delta_rel_pct = 100 * delta_abs / |baseline| (None when the
baseline is 0, near zero against the value (`labels.NEAR_ZERO`: a change beyond that factor is
news by its size, not its digits: 8 bytes to 2.4 GB is not "+30,194,585,930 %"), or a value is
missing); `change` is how a reader sees it (`labels.change_text`).

What a run's sources could not measure (the catalogue's `Metric.sources`) is None with
`measured` False ("not measured", never a real 0): CPU operators only in PyTorch-profiler
traces, OS-runtime calls only in nsys exports that traced them, Unified Memory only in nsys
exports, every GPU row only where the trace holds kernels, the workload's own numbers only
beside its metrics.json. A row whose runs measured it in different ways (`Metric.basis`: HTA's
window, the step ranges, where the peak memory came from) is not compared (`comparable` False,
change "not comparable") and says why in `notes`.
"""

from __future__ import annotations

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.catalogue.entries import WAIT_FUNCS
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.changes import STEP_FIGURES, WhatChanged, what_changed
from orchestrator.core.base import Strict
from orchestrator.core.human import NEAR_ZERO, change_text

__all__ = ["NEAR_ZERO", "WAIT_FUNCS", "Comparison", "ComparisonRow", "change_text", "compare"]


class ComparisonRow(Strict):
    """One metric across runs."""

    group: str
    metric: str
    unit: str
    values: list[float | None]
    delta_abs: list[float | None]
    delta_rel_pct: list[float | None]
    # the change against the baseline as it reads: `+12.3 %`, `×85`, `new`, `from ~0 (+2.4 GiB)`
    change: list[str] = []
    # False where a run's sources cannot measure this metric (its value is None: "not measured")
    measured: list[bool] = []
    # False where a run measured it in another way than the baseline (`notes` says how)
    comparable: list[bool] = []
    # the metric's key in the catalogue (docs/metrics.md), as the state store and campaigns
    # name it; `metric` is its label here
    key: str = ""


class Comparison(Strict):
    """Runs side by side; the first is the baseline. `changes`: what changed in each other
    run against it (phases, kernels, metric groups, the finding in one sentence)."""

    labels: list[str]
    rows: list[ComparisonRow]
    changes: list[WhatChanged] = []
    # what a reader must know first: sources of different kinds, rows measured differently,
    # what the two idle figures count
    notes: list[str] = []


SOURCE_NAMES = {
    "nsys-sqlite": "an nsys export",
    "kineto-json": "a PyTorch-profiler trace",
    "torch-snapshot": "a PyTorch memory snapshot",
}


def _sources(m: Metrics) -> str:
    kinds = sorted({s.kind for s in m.sources})
    return " and ".join(SOURCE_NAMES.get(k, k) for k in kinds) or "no input"


def _notes(
    metrics: list[Metrics],
    labels: list[str],
    rows: list[ComparisonRow],
    bases: dict[str, list[str | None]],
) -> list[str]:
    """The sources' kinds when they differ, the rows measured differently (and how), the
    rows a source could not measure."""
    out: list[str] = []
    kinds = [frozenset(s.kind for s in m.sources) for m in metrics]
    if len(set(kinds)) > 1:
        said = "; ".join(f"{lab} is {_sources(m)}" for lab, m in zip(labels, metrics, strict=True))
        out.append(
            f"the sources differ ({said}): their numbers come from different recorders, so"
            " compare them as a rough guide; rows measured differently are marked not comparable"
        )
    differ: dict[tuple[str | None, ...], list[str]] = {}
    for row in rows:
        if not all(row.comparable):
            differ.setdefault(tuple(bases[row.metric]), []).append(row.metric)
    for how_each, names in differ.items():
        how = "; ".join(f"{lab}: {b}" for lab, b in zip(labels, how_each, strict=True) if b)
        out.append(f"not comparable, measured differently: {', '.join(names)} ({how})")
    unmeasured = [row.metric for row in rows if not all(row.measured) and any(row.measured)]
    if unmeasured:
        out.append(
            "not measured by every run's sources (shown as not measured, never as 0): "
            + ", ".join(unmeasured)
        )
    return out


def _snapshots_only(m: Metrics) -> bool:
    return bool(m.sources) and all(s.kind == "torch-snapshot" for s in m.sources)


def _measured_rows(rows: list[ComparisonRow]) -> tuple[list[ComparisonRow], list[ComparisonRow]]:
    """(the rows some run's sources measure, the rows none does): a row of "not measured" in
    every column says nothing, and a CPU-only comparison had dozens of them."""
    kept = [r for r in rows if any(r.measured)]
    return kept, [r for r in rows if not any(r.measured)]


def compare(metrics: list[Metrics], labels: list[str] | None = None) -> Comparison:
    """A row of every metric of the catalogue's compare view (`catalogue.views.COMPARE`) for
    each run, with deltas against the first."""
    from orchestrator.analysis.presentation.verdict import idle_figures

    labels = labels or [m.label or f"run {i}" for i, m in enumerate(metrics)]
    rows = []
    bases: dict[str, list[str | None]] = {}
    everyone = [r for m in metrics for r in m.ranks]
    for row in views.run_rows("compare"):
        if row.when is not None and not row.when(everyone):
            continue
        met = row.metric
        measured = [met.sources.measured(m) for m in metrics]
        if not any(measured) and all(_snapshots_only(m) for m in metrics):
            continue  # runs of memory snapshots alone: no row of GPU time "not measured"
        values = [
            met.run_value(m, row.unit, check=False) if ok else None
            for m, ok in zip(metrics, measured, strict=True)
        ]
        basis = [met.basis(m) if met.basis else None for m in metrics]
        bases[row.label] = basis
        comparable = [
            i == 0 or basis[i] is None or basis[0] is None or basis[i] == basis[0]
            for i in range(len(metrics))
        ]
        base = values[0] if values else None
        d_abs: list[float | None] = []
        d_rel: list[float | None] = []
        change: list[str] = []
        for v, same in zip(values, comparable, strict=True):
            if v is None or base is None or not same:
                d_abs.append(None)
                d_rel.append(None)
            else:
                d_abs.append(v - base)
                near_zero = not base or abs(v) >= NEAR_ZERO * abs(base)
                d_rel.append(None if near_zero else 100.0 * (v - base) / abs(base))
            change.append(change_text(v, base, row.unit) if same else "not comparable")
        rows.append(
            ComparisonRow(
                group=row.group,
                metric=row.label,
                unit=row.unit,
                values=values,
                delta_abs=d_abs,
                delta_rel_pct=d_rel,
                change=change,
                measured=measured,
                comparable=comparable,
                key=met.key,
            )
        )
    rows, left_out = _measured_rows(rows)
    changes = []
    for lab, m in zip(labels[1:], metrics[1:], strict=True):
        w = what_changed(metrics[0], m)
        changes.append(w.model_copy(update={"label": lab, "baseline_label": labels[0]}))
    notes = _notes(metrics, labels, rows, bases)
    if left_out:
        groups = list(dict.fromkeys(r.group for r in left_out))
        notes.append(
            f"left out: {len(left_out)} rows no run measured (their sources record none of"
            f" them): {', '.join(groups)}"
        )
    for lab, m in zip(labels, metrics, strict=True):
        said = idle_figures(m)
        if said is not None and said.differ:
            notes.append(f"{lab}: {said.text}")
    return Comparison(labels=labels, rows=rows, changes=changes, notes=notes)


MOVED_PCT = 25.0  # beside the key rows, the other rows that moved at least this much
MOVED_ROWS = 3  # and at most this many of them
KEY_ROWS = 10


def key_rows(c: Comparison, limit: int = KEY_ROWS) -> list[ComparisonRow]:
    """What matters, for a report's short table: the catalogue's `KEY` rows some run measured
    (one step figure: the traced steps' mean, or else the workload's own timing), then up to
    `MOVED_ROWS` other rows that moved most (comparable, at least `MOVED_PCT` in some run), up
    to `limit` rows."""
    by_key = {r.key: r for r in c.rows}

    def has(r: ComparisonRow) -> bool:
        return any(v is not None for v in r.values)

    # one step figure, the one "what changed" names (`changes.step_figure`'s rule)
    step = next(
        (k for k in STEP_FIGURES if k in by_key and all(v is not None for v in by_key[k].values)),
        None,
    )
    out = [
        by_key[k]
        for k in views.KEY
        if k in by_key and has(by_key[k]) and (step is None or k not in STEP_FIGURES or k == step)
    ]

    def moved(r: ComparisonRow) -> float:
        rel = [abs(x) for x in r.delta_rel_pct[1:] if x is not None]
        return max(rel, default=0.0)

    rest = sorted(
        (r for r in c.rows if r not in out and has(r) and moved(r) >= MOVED_PCT),
        key=lambda r: -moved(r),
    )
    return (out + rest[:MOVED_ROWS])[:limit]
