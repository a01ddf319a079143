"""How `compare` prints a Comparison: the table (one row per metric in one unit, one
column per run, the first the baseline, then each other run's change against it) and "what
changed" of each run against the first, wrapped at 100 columns (or the terminal's width)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from orchestrator.analysis.timeline.kernel_names import short_kernel
from orchestrator.core.escape import plain, term
from orchestrator.core.human import NOT_MEASURED, in_unit, num, row_unit

if TYPE_CHECKING:
    from orchestrator.analysis.presentation.changes import WhatChanged
    from orchestrator.analysis.presentation.compare import Comparison


def compare_cells(c: Comparison) -> list[tuple[str, str, list[str]]]:
    """(metric, the row's one unit, each run's value in it) for every row: "not measured" where
    a run's sources cannot measure the metric (`labels.in_unit`, `labels.row_unit`)."""
    out = []
    for row in c.rows:
        shown = row_unit(row.values, row.unit)
        cells = [
            in_unit(v, row.unit, shown) if ok else NOT_MEASURED
            for v, ok in zip(row.values, row.measured or [True] * len(row.values), strict=True)
        ]
        out.append((row.metric, "" if shown == "count" else shown, cells))
    return out


def comparison_table(c: Comparison, labels: list[str], *, deltas: bool) -> Table:
    """The compare table: one row per metric, one column per run (the first is the baseline),
    then the change of every other run against it (with `deltas`)."""
    title = f"compare: deltas against {labels[0]}" if deltas else f"compare (baseline {labels[0]})"
    t = Table(title=term(title), box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("metric", overflow="fold")
    t.add_column("unit", no_wrap=True)
    for lab in labels:
        t.add_column(term(lab), justify="right", no_wrap=True)
    if deltas:
        for lab in labels[1:]:
            header = f"Δ {lab}" if len(labels) > 2 else "Δ"
            t.add_column(term(header), justify="right", no_wrap=True)
    group = None
    for row, (metric, unit, vals) in zip(c.rows, compare_cells(c), strict=True):
        if row.group != group:
            if group is not None:
                t.add_section()
            group = row.group
            t.add_row(f"[bold]{group}[/]", *([""] * (len(t.columns) - 1)))
        # a percentage, a factor, "new" or "from ~0": never a percent of a near-zero baseline
        rel = row.change[1:] if deltas else []
        t.add_row(term(f"  {metric}"), term(unit), *vals, *rel)
    return t


def print_changes(console: Console, w: WhatChanged, label: str, base: str) -> None:
    """What changed in one run against the first: the finding, then the phases, the metric
    groups and the kernels that moved; wrapped at 100 columns (or the terminal's width)."""
    import textwrap

    width = min(console.width, 100)
    lines = [f"what changed, {label} against {base}: {w.finding}"]
    for p in w.phases:
        change = f"{p.change_pct:+.1f}%" if p.change_pct is not None else "-"
        what = p.name if p.figure else f"phase {p.name}"
        lines.append(f"{what}: {num(p.baseline_ms)} → {num(p.value_ms)} ms ({change})")
    lines += [f"{g.name}: {num(g.baseline)} → {num(g.value)} {g.unit}" for g in w.groups]
    lines += [
        f"kernel {short_kernel(k.name)}: {num(k.baseline_ms)} → {num(k.value_ms)} ms"
        + (f" ({k.status})" if k.status != "changed" else "")
        for k in w.kernels
    ]
    lines += [f"({n})" for n in w.notes]
    console.print()
    for i, line in enumerate(lines):
        indent = "" if i == 0 else "  "
        text = textwrap.fill(
            plain(line), width, initial_indent=indent, subsequent_indent=indent + "    "
        )
        console.print(text, markup=False, highlight=False, soft_wrap=True)
