"""The gh-run command line. Thin: parse, call the rooms, print.

Exit codes: 0 success; 1 runtime failure (cluster, job, disk); 2 bad input (spec, cluster
file, override, argument). No tracebacks unless --debug.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from orchestrator import __version__
from orchestrator.cli import jobs
from orchestrator.cli.state import STATE
from orchestrator.errors import GhRunError

app = typer.Typer(
    name="gh-run",
    help=(
        "Run profiled LLM-training jobs on SLURM clusters of GH200 nodes.\n\n"
        "Typical use:\n\n"
        "  gh-run render jobs/smoke.yaml            # print the sbatch script\n\n"
        "  gh-run submit jobs/smoke.yaml --wait     # submit, track, collect artifacts\n\n"
        "  gh-run status                            # what ran, and how it ended\n\n"
        "  gh-run logs last --follow                # the job's output"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        print(f"gh-run {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            envvar="GH_RUN_HOME",
            help="gh-run home: state store and artifact store (default ./.gh-run).",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE.home_override = home
    STATE.debug = debug


jobs.register(app)

# Command groups written in their own modules register themselves when present.
for _mod in ("analysis", "partitions", "campaign", "schema"):
    try:
        _m = __import__(f"orchestrator.cli.{_mod}", fromlist=["register"])
    except ModuleNotFoundError as _exc:
        if _exc.name != f"orchestrator.cli.{_mod}":
            raise
        continue
    _m.register(app)


def main(argv: list[str] | None = None) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        rc = app(args=argv, standalone_mode=False)
        # Without standalone mode, click returns typer.Exit's code instead of exiting.
        sys.exit(rc if isinstance(rc, int) else 0)
    except GhRunError as exc:
        if STATE.debug:
            raise
        err.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted: runs already submitted keep running; `gh-run status` shows them")
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code (2)
        # Usage errors (click's, vendored by typer) know how to show themselves; exit 2.
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show()
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if STATE.debug:
            raise
        err.print(
            f"[bold red]internal error:[/] {type(exc).__name__}: {exc} "
            "(run again with --debug for the traceback)"
        )
        sys.exit(1)
