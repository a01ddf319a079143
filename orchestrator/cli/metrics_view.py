"""How `analyze` prints Metrics, to a terminal (Rich tables) or to a pipe or file (plain
aligned text, every value in full).

Layout: one row per metric (the metric catalogue's `ANALYZE` view), values with units. Up to
`RANK_COLUMNS` entries (ranks, or devices of a rank): one column per entry and, from two on,
the worst one named; more: one column each for the min, median and max over the entries,
formatted like the entry they come from, and the worst entry named (`--per-rank` shows every
entry instead). Then the top kernels, the cross-rank view (collective-start and step-time
skew, the straggler), the notes and the advice.
"""

from __future__ import annotations

import re
from typing import TextIO, cast

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.catalogue.views import Row, count, pct
from orchestrator.analysis.loader import RunSet
from orchestrator.analysis.metrics import (
    Metrics,
    RankMetrics,
    merged_operators,
    merged_top_kernels,
)
from orchestrator.analysis.presentation.advice import FOLD_OVER, AdviceGroup, fold
from orchestrator.analysis.presentation.advise import advise
from orchestrator.analysis.presentation.verdict import (
    NO_GPU,
    has_gpu,
    has_kernels,
    holdings,
    idle_figures,
    pattern_sentence,
)
from orchestrator.analysis.timeline.kernel_names import distinct_kernels
from orchestrator.cli.piped import Out
from orchestrator.cli.wrapped import print_wrapped
from orchestrator.core.escape import markup, plain, term
from orchestrator.core.human import dur

RANK_COLUMNS = 3  # entries shown side by side; more get the min / median / max summary


def metric_groups(m: Metrics) -> list[tuple[str, list[Row]]]:
    """The rows of the `analyze` table, grouped (the metric catalogue's `ANALYZE` view); each
    row formats one entry's value."""
    return views.rows("analyze", m.ranks)


def _rank_header(r: RankMetrics, m: Metrics) -> str:
    multi = sum(1 for x in m.ranks if x.rank == r.rank) > 1
    devs = ",".join(map(str, r.devices))
    return f"rank {r.rank} dev {devs}" if multi else f"rank {r.rank}"


def _entry_labels(m: Metrics) -> list[str]:
    return [_rank_header(r, m) for r in m.ranks]


def _worst(row: Row, m: Metrics, labels: list[str]) -> str:
    """The label of the entry with the worst value, when values differ."""
    if row.value is None or row.worse is None:
        return ""
    vals = [(v, i) for i, r in enumerate(m.ranks) if (v := row.value(r)) is not None]
    if len(vals) < 2 or len({v for v, _ in vals}) < 2:
        return ""
    pick = max(vals) if row.worse == "higher" else min(vals)
    return labels[pick[1]]


