"""`gh-run doctor [SPEC]`: what this machine has for gh-run, or what one job needs that it lacks.

Thin: the checks live in orchestrator/checks/doctor.py (imported when the command runs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.table import Cell, Column, paint, print_table

if TYPE_CHECKING:
    from orchestrator.checks import setup_report


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
    nsys with its version and what it answers about itself (its GPU-metrics flag, `nsys stats`
    reports, export types; asked once per binary and cached), Apptainer/Singularity, chromium,
    cron; then how gh-run is set up: the home, the folders searched for cluster files and
    templates (first found wins) and which file answers for each cluster, the default cluster,
    whether the compiled trace readers are built (and what doing without costs), the
    compiled-template cache. With SPEC: what running that job from here needs (the
    partition's limits, controller, container runtime, image, the nsys it is rendered for,
    the run folder, and a controller that is the cluster its cluster file names), each found
    or missing with the fix; exit 1 when something is missing."""
    if spec is None:
        _machine(as_json)
    else:
        _job(spec, set_ or [], cluster, as_json)


def _mark(ok: bool) -> tuple[str, str]:
    return ("ok", "green") if ok else ("missing", "red")


def _machine(as_json: bool) -> None:
    from orchestrator.checks import doctor, setup_report
    from orchestrator.cli.state import STATE

    report = doctor.machine()
    setup = setup_report.build(str(STATE.home_override) if STATE.home_override else None)
    if as_json:
        doc = {**report.model_dump(mode="json"), "setup": setup.model_dump(mode="json")}
        typer.echo(json.dumps(doc, indent=2))
        return
    rows: list[list[Cell]] = []
    for c in report.slurm_clients:
        rows.append([c.name, _mark(c.path is not None), c.path or "-", c.version or "-"])
    ctl = report.controller
    where = f"cluster {ctl.cluster}" if ctl.cluster else "-"
    rows.append(["controller", _mark(ctl.answers), where, ctl.detail])
    if not report.nsys:
        rows.append(["nsys", _mark(False), "-", "install: bash scripts/install-nsys.sh"])
    for n in report.nsys:
        detail = (
            f"{n.version} (gh-run family {n.family or 'unsupported'}; {n.gpu_metrics_flag}; "
            f"{len(n.reports)} nsys stats reports; export types {','.join(n.export_types)})"
            + "".join(f"; note: {note}" for note in n.notes)
            if n.version
            else n.detail or "-"
        )
        rows.append([n.name, _mark(n.version is not None), n.path or "-", detail])
    for item in (report.apptainer, report.singularity, report.chromium, report.cron):
        rows.append(
            [item.name, _mark(item.path is not None), item.path or "-", item.version or "-"]
        )
    columns = [
        Column("", keep=True),
        Column("status", keep=True),
        Column("where", drop=1),
        Column("version / detail"),
    ]
    print_table(columns, rows)
    print(f"tools prefix (scripts/install-tools.sh): {report.tools_prefix}")
    for line in report.export_reading:
        print(f"nsys exports: {line}")
    _setup(setup)


def _setup(s: setup_report.SetupReport) -> None:
    print()
    print(s.home_found)  # which home, and how it was found
    marks = {"ok": ("ok", "green"), "missing": ("-", "dim"), "refused": ("refused", "red")}
    for title, places in (
        ("cluster files, first found wins", s.cluster_places),
        (
            "admin templates (after the cluster's template_dirs, before gh-run's own)",
            s.template_places,
        ),
    ):
        rows: list[list[Cell]] = [
            [
                str(i),
                marks[p.state],
                p.path,
                p.named_by,
                ", ".join(p.clusters) if p.clusters else (p.detail or ""),
            ]
            for i, p in enumerate(places, 1)
        ]
        print()
        print_table(
            [
                Column("#", keep=True),
                Column("state", keep=True),
                Column("folder", keep=True),
                Column("named by", drop=1),
                Column("holds" if places is s.cluster_places else ""),
            ],
            rows,
            title=title,
        )
    if s.clusters:
        print()
        rows = [
            [c.name, c.file, c.found_by + (f"; hides {', '.join(c.hidden)}" if c.hidden else "")]
            for c in s.clusters
        ]
        print_table(
            [Column("cluster", keep=True), Column("file", keep=True), Column("found")],
            rows,
            title="which file answers",
        )
    for line in s.refused:
        print(f"{paint('refused:', 'red')} {line}")
    print(f"default cluster: {s.default_cluster or '-'} ({s.default_cluster_why})")
    print()
    for part in s.native:
        state = ("built", "green") if part.built and not s.native_off else ("not used", "yellow")
        detail = part.path if part.built and not s.native_off else part.without
        if part.built and s.native_off:
            detail = f"GH_RUN_NO_NATIVE_SCAN is set: {part.without}"
        print(f"{paint(state[0], state[1])} {part.what} ({part.name}): {detail}")
    print(f"template cache: {s.template_cache} ({s.template_cache_state})")


def _job(spec: Path, overrides: list[str], cluster: str | None, as_json: bool) -> None:
    from orchestrator.checks import doctor, preflight
    from orchestrator.checks import prepare as P
    from orchestrator.cli.state import STATE, note
    from orchestrator.core.errors import GhRunError
    from orchestrator.core.paths import display_path
    from orchestrator.executors.choose import transport_for

    limits: list[GhRunError] = []
    prep = P.prepare(spec, overrides, cluster, problems=limits)
    transport = transport_for(prep.cluster)

    def need(f: preflight.Finding) -> doctor.Need:
        return doctor.Need(what=f.what, ok=f.ok, detail=f.detail.removeprefix(f"{f.what}: "))

    # What `check` would refuse besides what this machine lacks: the partition's limits, the
    # run folder (an unset $SCRATCH), and a controller of another cluster.
    needs = [
        *map(need, preflight.partition(prep, limits)),
        *doctor.job_needs(
            prep.spec,
            prep.partition,
            prep.partition_name,
            display_path(spec),
            setup_lines=[*prep.cluster.defaults.setup, *prep.partition.setup],
            configured=doctor.configured_nsys(prep.cluster, prep.partition),
            say=note,
        ),
        need(preflight.run_folder(prep, STATE.home, transport)),
        need(preflight.cluster(prep, transport)),
    ]
    if as_json:
        typer.echo(json.dumps([n.model_dump(mode="json") for n in needs], indent=2))
    else:
        for n in needs:
            text, style = ("warn", "yellow") if n.warn else _mark(n.ok)
            fix = f" {paint('fix:', 'bold')} {n.fix}" if n.fix and not n.ok else ""
            print(f"{paint(text, style)} {n.what}: {n.detail}{fix}")
    if not all(n.ok for n in needs):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)
