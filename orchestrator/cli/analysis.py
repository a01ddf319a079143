"""`gh-run analyze`, `gh-run compare`, `gh-run report`: thin wrappers over orchestrator.analysis.

The lead registers them with `register(app)`; every command takes plain file/dir paths. To
resolve run IDs, pass `resolve` (a callable: argument → list of paths) to `register`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.analysis import Metrics, advise, analyze_paths, compare, write_report

Resolver = Callable[[str], list[Path]]


def _default_resolve(arg: str) -> list[Path]:
    """A file or folder as given; otherwise a run id (or prefix, job id, `last`) of the store."""
    path = Path(arg)
    if path.exists():
        return [path]
    if "/" in arg or path.suffix in {".sqlite", ".json", ".gz", ".nsys-rep"}:
        from orchestrator.errors import UserError

        raise UserError(f"{arg}: no such file or folder; check the path")
    from orchestrator import runs
    from orchestrator.cli.state import STATE

    return runs.analysis_inputs(STATE.store(), STATE.home, arg)


def _print_metrics(m: Metrics, console: Console) -> None:
    t = Table(title=m.label or "analysis")
    for col in (
        "rank",
        "device",
        "span s",
        "busy %",
        "HTA compute %",
        "HTA non-compute %",
        "HTA idle %",
        "idle gaps",
        "gap p50 µs",
        "kernels %",
        "memcpy %",
        "steps",
        "step mean ms",
    ):
        t.add_column(col, justify="right")
    for r in m.ranks:
        t.add_row(
            str(r.rank),
            ",".join(map(str, r.devices)),
            f"{r.span_ns / 1e9:.3f}",
            f"{r.busy_pct:.2f}",
            f"{r.temporal.compute_pct:.2f}",
            f"{r.temporal.non_compute_pct:.2f}",
            f"{r.temporal.idle_pct:.2f}",
            str(r.idle_gaps.count),
            f"{r.idle_gaps.p50_ns / 1e3:.1f}",
            f"{r.activity.kernel_pct:.2f}",
            f"{r.activity.memcpy_pct:.2f}",
            str(r.steps.count if r.steps else 0),
            f"{r.steps.mean_ns / 1e6:.2f}" if r.steps else "-",
        )
    console.print(t)
    for r in m.ranks:
        if r.top_kernels:
            k = Table(title=f"top kernels, rank {r.rank}")
            for col in ("kernel", "count", "total ms", "share %"):
                k.add_column(col, justify="left" if col == "kernel" else "right")
            for ks in r.top_kernels[:8]:
                name = ks.name if len(ks.name) < 80 else ks.name[:77] + "..."
                k.add_row(name, str(ks.count), f"{ks.total_ns / 1e6:.3f}", f"{ks.share_pct:.2f}")
            console.print(k)
    for a in advise(m):
        console.print(f"[bold yellow]advice[/] {a.rule}: {a.message}; knob: {a.knob}")


def register(app: typer.Typer, resolve: Resolver | None = None) -> None:
    """Add `analyze`, `compare` and `report` to the gh-run Typer app."""
    res = resolve or _default_resolve

    def paths_of(args: list[str]) -> list[Path]:
        return [p for a in args for p in res(a)]

    @app.command("analyze")
    def analyze_cmd(
        paths: Annotated[
            list[str], typer.Argument(help="trace files, folders, or run ids (or 'last')")
        ],
        json_out: Annotated[bool, typer.Option("--json", help="print the Metrics as JSON")] = False,
    ) -> None:
        """Analyse nsys SQLite exports / PyTorch-profiler traces."""
        m = analyze_paths(paths_of(paths), label=" ".join(paths))
        if json_out:
            typer.echo(m.model_dump_json(indent=2))
        else:
            _print_metrics(m, Console())

    @app.command("compare")
    def compare_cmd(
        runs: Annotated[list[str], typer.Argument(help="two or more runs (files or folders)")],
        json_out: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Side-by-side comparison; the first run is the baseline."""
        if len(runs) < 2:
            raise typer.BadParameter("compare needs at least two runs")
        ms = [analyze_paths(res(r), label=r) for r in runs]
        c = compare(ms, labels=runs)
        if json_out:
            typer.echo(c.model_dump_json(indent=2))
            return
        t = Table(title=f"compare (baseline {runs[0]})")
        t.add_column("group")
        t.add_column("metric")
        t.add_column("unit")
        for r in runs:
            t.add_column(r, justify="right")
        for r in runs[1:]:
            t.add_column(f"Δ% {r}", justify="right")
        for row in c.rows:
            vals = ["-" if v is None else f"{v:,.3f}" for v in row.values]
            rel = ["-" if v is None else f"{v:+.1f}" for v in row.delta_rel_pct[1:]]
            t.add_row(row.group, row.metric, row.unit, *vals, *rel)
        Console().print(t)

    @app.command("report")
    def report_cmd(
        runs: Annotated[list[str], typer.Argument(help="runs (files or folders)")],
        out: Annotated[Path, typer.Option("--out", help="output folder")] = Path("report"),
        title: Annotated[str, typer.Option("--title")] = "gh-run analysis",
    ) -> None:
        """Write report.html (self-contained), report.md and report.json."""
        ms = [analyze_paths(res(r), label=r) for r in runs]
        for kind, p in write_report(ms, out, title).items():
            typer.echo(f"{kind}: {p}")


def make_app(resolve: Resolver | None = None) -> typer.Typer:
    """A standalone Typer app with the three commands (`python -m orchestrator.analysis`)."""
    app = typer.Typer(add_completion=False, no_args_is_help=True)
    register(app, resolve)
    return app