def _summary_cells(row: Row, m: Metrics, labels: list[str]) -> list[str]:
    """min, median, max (each formatted like the entry it comes from) and the worst entry."""
    if row.value is None:
        shown = {row.show(r) for r in m.ranks}
        return [shown.pop() if len(shown) == 1 else "(varies)", "", "", ""]
    vals = sorted((v, i) for i, r in enumerate(m.ranks) if (v := row.value(r)) is not None)
    if not vals:
        return ["-", "-", "-", ""]
    lo, mid, hi = vals[0], vals[(len(vals) - 1) // 2], vals[-1]
    cells = [row.show(m.ranks[i]) for _, i in (lo, mid, hi)]
    return [*cells, _worst(row, m, labels)]


def _plain(
    console: Out,
    title: str,
    header: list[str],
    rows: list[list[str]],
    right: set[int] | None = None,
) -> None:
    """A table as plain aligned text with every value in full (output that is not a terminal:
    a pipe or a file, read by grep and awk, is never cut to 80 columns). `right`: the columns
    aligned right (all but the first by default)."""
    from orchestrator.cli import table

    cols = [
        table.Column(h, keep=True, right=i in right if right is not None else i > 0)
        for i, h in enumerate(header)
    ]
    out = cast(TextIO, console.file)
    print(plain(title), file=out)
    for line in table.render(cols, rows, width=None, stream=out):
        print(line, file=out)


HOST_GROUPS = ("Steps", "CPU / sync")  # what a trace without GPU activity has to show


def _groups(m: Metrics) -> list[tuple[str, list[Row]]]:
    """The metric groups to print: without GPU activity only the host's (no rows of zeros)."""
    groups = metric_groups(m)
    return groups if has_kernels(m) else [(g, rows) for g, rows in groups if g in HOST_GROUPS]


def print_metrics(
    m: Metrics, console: Out, per_rank: bool = False, records: dict[str, str] | None = None
) -> None:
    from orchestrator.cli import memory_view

    memory_view.print_oom(m, console)  # an out of memory leads
    if memory_view.memory_only(m):  # snapshots alone: memory, and nothing of GPU time
        memory_view.print_memory(m, console)
        return
    if not has_gpu(m):
        console.print(f"{NO_GPU} (no kernels, copies or memsets were traced)", markup=False)
    elif not has_kernels(m):
        print_wrapped(console, f"no GPU-side figures: {holdings(m)}")
    labels = _entry_labels(m)
    wide = per_rank or len(m.ranks) <= RANK_COLUMNS
    worst_col = len(m.ranks) > 1
    if not console.is_terminal:
        header = ["metric", *(labels if wide else [f"min of {len(m.ranks)}", "median", "max"])]
        header += ["worst"] if worst_col else []
        body: list[list[str]] = []
        for group, rows in _groups(m):
            if rows:
                body.append([group, *([""] * (len(header) - 1))])
            for row in rows:
                cells = [row.show(r) for r in m.ranks] if wide else _summary_cells(row, m, labels)
                if wide and worst_col:
                    cells.append(_worst(row, m, labels))
                body.append([plain(f"  {row.label}"), *(plain(c) for c in cells)])
        _plain(console, m.label or "analysis", header, body)
        _after_table(m, console, wide, records)
        return
    from rich import box  # a terminal: Rich lays the table out
    from rich.table import Table

    t = Table(title=term(m.label or "analysis"), box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("metric", no_wrap=True, overflow="ellipsis")
    if wide:
        for lab in labels:
            t.add_column(lab, justify="right", overflow="fold")
    else:
        for col in (f"min of {len(m.ranks)}", "median", "max"):
            t.add_column(col, justify="right", overflow="fold")
    if worst_col:
        t.add_column("worst", justify="left", overflow="fold")
    ncols = (len(m.ranks) if wide else 3) + (1 if worst_col else 0)
    for group, rows in _groups(m):
        if not rows:
            continue
        t.add_row(f"[bold]{group}[/]", *([""] * ncols))
        for row in rows:
            if wide:
                cells = [row.show(r) for r in m.ranks]
                if worst_col:
                    cells.append(_worst(row, m, labels))
            else:
                cells = _summary_cells(row, m, labels)
            # labels and values may hold trace text (thread names)
            t.add_row(term(f"  {row.label}"), *(term(c) for c in cells))
        t.add_section()
    console.print(t)
    _after_table(m, console, wide, records)


def _after_table(
    m: Metrics, console: Out, wide: bool, records: dict[str, str] | None = None
) -> None:
    """What follows the metrics table: peak-memory sources, top kernels, the cross-rank view,
    notes, how to open the whole timeline, and the advice."""
    if not wide:
        console.print(
            f"{len(m.ranks)} entries: min / median / max over them, each shown as its entry reads;"
            " every entry: --per-rank, --json or gh-run report"
        )
    for peak in sorted({r.peak_gpu_memory_source for r in m.ranks if r.peak_gpu_memory_source}):
        console.print(f"peak GPU memory: {markup(peak)}")
    _print_top_kernels(m, console, wide)
    _print_top_operators(m, console, wide)
    _print_cross_rank(m, console)
    rank_notes = [(_rank_header(r, m), n) for r in m.ranks for n in r.notes]
    src_notes = [
        (src.path, n)
        for src in m.sources
        for n in [*src.notes, *([src.rank_note] if src.rank_note else [])]
    ]
    for line in [*fold_notes(rank_notes, "entries"), *fold_notes(src_notes, "inputs")]:
        console.print(f"note: {plain(line)}", markup=False)
    hints = [s.open_with for s in m.sources if s.open_with]
    for hint in hints[:FOLD_OVER]:
        console.print(f"full timeline: {plain(hint)}", markup=False)
    if len(hints) > FOLD_OVER:
        console.print(f"full timeline: {len(hints) - FOLD_OVER} more inputs alike", markup=False)
    figures = idle_figures(m) if has_kernels(m) else None
    if figures is not None:
        print_wrapped(console, f"idle figures: {figures.text}")
    from orchestrator.analysis.presentation import gpu_metric_findings

    sm = gpu_metric_findings.sentence(m) if has_kernels(m) else None
    if sm is not None:
        print_wrapped(console, f"GPU metrics: {sm}")
    for r in m.ranks:
        said = pattern_sentence(r)
        if said is not None:
            who = f"{_rank_header(r, m)}: " if len(m.ranks) > 1 else ""
            print_wrapped(console, f"slow steps: {who}{said}")
    from orchestrator.cli import memory_view

    memory_view.print_memory(m, console)
    # ranked by what each costs a step, as the verdict and the report rank them
    for a in fold(advise(m, records), len(m.ranks)):
        checked = f" (checked: {markup(a.checked)})" if a.checked else ""
        ex = a.example if isinstance(a, AdviceGroup) else a
        cost = f" ({ex.cost_ms:.1f} ms {ex.cost_basis})" if ex.cost_ms is not None else ""
        proj = f"; {markup(ex.projection.sentence())}" if ex.projection is not None else ""
        console.print(
            f"[bold yellow]advice[/] {markup(a.rule)}{markup(cost)}: {markup(a.message)}; knob:"
            f" {markup(a.knob)}{checked}{proj}"
        )


_DIGITS = re.compile(r"\d+")


def fold_notes(notes: list[tuple[str, str]], what: str) -> list[str]:
    """`who: note` lines; a note that many entries carry alike (the same words, other numbers)
    is one line, with the first as the example (64 ranks would print 64 copies)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for who, note in notes:
        groups.setdefault(_DIGITS.sub("#", note), []).append((who, note))
    out = []
    for same in groups.values():
        if len(same) <= FOLD_OVER:
            out += [f"{who}: {note}" for who, note in same]
        else:
            who, note = same[0]
            out.append(f"{len(same)} {what} alike (--json has each), e.g. {who}: {note}")
    return out


def _print_top_kernels(m: Metrics, console: Out, per_rank: bool) -> None:
    tables: list[tuple[str, list[tuple[str, int, int, float]]]] = []
    if per_rank:
        for r in m.ranks:
            if r.top_kernels:
                rows = [(k.name, k.count, k.total_ns, k.share_pct) for k in r.top_kernels[:8]]
                tables.append((f"top kernels, {_rank_header(r, m)}", rows))
    else:  # one table over every entry (their top kernels merged by name)
        rows = merged_top_kernels(m.ranks)
        if rows:
            tables.append((f"top kernels, all {len(m.ranks)} entries", rows))
    if not console.is_terminal:
        for title, kernel_rows in tables:
            # the full name last: nothing after it to pad out to its width
            body = [[count(c), dur(t), pct(sh), plain(n)] for n, c, t, sh in kernel_rows]
            _plain(console, title, ["count", "total", "share", "kernel"], body, {0, 1, 2})
        return
    from rich import box
    from rich.table import Table

    for title, kernel_rows in tables:
        # kernels whose short names collide (four at::native::elementwise_kernel<…>) told apart
        shown = distinct_kernels([n for n, _, _, _ in kernel_rows], max(20, console.width - 38))
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(
            "kernel", no_wrap=True, overflow="ellipsis", max_width=max(20, console.width - 38)
        )
        for col in ("count", "total", "share"):
            table.add_column(col, justify="right", no_wrap=True)
        for name, c, total, share in kernel_rows:
            table.add_row(term(shown[name]), count(c), dur(total), pct(share))
        console.print(table)


def _print_top_operators(m: Metrics, console: Out, per_rank: bool) -> None:
    """The CPU operators with most time (Kineto cpu_op, PyTorch's NVTX operator ranges): count,
    total, self time (`-` where the operators of a thread do not nest)."""
    tables: list[tuple[str, list[tuple[str, int, int, int | None]]]] = []
    if per_rank:
        for r in m.ranks:
            if r.operators:
                rows = [(o.name, o.count, o.total_ns, o.self_ns) for o in r.operators[:8]]
                tables.append((f"top CPU operators, {_rank_header(r, m)}", rows))
    else:
        merged = merged_operators(m.ranks)
        if merged:
            tables.append((f"top CPU operators, all {len(m.ranks)} entries", merged))
    header = ["count", "total", "self", "operator"]
    for title, op_rows in tables:
        body = [
            [count(c), dur(t), dur(o) if o is not None else "-", plain(n)] for n, c, t, o in op_rows
        ]
        if not console.is_terminal:
            _plain(console, title, header, body, {0, 1, 2})
            continue
        from rich import box
        from rich.table import Table

        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(
            "operator", no_wrap=True, overflow="ellipsis", max_width=max(20, console.width - 38)
        )
        for col in ("count", "total", "self"):
            table.add_column(col, justify="right", no_wrap=True)
        for (n, *_), cells in zip(op_rows, body, strict=True):
            table.add_row(term(n), *cells[:3])
        console.print(table)


def _print_cross_rank(m: Metrics, console: Out) -> None:
    c = m.cross_rank
    if c.entries < 2:
        return
    for label, sk in (("collective start skew", c.collective_start_skew),
                      ("step time skew", c.step_time_skew)):  # fmt: skip
        if sk is None or not sk.matched:
            continue
        last = (
            f"; last most often: {sk.latest_rank} ({sk.latest_share_pct:.0f}%)"
            if sk.latest_rank
            else ""
        )
        console.print(
            plain(
                f"{label}: median {dur(sk.median_ns)}, p90 {dur(sk.p90_ns)}, max {dur(sk.max_ns)}"
                f" over {sk.matched} ({sk.how}){last}"
            ),
            markup=False,
        )
    if c.straggler is not None:
        console.print(f"[bold]straggler[/]: {markup(c.straggler.message)}")
    for note in c.notes:
        console.print(f"note: {plain(note)}", markup=False)


def print_split(console: Out, found: RunSet, args: list[str]) -> str:
    """What separated the runs among the inputs, each run, and how to compare them; returns
    the offer to compare (printed again after the runs)."""
    import shlex

    n = len(found.runs)
    where = " ".join(args)
    print_wrapped(
        console,
        f"{where}: {n} separate runs, analysed one by one below (not as ranks of one job),"
        " because:",
    )
    for why in found.why:
        print_wrapped(console, f"- {why}", "  ")
    for i, m in enumerate(found.runs):
        ranks = (
            f" ({len(m.ranks)} ranks: {'; '.join(m.inputs_tied_by)})" if len(m.ranks) > 1 else ""
        )
        print_wrapped(console, f"run {i + 1}: {m.label}{ranks}", "  ")
    quoted = " ".join(shlex.quote(a) for a in args)
    offer = f"side by side: gh-run compare {quoted}   (or gh-run report {quoted} --out DIR)"
    console.print(offer, markup=False)
    return offer
