"""`gh-run analyze`, `gh-run compare`, `gh-run report`: thin wrappers over orchestrator.analysis.

Arguments are trace files, folders, or run references of the state store, resolved as every
command resolves them (`orchestrator.runs.analysis_input`: id, unique prefix, job id, `last`)
and headed by the run's id; `register(app, resolve)` takes another resolver for tests or other
front ends. `analyze` of a run id also stores the run's headline numbers
(`orchestrator.analysis.headline`) with `store.put_metrics`.

Terminal layout: one row per metric, values with units. Up to `RANK_COLUMNS` entries (ranks,
or devices of a rank): one column per entry and, from two on, the worst one named; more: one
column each for the min, median and max over the entries, formatted like the entry they come
from, and the worst entry named (`--per-rank` shows every entry instead). Then the cross-rank
view (collective-start and step-time skew, the straggler) and the advice.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NamedTuple, TextIO, cast

import typer
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from orchestrator.analysis import (
    Metrics,
    RankMetrics,
    advise,
    analyze_paths,
    compare,
    headline,
    tracetext,
    write_report,
)
from orchestrator.analysis.advice import FOLD_OVER, fold
from orchestrator.analysis.changes import WhatChanged
from orchestrator.analysis.compare import WAIT_FUNCS, Comparison
from orchestrator.analysis.labels import column_labels, dur, num, short_kernel, short_labels, size
from orchestrator.analysis.metrics import merged_top_kernels
from orchestrator.analysis.verdict import NO_GPU, has_gpu
from orchestrator.errors import UserError
from orchestrator.escape import markup, plain, term
from orchestrator.runs import AnalysisInput

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
    """A file or folder as given; otherwise a run id (or prefix, job id, `last`) of the store."""
    path = Path(arg)
    if path.exists():
        return AnalysisInput(arg, [path])
    if "/" in arg or path.suffix in {".sqlite", ".json", ".gz", ".nsys-rep"}:
        raise UserError(f"{arg}: no such file or folder; check the path")
    from orchestrator import runs
    from orchestrator.cli.state import STATE

    return runs.analysis_input(STATE.store(), STATE.home, arg)


# ---- value formatting
def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} %"


def count(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


class Row(NamedTuple):
    """One metric: its label, how a rank's value reads, and (for numbers) the value and which
    direction is worse ("higher" / "lower"), for the summary columns and the worst rank."""

    label: str
    show: Callable[[RankMetrics], str]
    value: Callable[[RankMetrics], float | None] | None = None
    worse: str | None = None


RANK_COLUMNS = 3  # entries shown side by side; more get the min / median / max summary


def _copy(direction: str) -> Callable[[RankMetrics], str]:
    def get(r: RankMetrics) -> str:
        for c in r.copies:
            if c.direction == direction:
                bw = f" @ {c.bandwidth_gb_s:.1f} GB/s" if c.bandwidth_gb_s else ""
                return f"{size(c.bytes)}{bw}"
        return "-"

    return get


def _thread(name: str) -> Callable[[RankMetrics], str]:
    def get(r: RankMetrics) -> str:
        ts = [t for t in r.threads if t.name == name]
        if not ts:
            return "-"
        op = sum(t.cpu_op_ns for t in ts)
        os_ = sum(t.osrt_ns for t in ts)
        return dur(op) if not os_ else f"{dur(op)} / {dur(os_)}" if op else dur(os_)

    return get


def _waits(r: RankMetrics) -> str:
    ns = sum(f.total_ns for t in r.threads for f in t.functions if f.name in WAIT_FUNCS)
    return dur(ns) if ns else "-"


def _two(a: float, b: float) -> str:
    return f"{dur(a)} / {dur(b)}"


def _activity(kind: str) -> Callable[[RankMetrics], str]:
    def get(r: RankMetrics) -> str:
        a = r.activity
        return f"{count(getattr(a, f'{kind}_count'))} · {dur(getattr(a, f'{kind}_ns'))}"

    return get


def _workload_step(r: RankMetrics) -> str:
    s = r.workload.median_step_time_s if r.workload else None
    return dur(s * 1e9) if s is not None else "-"


def _pct_of(ns: Callable[[RankMetrics], int | None]) -> Callable[[RankMetrics], float | None]:
    def get(r: RankMetrics) -> float | None:
        v = ns(r)
        return 100.0 * v / r.span_ns if v is not None and r.span_ns else None

    return get


# short names of HTA's kernel types for the terminal (the JSON keeps HTA's)
_TYPE_SHORT = {"COMPUTATION": "comp", "COMMUNICATION": "comm", "MEMORY": "mem"}


def type_label(name: str) -> str:
    """`COMPUTATION overlapping COMMUNICATION` → `comp + comm`."""
    return " + ".join(_TYPE_SHORT.get(p, p.lower()) for p in name.split(" overlapping "))


def _kernel_type(name: str) -> Row:
    def value(r: RankMetrics) -> float | None:
        return r.kernel_types.get(name, 0.0) if r.kernel_types else None

    return Row(f"{type_label(name)}", lambda r: pct(value(r)), value)


def _idle_part(part: str) -> Row:
    def value(r: RankMetrics) -> float | None:
        ib = r.idle_breakdown
        return float(getattr(ib, f"{part}_pct")) if ib is not None else None

    return Row(f"idle: {part.replace('_', ' ')}", lambda r: pct(value(r)), value, "higher")


def metric_groups(m: Metrics) -> list[tuple[str, list[Row]]]:
    """The rows of the `analyze` table, grouped; each row formats one rank's value."""
    directions = sorted({c.direction for r in m.ranks for c in r.copies})
    names: dict[str, int] = {}
    for r in m.ranks:
        for t in r.threads:
            names[t.name] = names.get(t.name, 0) + t.cpu_op_ns + t.osrt_ns
    top_threads = sorted(names, key=lambda n: -names[n])[:4]  # cpu_op / OS-runtime time
    um_traced = any(
        r.unified_memory.cpu_page_faults is not None
        or r.unified_memory.gpu_page_faults is not None
        or r.unified_memory.migrations
        for r in m.ranks
    )
    um: list[Row] = [
        Row(
            "UM share of memory ops",
            lambda r: pct(r.unified_memory.share_of_memory_ops_pct),
            lambda r: r.unified_memory.share_of_memory_ops_pct,
            "higher",
        ),
        Row(
            "UM share of memory time",
            lambda r: pct(r.unified_memory.share_of_memory_time_pct),
            lambda r: r.unified_memory.share_of_memory_time_pct,
            "higher",
        ),
    ]
    if um_traced:
        um = [
            Row("CPU page faults", lambda r: count(r.unified_memory.cpu_page_faults),
                lambda r: r.unified_memory.cpu_page_faults, "higher"),
            Row("GPU page faults", lambda r: count(r.unified_memory.gpu_page_faults),
                lambda r: r.unified_memory.gpu_page_faults, "higher"),
            Row("migrated HtoD", lambda r: size(r.unified_memory.migrated_htod_bytes),
                lambda r: r.unified_memory.migrated_htod_bytes, "higher"),
            Row("migrated DtoH", lambda r: size(r.unified_memory.migrated_dtoh_bytes),
                lambda r: r.unified_memory.migrated_dtoh_bytes, "higher"),
            *um,
        ]  # fmt: skip
    types: dict[str, float] = {}
    for r in m.ranks:
        for k, v in r.kernel_types.items():
            types[k] = types.get(k, 0.0) + v
    kernel_types = [_kernel_type(k) for k in sorted(types, key=lambda k: -types[k])]
    has_comm = any(r.comm_comp_overlap_pct is not None for r in m.ranks)
    comm_rows = (
        [
            Row(
                "comm/comp overlap",
                lambda r: pct(r.comm_comp_overlap_pct),
                lambda r: r.comm_comp_overlap_pct,
                "lower",
            )
        ]
        if has_comm
        else []
    )
    idle_rows = (
        [_idle_part("host_wait"), _idle_part("kernel_wait"), _idle_part("other")]
        if any(r.idle_breakdown is not None for r in m.ranks)
        else []
    )
    return [
        (
            "GPU time",
            [
                Row("device", lambda r: r.device_name or "-"),
                Row("span", lambda r: dur(r.span_ns), lambda r: r.span_ns, "higher"),
                Row("busy", lambda r: pct(r.busy_pct), lambda r: r.busy_pct, "lower"),
                Row("idle", lambda r: pct(r.idle_pct), lambda r: r.idle_pct, "higher"),
                Row(
                    "idle gaps",
                    lambda r: count(r.idle_gaps.count),
                    lambda r: r.idle_gaps.count,
                    "higher",
                ),
                Row(
                    "gap mean",
                    lambda r: dur(r.idle_gaps.mean_ns),
                    lambda r: r.idle_gaps.mean_ns,
                    "higher",
                ),
                Row(
                    "gap p50 / p90",
                    lambda r: _two(r.idle_gaps.p50_ns, r.idle_gaps.p90_ns),
                    lambda r: r.idle_gaps.p90_ns,
                    "higher",
                ),
                Row(
                    "gap max",
                    lambda r: dur(r.idle_gaps.max_ns),
                    lambda r: r.idle_gaps.max_ns,
                    "higher",
                ),
                *idle_rows,
            ],
        ),
        (
            "Temporal (HTA)",
            [
                Row(
                    "compute",
                    lambda r: pct(r.temporal.compute_pct),
                    lambda r: r.temporal.compute_pct,
                    "lower",
                ),
                Row(
                    "non-compute",
                    lambda r: pct(r.temporal.non_compute_pct),
                    lambda r: r.temporal.non_compute_pct,
                    "higher",
                ),
                Row(
                    "idle",
                    lambda r: pct(r.temporal.idle_pct),
                    lambda r: r.temporal.idle_pct,
                    "higher",
                ),
            ],
        ),
        ("Kernel types (HTA)", [*kernel_types, *comm_rows]),
        (
            "Kernels / copies",
            [
                Row("kernels", _activity("kernel"), lambda r: r.activity.kernel_ns, "higher"),
                Row("memcpys", _activity("memcpy"), lambda r: r.activity.memcpy_ns, "higher"),
                Row("memsets", _activity("memset"), lambda r: r.activity.memset_ns, "higher"),
                Row(
                    "kernel share of activity",
                    lambda r: pct(r.activity.kernel_pct),
                    lambda r: r.activity.kernel_pct,
                    "lower",
                ),
                Row(
                    "memcpy share of activity",
                    lambda r: pct(r.activity.memcpy_pct),
                    lambda r: r.activity.memcpy_pct,
                    "higher",
                ),
                Row("kernel names", lambda r: count(r.kernel_names), lambda r: r.kernel_names),
                Row(
                    "fp32 GEMM share",
                    lambda r: pct(r.fp32_gemm_pct),
                    lambda r: r.fp32_gemm_pct,
                    "higher",
                ),
                Row(
                    "tensor-core GEMM share",
                    lambda r: pct(r.tensor_core_gemm_pct),
                    lambda r: r.tensor_core_gemm_pct,
                    "lower",
                ),
            ],
        ),
        (
            "Memory traffic",
            [
                *(Row(f"{d} copies", _copy(d), _copy_bytes(d), "higher") for d in directions),
                Row(
                    "peak GPU memory",
                    lambda r: size(r.peak_gpu_memory_bytes),
                    lambda r: r.peak_gpu_memory_bytes,
                    "higher",
                ),
            ],
        ),
        ("Unified Memory", um),
        (
            "Steps",
            [
                Row(
                    "traced steps",
                    lambda r: count(r.steps.count) if r.steps else "-",
                    lambda r: r.steps.count if r.steps else None,
                ),
                Row(
                    "step mean",
                    lambda r: dur(r.steps.mean_ns) if r.steps else "-",
                    lambda r: r.steps.mean_ns if r.steps else None,
                    "higher",
                ),
                Row(
                    "step p50 / p90",
                    lambda r: _two(r.steps.p50_ns, r.steps.p90_ns) if r.steps else "-",
                    lambda r: r.steps.p90_ns if r.steps else None,
                    "higher",
                ),
                Row(
                    "data wait (ranges)",
                    lambda r: dur(r.data_wait_ns),
                    lambda r: r.data_wait_ns,
                    "higher",
                ),
                Row(
                    "median step (workload)",
                    _workload_step,
                    lambda r: r.workload.median_step_time_s if r.workload else None,
                    "higher",
                ),
                Row(
                    "tokens/s (workload)",
                    lambda r: num(r.workload.tokens_per_s if r.workload else None),
                    lambda r: r.workload.tokens_per_s if r.workload else None,
                    "lower",
                ),
            ],
        ),
        (
            "CPU / sync",
            [
                Row("sync calls", lambda r: count(r.sync.calls), lambda r: r.sync.calls, "higher"),
                Row(
                    "sync time",
                    lambda r: dur(r.sync.total_ns),
                    _pct_of(lambda r: r.sync.wall_ns),
                    "higher",
                ),
                Row("cond/sem waits (OS runtime)", _waits),
                *(
                    Row(n if n.startswith("thread") else f"thread {n}", _thread(n))
                    for n in top_threads
                ),
            ],
        ),
    ]


