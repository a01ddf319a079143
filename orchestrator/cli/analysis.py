"""`gh-run analyze`, `gh-run compare`, `gh-run report`: thin wrappers over orchestrator.analysis.

Arguments are trace files, folders, or run references of the state store, resolved as every
command resolves them (`orchestrator.runs.inputs.analysis_input`: id, unique prefix, job id, `last`)
and headed by the run's id; `register(app, resolve)` takes another resolver for tests or other
front ends. `analyze` of a run id also stores the run's headline numbers
(`orchestrator.analysis.headline`) with `store.put_metrics`.

What they print is laid out by `metrics_view.py` (analyze) and `compare_view.py` (compare).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

# Only what `analyze` of one trace needs is imported here; compare's and the report's modules
# (Jinja among them) and the nsys reader are imported by what uses them (bench/bench_cli.py).
# numpy first, with one BLAS thread (numpy_import's docstring).
from orchestrator.analysis import numpy_import  # noqa: F401
from orchestrator.analysis.catalogue.views import headline
from orchestrator.analysis.loader import RunSet, analyze_paths, analyze_runs
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.readers import tracetext
from orchestrator.analysis.run_labels import column_labels, short_labels
from orchestrator.cli.metrics_view import RANK_COLUMNS, print_metrics, print_split
from orchestrator.cli.piped import console_for_stdout
from orchestrator.cli.wrapped import print_wrapped
from orchestrator.core.errors import UserError
from orchestrator.core.escape import markup, plain
from orchestrator.runs.inputs import AnalysisInput

if TYPE_CHECKING:
    from orchestrator.store.db import Store

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
        from orchestrator.core.shipped import example_trace

        return AnalysisInput(arg, [example_trace(arg)])
    if "/" in arg or path.suffix in {".sqlite", ".json", ".gz", ".nsys-rep"}:
        raise UserError(f"{arg}: no such file or folder; check the path")
    from orchestrator.cli.state import STATE
    from orchestrator.runs.inputs import analysis_input

    return analysis_input(STATE.store(), STATE.home, arg)


def _records() -> dict[str, str]:
    """The rules whose projections were often wrong (store/scores.py), where this home has a
    state store; none where it has not (analysing a trace creates no store)."""
    from orchestrator.cli.state import STATE

    if not (STATE.home / "state.db").is_file():
        return {}
    from orchestrator.store import scores
    from orchestrator.store.db import Store

    return scores.often_wrong(Store(STATE.home))


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
                help="trace files, folders, run ids (or 'last'), memory snapshots (.pickle), or"
                " a trace shipped with gh-run: example:baseline, example:offload"
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
        in the state store (for campaigns and `compare`).

        A PyTorch memory snapshot (FILE.pickle: torch.cuda.memory._dump_snapshot, or the
        dump of profile.memory's hook) is read as plain data, never run: what held the GPU
        memory at its peak by category, growth per step, the allocator's cache, and what to
        change. A run that ran out of GPU memory leads with what was asked, what was free,
        what held the rest and the knob."""
        limit = ceiling(max_trace_size)
        if on_cluster:
            _on_cluster(paths, json_out, per_rank)
            return
        inputs = [res(a) for a in paths]
        if write_records:
            from orchestrator.analysis.write_records import write_many as write

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
            from orchestrator.analysis.presentation.advise import with_findings

            records = _records()
            runs = [with_findings(r, records) for r in found.runs]
            one = len(runs) == 1
            out = runs[0] if one else found.model_copy(update={"runs": runs})
            typer.echo(out.model_dump_json(indent=2))
            return
        console = console_for_stdout()  # piped: Rich's bytes without importing Rich
        records = _records()
        if len(found.runs) == 1:
            print_metrics(found.runs[0], console, per_rank=per_rank, records=records)
            return
        offer = print_split(console, found, paths)
        for n, m in enumerate(found.runs, 1):
            console.print()
            console.print(f"run {n} of {len(found.runs)}: {plain(m.label or '')}", markup=False)
            print_metrics(m, console, per_rank=per_rank, records=records)
        console.print()
        console.print(offer, markup=False)

    @app.command("compare")
    def compare_cmd(
        runs: Annotated[
            list[str],
            typer.Argument(
                help="two or more runs: trace files, folders, run ids (or 'last'), a folder of "
                "runs, or traces shipped with gh-run: example:baseline, example:offload"
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
        from orchestrator.cli.compare_view import comparison_table, print_changes

        names = short_labels(given)
        c = compare(ms, labels=names)
        if json_out:
            typer.echo(c.model_dump_json(indent=2))
            return
        labels = column_labels(names)
        # Numbers are never cut: piped output is as wide as the table; in a narrow terminal
        # the metric names wrap, not the values.
        from rich.console import Console
        from rich.measure import Measurement

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
            list[str] | None,
            typer.Argument(
                help="runs: trace files, folders, run ids (or 'last'), or traces shipped with "
                "gh-run: example:baseline, example:offload"
            ),
        ] = None,
        campaign: Annotated[
            str | None,
            typer.Option("--campaign", help="all variants of a campaign (id, prefix or 'last')"),
        ] = None,
        out: Annotated[Path, typer.Option("--out", help="output folder")] = Path("report"),
        title: Annotated[str, typer.Option("--title")] = "gh-run analysis",
        max_trace_size: MaxTraceSize = None,
    ) -> None:
        """Write report.html (self-contained), report.md and report.json.

        \b
        Examples:
          gh-run report last --out report           the last run
          gh-run report RUN_A RUN_B                 what changed in B against A, then each run
          gh-run report example:baseline example:offload
                                                    two real H100 traces shipped with gh-run
          gh-run report --campaign last             every variant of the last campaign"""
        from orchestrator.analysis.presentation.report import write_report
        from orchestrator.core.errors import UserError

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
        for kind, p in write_report(ms, out, title, _records()).items():
            typer.echo(f"{kind}: {p}")


def _on_cluster(refs: list[str], json_out: bool, per_rank: bool) -> None:
    """`analyze --on-cluster`: the map array and the reduce job (orchestrator.runs.on_cluster),
    waited for with a progress line, the results printed as `analyze` prints them."""
    from orchestrator.cli.state import STATE, note, warn
    from orchestrator.runs import on_cluster

    store = STATE.store()
    given = on_cluster.named(store, refs)
    runs = [run for _, rs in given for run in rs]
    sub, _ = on_cluster.submit(store, STATE.home, runs, warn)
    first, last = sub.map_runs[0].run_id, sub.map_runs[-1].run_id
    note(
        f"map: job array {sub.array} ({len(sub.reports)} reports; runs {first}"
        f"{'' if first == last else f' .. {last}'}); reduce: job {sub.reduce} (run"
        f" {sub.reduce_run.run_id}); in {sub.folder} (`gh-run status`, `logs`, `cancel` see them)"
    )
    states = on_cluster.wait(store, sub, progress=note, warn=warn)
    found, notes = on_cluster.results(STATE.home, sub, states)
    for n in notes:
        warn(n)
    _judge_campaigns(store, [cid for cid, _ in given if cid], found)
    if json_out:
        if len(found) == 1:
            typer.echo(cast(Metrics, found[0]).model_dump_json(indent=2))
        else:
            docs = [cast(Metrics, m).model_dump(mode="json") for m in found]
            import json

            typer.echo(json.dumps({"format": "gh-run.on-cluster/1", "runs": docs}, indent=2))
        return
    console = console_for_stdout()
    records = _records()
    for m in found:
        if isinstance(m, RunSet):
            for one in m.runs:
                print_metrics(one, console, per_rank=per_rank, records=records)
        else:
            print_metrics(cast(Metrics, m), console, per_rank=per_rank, records=records)


def _judge_campaigns(store: Store, campaigns: list[str], found: list[object]) -> None:
    """A campaign named to `--on-cluster` is judged where its runs' analyses arrive (one per
    run, from the reduce): its trace figures recorded, its verdict and report written again.
    One still running is left to its own end (`campaign run --wait`, `resume`)."""
    from orchestrator.campaign.finish import judge_arrived, verdict
    from orchestrator.cli.state import STATE, note, warn
    from orchestrator.store import campaigns as records

    arrived = {m.label: m for m in found if isinstance(m, Metrics) and m.label}
    for cid in dict.fromkeys(campaigns):
        rec = records.get_campaign(store, cid)
        if rec.state not in records.ENDED:
            note(f"campaign {cid} is {rec.state}: judged when it ends, not now")
            continue
        outcome = judge_arrived(store, cid, STATE.home, arrived, warn)
        note(
            f"campaign {cid}: judged from the analyses that arrived: {verdict(outcome.result)};"
            f" report: {outcome.paths['html']}"
        )


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
    from orchestrator.cli.state import STATE, warn
    from orchestrator.core.errors import UserError
    from orchestrator.runs.inputs import analysis_inputs
    from orchestrator.store import campaigns as records

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
