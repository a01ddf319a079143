"""`gh-run analyze`, `gh-run compare`, `gh-run report`: thin wrappers over orchestrator.analysis.

Arguments are trace files, folders, or run references of the state store, resolved as every
command resolves them (`orchestrator.run_inputs.analysis_input`: id, unique prefix, job id, `last`)
and headed by the run's id; `register(app, resolve)` takes another resolver for tests or other
front ends. `analyze` of a run id also stores the run's headline numbers
(`orchestrator.analysis.headline`) with `store.put_metrics`.

Terminal layout: one row per metric (the metric catalogue's `ANALYZE` view), values with
units. Up to `RANK_COLUMNS` entries (ranks, or devices of a rank): one column per entry and,
from two on, the worst one named; more: one column each for the min, median and max over the
entries, formatted like the entry they come from, and the worst entry named (`--per-rank`
shows every entry instead). Then the cross-rank
view (collective-start and step-time skew, the straggler) and the advice.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, cast

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

# Only what `analyze` of one trace needs is imported here; compare's and the report's modules
# (Jinja among them) and the nsys reader are imported by what uses them (bench/bench_cli.py).
from orchestrator.analysis.catalogue import views
from orchestrator.analysis.catalogue.views import Row, count, pct
from orchestrator.analysis.loader import RunSet, analyze_paths, analyze_runs
from orchestrator.analysis.metrics import Metrics, RankMetrics, headline, merged_top_kernels
from orchestrator.analysis.presentation.advice import FOLD_OVER, advise, fold
from orchestrator.analysis.presentation.labels import (
    NOT_MEASURED,
    column_labels,
    distinct_kernels,
    dur,
    in_unit,
    num,
    row_unit,
    short_kernel,
    short_labels,
)
from orchestrator.analysis.presentation.verdict import (
    NO_GPU,
    has_gpu,
    has_kernels,
    holdings,
    idle_figures,
)
from orchestrator.analysis.readers import tracetext
from orchestrator.errors import UserError
from orchestrator.escape import markup, plain, term
from orchestrator.run_inputs import AnalysisInput

if TYPE_CHECKING:
    from orchestrator.analysis.presentation.changes import WhatChanged
    from orchestrator.analysis.presentation.compare import Comparison

Resolver = Callable[[str], AnalysisInput]
MaxTraceSize = Annotated[
    str | None,
    typer.Option(
        "--max-trace-size",
        metavar="SIZE",
        help=(
            "refuse a trace whose (uncompressed) text is larger, e.g. 16GiB; default"
            f" ${tracetext.MAX_TRACE_ENV} or {tracetext.DEFAULT_MAX_TRACE >> 30}GiB"
        ),
    ),
]


def _default_resolve(arg: str) -> AnalysisInput:
    """A file or folder as given; `example:NAME`, a trace shipped with gh-run; otherwise a run
    id (or prefix, job id, `last`) of the store, labelled by its id."""
    path = Path(arg)
    if path.exists():
        return AnalysisInput(arg, [path])
    if arg.startswith("example:"):
        from orchestrator.shipped import example_trace

        return AnalysisInput(arg, [example_trace(arg)])
    if "/" in arg or path.suffix in {".sqlite", ".json", ".gz", ".nsys-rep"}:
        raise UserError(f"{arg}: no such file or folder; check the path")
    from orchestrator.cli.state import STATE
    from orchestrator.run_inputs import analysis_input

    return analysis_input(STATE.store(), STATE.home, arg)


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
    console: Console,
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


def print_metrics(m: Metrics, console: Console, per_rank: bool = False) -> None:
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
        _after_table(m, console, wide)
        return
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
    _after_table(m, console, wide)


def _after_table(m: Metrics, console: Console, wide: bool) -> None:
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
    for a in fold(advise(m), len(m.ranks)):
        checked = f" (checked: {markup(a.checked)})" if a.checked else ""
        console.print(
            f"[bold yellow]advice[/] {markup(a.rule)}: {markup(a.message)}; knob:"
            f" {markup(a.knob)}{checked}"
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


def _print_top_kernels(m: Metrics, console: Console, per_rank: bool) -> None:
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


def _print_cross_rank(m: Metrics, console: Console) -> None:
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


def print_split(console: Console, found: RunSet, args: list[str]) -> str:
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


def print_wrapped(console: Console, text: str, indent: str = "") -> None:
    """A long line wrapped at 100 columns (or the terminal's width), its continuation indented."""
    import textwrap

    width = min(console.width, 100)
    wrapped = textwrap.fill(
        plain(text), width, initial_indent=indent, subsequent_indent=indent + "    "
    )
    console.print(wrapped, markup=False, highlight=False, soft_wrap=True)


def print_changes(console: Console, w: WhatChanged, label: str, base: str) -> None:
    """What changed in one run against the first: the finding, then the phases, the metric
    groups and the kernels that moved; wrapped at 100 columns (or the terminal's width)."""
    import textwrap

    width = min(console.width, 100)
    lines = [f"what changed, {label} against {base}: {w.finding}"]
    for p in w.phases:
        change = f"{p.change_pct:+.1f}%" if p.change_pct is not None else "-"
        lines.append(f"phase {p.name}: {num(p.baseline_ms)} → {num(p.value_ms)} ms ({change})")
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


def register(app: typer.Typer, resolve: Resolver | None = None) -> None:
    """Add `analyze`, `compare` and `report` to the gh-run Typer app."""
    res = resolve or _default_resolve

    def ceiling(text: str | None) -> int | None:
        return tracetext.parse_size(text, "--max-trace-size") if text is not None else None

    @app.command("analyze")
    def analyze_cmd(
        paths: Annotated[
            list[str],
            typer.Argument(
                help="trace files, folders, run ids (or 'last'), or a trace shipped with gh-run: "
                "example:baseline, example:offload"
            ),
        ],
        json_out: Annotated[
            bool,
            typer.Option(
                "--json",
                help="print the Metrics as JSON (several runs: gh-run.runs/1, each run's Metrics"
                " and why they are apart)",
            ),
        ] = False,
        per_rank: Annotated[
            bool,
            typer.Option(
                "--per-rank",
                help=f"a column per rank even beyond {RANK_COLUMNS} (default: min / median / max)",
            ),
        ] = False,
        max_trace_size: MaxTraceSize = None,
        write_records: Annotated[
            bool,
            typer.Option(
                "--write-records",
                help="analyse each report (file, or the reports in a folder) on its own and"
                " write its analysis beside it as REPORT.gh-run.json, as a profiled job's"
                " analysis step does on the nodes; later analyses read it in the report's place",
            ),
        ] = False,
        reread: Annotated[
            bool,
            typer.Option(
                "--reread",
                help="read every report here, even where the job analysed it (REPORT.gh-run.json)",
            ),
        ] = False,
        on_cluster: Annotated[
            bool,
            typer.Option(
                "--on-cluster",
                help="analyse the reports of runs or campaigns (their ids) again where they lie:"
                " a SLURM job array (one task per report) and a reduce job after it; the"
                " results come back as JSON, the reports stay there",
            ),
        ] = False,
    ) -> None:
        """Analyse nsys SQLite exports / PyTorch-profiler traces.

        Inputs that are ranks of one job (distributedInfo, the launcher's rank variables,
        rank file names, one capture time) are analysed together; separate captures (a
        folder of unrelated runs, each a job of its own, captured apart, or with other
        commands) are analysed one by one, with the evidence, and `compare` offered.
        A run id is analysed from its artifacts, and its headline numbers are stored
        in the state store (for campaigns and `compare`)."""
        limit = ceiling(max_trace_size)
        if on_cluster:
            _on_cluster(paths, json_out, per_rank)
            return
        inputs = [res(a) for a in paths]
        if write_records:
            from orchestrator.analysis.records import write_many as write

            raise typer.Exit(write([p for i in inputs for p in i.paths], limit))
        found = analyze_runs(
            [p for i in inputs for p in i.paths],
            label=" ".join(i.label for i in inputs),
            max_trace_bytes=limit,
            use_records=not reread,
        )
        if resolve is None and any(i.run_id for i in inputs):
            from orchestrator.cli.state import STATE, warn

            store = STATE.store()
            for given in inputs:
                if given.run_id:
                    own = (
                        found
                        if len(inputs) == 1
                        else analyze_runs(
                            given.paths,
                            label=given.label,
                            max_trace_bytes=limit,
                            use_records=not reread,
                        )
                    )
                    if len(own.runs) == 1:
                        store.put_metrics(given.run_id, headline(own.runs[0]))
                    else:
                        warn(f"{given.label}: its artifacts hold {len(own.runs)} separate runs;"
                             " no headline stored")  # fmt: skip
        if json_out:
            one = len(found.runs) == 1
            typer.echo((found.runs[0] if one else found).model_dump_json(indent=2))
            return
        console = Console()
        console.soft_wrap = not console.is_terminal  # piped: long lines stay whole
        if len(found.runs) == 1:
            print_metrics(found.runs[0], console, per_rank=per_rank)
            return
        offer = print_split(console, found, paths)
        for n, m in enumerate(found.runs, 1):
            console.print()
            console.print(f"run {n} of {len(found.runs)}: {plain(m.label or '')}", markup=False)
            print_metrics(m, console, per_rank=per_rank)
        console.print()
        console.print(offer, markup=False)

    @app.command("compare")
    def compare_cmd(
        runs: Annotated[
            list[str],
            typer.Argument(
                help="two or more runs (files, folders or run ids), or a folder of runs"
            ),
        ],
        json_out: Annotated[bool, typer.Option("--json")] = False,
        max_trace_size: MaxTraceSize = None,
    ) -> None:
        """Side-by-side comparison; the first run is the baseline.

        Columns are headed by the runs' short names, or by A, B, C… with a legend when there
        are more than two or their names are long; a narrow terminal leaves out the Δ
        columns before it squeezes a value. Each row reads in one unit; what a run's
        sources cannot measure reads "not measured" (JSON null), and a row the runs
        measured differently (an nsys export against a PyTorch-profiler trace) "not
        comparable", with a note on how each measured it."""
        limit = ceiling(max_trace_size)
        given, ms, split_notes = runs_of(runs, res, limit)
        if len(ms) < 2:
            raise typer.BadParameter(
                "compare needs at least two runs (files, folders or run ids; a folder of"
                " separate runs counts as each of them)"
            )
        from orchestrator.analysis.presentation.compare import compare

        names = short_labels(given)
        c = compare(ms, labels=names)
        if json_out:
            typer.echo(c.model_dump_json(indent=2))
            return
        labels = column_labels(names)
        # Numbers are never cut: piped output is as wide as the table; in a narrow terminal
        # the metric names wrap, not the values.
        console = Console(width=None if sys.stdout.isatty() else 400)
        for note in split_notes:
            print_wrapped(console, f"note: {note}")
        runs = given
        if labels != names:  # the legend: each letter, the run's name, and what was given
            for key, name, arg in zip(labels, names, runs, strict=True):
                console.print(
                    plain(f"{key}  {name}" + (f"  ({arg})" if arg != name else "")), markup=False
                )
        t = comparison_table(c, labels, deltas=True)
        natural = Measurement.get(console, console.options.update(max_width=10_000), t).maximum
        if natural > console.width:
            # A narrow terminal: the deltas go before any value or metric name is squeezed.
            t = comparison_table(c, labels, deltas=False)
            console.print("(Δ columns left out for the terminal's width: --json shows them)")
        console.print(t)
        for note in c.notes:
            print_wrapped(console, f"note: {note}")
        for lab, m in zip(labels, ms, strict=True):
            srcs = {r.peak_gpu_memory_source for r in m.ranks if r.peak_gpu_memory_source}
            for s in sorted(srcs):
                console.print(f"peak GPU memory, {markup(lab)}: {markup(s)}")
        for key, w in zip(labels[1:], c.changes, strict=True):
            print_changes(console, w, key, labels[0])

    @app.command("report")
    def report_cmd(
        runs: Annotated[
            list[str] | None, typer.Argument(help="runs: files, folders or run ids")
        ] = None,
        campaign: Annotated[
            str | None,
            typer.Option("--campaign", help="all variants of a campaign (id, prefix or 'last')"),
        ] = None,
        out: Annotated[Path, typer.Option("--out", help="output folder")] = Path("report"),
        title: Annotated[str, typer.Option("--title")] = "gh-run analysis",
        max_trace_size: MaxTraceSize = None,
    ) -> None:
        """Write report.html (self-contained), report.md and report.json."""
        from orchestrator.analysis.presentation.report import write_report
        from orchestrator.errors import UserError

        if not runs and not campaign:
            raise UserError("report: name runs, files or folders, or --campaign ID")
        limit = ceiling(max_trace_size)
        _, ms, split_notes = runs_of(list(runs or []), res, limit)
        if campaign:
            ms += [
                analyze_paths(paths, label=label, max_trace_bytes=limit)
                for label, paths in _campaign_inputs(campaign)
            ]
        for note in split_notes:
            typer.echo(f"note: {note}", err=True)
        for kind, p in write_report(ms, out, title).items():
            typer.echo(f"{kind}: {p}")


def _on_cluster(refs: list[str], json_out: bool, per_rank: bool) -> None:
    """`analyze --on-cluster`: the map array and the reduce job (orchestrator.on_cluster),
    waited for with a progress line, the results printed as `analyze` prints them."""
    from orchestrator import on_cluster
    from orchestrator.cli.state import STATE, note, warn

    store = STATE.store()
    runs = on_cluster.runs_named(store, refs)
    sub, executor = on_cluster.submit(STATE.home, runs, warn)
    note(
        f"map: job array {sub.array} ({len(sub.reports)} reports); reduce: job {sub.reduce};"
        f" in {sub.folder}"
    )
    states = on_cluster.wait(sub, executor, progress=note)
    found, notes = on_cluster.results(STATE.home, sub, states)
    for n in notes:
        warn(n)
    if json_out:
        if len(found) == 1:
            typer.echo(cast(Metrics, found[0]).model_dump_json(indent=2))
        else:
            docs = [cast(Metrics, m).model_dump(mode="json") for m in found]
            import json

            typer.echo(json.dumps({"format": "gh-run.on-cluster/1", "runs": docs}, indent=2))
        return
    console = Console()
    console.soft_wrap = not console.is_terminal
    for m in found:
        if isinstance(m, RunSet):
            for one in m.runs:
                print_metrics(one, console, per_rank=per_rank)
        else:
            print_metrics(cast(Metrics, m), console, per_rank=per_rank)


def runs_of(
    args: list[str], res: Resolver, limit: int | None
) -> tuple[list[str], list[Metrics], list[str]]:
    """The runs the arguments name, in order: an argument that holds several separate runs
    (a folder of unrelated runs) gives each of them. Returns what each run was given as (the
    argument, or the run's folder within it), the runs, and a note per split argument."""
    given: list[str] = []
    out: list[Metrics] = []
    notes: list[str] = []
    for arg in args:
        named = res(arg)
        found = analyze_runs(named.paths, label=named.label, max_trace_bytes=limit)
        if len(found.runs) == 1:
            given.append(named.label)
            out.append(found.runs[0])
            continue
        notes.append(
            f"{arg} holds {len(found.runs)} separate runs, each taken on its own ({found.why[0]};"
            f" `gh-run analyze {arg}` says more)"
        )
        for m in found.runs:
            given.append(m.label or named.label)
            out.append(m)
    return given, out, notes


def _campaign_inputs(ref: str) -> list[tuple[str, list[Path]]]:
    """(variant name, trace folder) for every variant of a campaign that left traces."""
    from orchestrator.campaign import records
    from orchestrator.cli.state import STATE, warn
    from orchestrator.errors import UserError
    from orchestrator.run_inputs import analysis_inputs

    store = STATE.store()
    rec = records.get_campaign(store, ref)
    out: list[tuple[str, list[Path]]] = []
    for variant, run in records.runs_of(store, rec.campaign_id).items():
        try:
            out.append((variant, analysis_inputs(store, STATE.home, run.run_id)))
        except UserError as exc:
            warn(f"{variant}: skipped ({exc})")
    if not out:
        raise UserError(f"campaign {rec.campaign_id} has no variant with artifacts yet")
    return out


def make_app(resolve: Resolver | None = None) -> typer.Typer:
    """A standalone Typer app with the three commands (`python -m orchestrator.analysis`)."""
    app = typer.Typer(add_completion=False, no_args_is_help=True)
    register(app, resolve)
    return app
