"""`gh-run doctor [SPEC]`: what this machine has for gh-run, or what one job needs that it lacks.

Thin: the checks live in orchestrator/doctor.py (imported when the command runs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.state import out


def doctor_cmd(
    spec: Annotated[
        Path | None,
        typer.Argument(help="A job spec: say what running it from here needs that is missing."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", metavar="KEY=VALUE", help="Override a spec field."),
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster name or file, instead of the spec's.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What this machine has for gh-run, or what one job needs here.

    Without SPEC: the SLURM clients and whether a controller answers (and which cluster), every
    nsys with its version and the `nsys stats` reports it knows, Apptainer/Singularity,
    chromium, cron. With SPEC: what running that job from here needs (controller, container
    runtime, image, the nsys it is rendered for), each found or missing with the fix; exit 1
    when something is missing."""
    if spec is None:
        _machine(as_json)
    else:
        _job(spec, set_ or [], cluster, as_json)


def _mark(ok: bool) -> str:
    return "[green]ok[/]" if ok else "[red]missing[/]"


def _machine(as_json: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    from orchestrator import doctor

    report = doctor.machine()
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    t = Table(box=None)
    for col in ("", "status", "where", "version / detail"):
        t.add_column(col)
    for c in report.slurm_clients:
        t.add_row(c.name, _mark(c.path is not None), c.path or "-", escape(c.version or "-"))
    ctl = report.controller
    t.add_row(
        "controller",
        _mark(ctl.answers),
        f"cluster {ctl.cluster}" if ctl.cluster else "-",
        ctl.detail,
    )
    if not report.nsys:
        t.add_row("nsys", _mark(False), "-", "install: bash scripts/install-nsys.sh")
    for n in report.nsys:
        detail = (
            f"{n.version} (gh-run family {n.family or 'unsupported'}; {len(n.reports)} "
            "nsys stats reports)"
            if n.version
            else n.detail or "-"
        )
        t.add_row(n.name, _mark(n.version is not None), n.path or "-", detail)
    for item in (report.apptainer, report.singularity, report.chromium, report.cron):
        t.add_row(item.name, _mark(item.path is not None), item.path or "-", item.version or "-")
    out.print(t)
    out.print(f"tools prefix (scripts/install-tools.sh): {report.tools_prefix}")


def _job(spec: Path, overrides: list[str], cluster: str | None, as_json: bool) -> None:
    from rich.markup import escape

    from orchestrator import doctor
    from orchestrator import runs as R
    from orchestrator.yamlio import display_path

    prep = R.prepare(spec, overrides, cluster)
    needs = doctor.job_needs(prep.spec, prep.partition, prep.partition_name, display_path(spec))
    if as_json:
        typer.echo(json.dumps([n.model_dump(mode="json") for n in needs], indent=2))
    else:
        for n in needs:
            fix = f" [bold]fix:[/] {escape(n.fix)}" if n.fix and not n.ok else ""
            out.print(f"{_mark(n.ok)} {escape(n.what)}: {escape(n.detail)}{fix}")
    if not all(n.ok for n in needs):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)