def _copy_bytes(direction: str) -> Callable[[RankMetrics], float | None]:
    def get(r: RankMetrics) -> float | None:
        return float(sum(c.bytes for c in r.copies if c.direction == direction))

    return get


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
    return groups if has_gpu(m) else [(g, rows) for g, rows in groups if g in HOST_GROUPS]


def print_metrics(m: Metrics, console: Console, per_rank: bool = False) -> None:
    if not has_gpu(m):
        console.print(f"{NO_GPU} (no kernels, copies or memsets were traced)", markup=False)
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
    for a in fold(advise(m), len(m.ranks)):
        console.print(
            f"[bold yellow]advice[/] {markup(a.rule)}: {markup(a.message)}; knob: {markup(a.knob)}"
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
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(
            "kernel", no_wrap=True, overflow="ellipsis", max_width=max(20, console.width - 38)
        )
        for col in ("count", "total", "share"):
            table.add_column(col, justify="right", no_wrap=True)
        for name, c, total, share in kernel_rows:
            table.add_row(term(name), count(c), dur(total), pct(share))
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
    for row in c.rows:
        if row.group != group:
            if group is not None:
                t.add_section()
            group = row.group
            t.add_row(f"[bold]{group}[/]", *([""] * (len(t.columns) - 1)))
        vals = [num(v) for v in row.values]
        # a percentage, a factor, "new" or "from ~0": never a percent of a near-zero baseline
        rel = row.change[1:] if deltas else []
        t.add_row(term(f"  {row.metric}"), term(row.unit), *vals, *rel)
    return t


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
            list[str], typer.Argument(help="trace files, folders, or run ids (or 'last')")
        ],
        json_out: Annotated[bool, typer.Option("--json", help="print the Metrics as JSON")] = False,
        per_rank: Annotated[
            bool,
            typer.Option(
                "--per-rank",
                help=f"a column per rank even beyond {RANK_COLUMNS} (default: min / median / max)",
            ),
        ] = False,
        max_trace_size: MaxTraceSize = None,
    ) -> None:
        """Analyse nsys SQLite exports / PyTorch-profiler traces.

        A run id is analysed from its artifacts, and its headline numbers are stored
        in the state store (for campaigns and `compare`)."""
        limit = ceiling(max_trace_size)
        inputs = [res(a) for a in paths]
        m = analyze_paths(
            [p for i in inputs for p in i.paths],
            label=" ".join(i.label for i in inputs),
            max_trace_bytes=limit,
        )
        if resolve is None and any(i.run_id for i in inputs):
            from orchestrator.cli.state import STATE

            store = STATE.store()
            for i in inputs:
                if i.run_id:
                    own = (
                        m
                        if len(inputs) == 1
                        else analyze_paths(i.paths, label=i.label, max_trace_bytes=limit)
                    )
                    store.put_metrics(i.run_id, headline(own))
        if json_out:
            typer.echo(m.model_dump_json(indent=2))
        else:
            console = Console()
            console.soft_wrap = not console.is_terminal  # piped: long lines stay whole
            print_metrics(m, console, per_rank=per_rank)

    @app.command("compare")
    def compare_cmd(
        runs: Annotated[list[str], typer.Argument(help="two or more runs (files or folders)")],
        json_out: Annotated[bool, typer.Option("--json")] = False,
        max_trace_size: MaxTraceSize = None,
    ) -> None:
        """Side-by-side comparison; the first run is the baseline.

        Columns are headed by the runs' short names, or by A, B, C… with a legend when there
        are more than two or their names are long; a narrow terminal leaves out the Δ
        columns before it squeezes a value."""
        if len(runs) < 2:
            raise typer.BadParameter("compare needs at least two runs")
        inputs = [res(r) for r in runs]
        names = short_labels([i.label for i in inputs])
        limit = ceiling(max_trace_size)
        ms = [analyze_paths(i.paths, label=i.label, max_trace_bytes=limit) for i in inputs]
        c = compare(ms, labels=names)
        if json_out:
            typer.echo(c.model_dump_json(indent=2))
            return
        labels = column_labels(names)
        # Numbers are never cut: piped output is as wide as the table; in a narrow terminal
        # the metric names wrap, not the values.
        console = Console(width=None if sys.stdout.isatty() else 400)
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
        from orchestrator.errors import UserError

        labelled: list[tuple[str, list[Path]]] = [
            (i.label, i.paths) for i in (res(r) for r in runs or [])
        ]
        if campaign:
            labelled += _campaign_inputs(campaign)
        if not labelled:
            raise UserError("report: name runs, files or folders, or --campaign ID")
        limit = ceiling(max_trace_size)
        ms = [analyze_paths(paths, label=label, max_trace_bytes=limit) for label, paths in labelled]
        for kind, p in write_report(ms, out, title).items():
            typer.echo(f"{kind}: {p}")


def _campaign_inputs(ref: str) -> list[tuple[str, list[Path]]]:
    """(variant name, trace folder) for every variant of a campaign that left traces."""
    from orchestrator import runs as run_ops
    from orchestrator.campaign import records
    from orchestrator.cli.state import STATE, warn
    from orchestrator.errors import UserError

    store = STATE.store()
    rec = records.get_campaign(store, ref)
    out: list[tuple[str, list[Path]]] = []
    for variant, run in records.runs_of(store, rec.campaign_id).items():
        try:
            out.append((variant, run_ops.analysis_inputs(store, STATE.home, run.run_id)))
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
