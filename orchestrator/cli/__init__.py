"""The gh-run command line. Thin: parse, call the rooms, print. May import every room; none
imports it (but `python -m orchestrator.analysis`, a front end of its own).

Exit codes: 0 success; 1 runtime failure (cluster, job, disk); 2 bad input (spec, cluster
file, override, argument). No tracebacks unless --debug.

Commands are registered lazily: `COMMANDS` names every command, the module that defines it
and the line `gh-run --help` shows for it, and a command's module is imported only when that
command runs (or shows its own --help). So `gh-run --help` imports no command module, and
`gh-run status` never imports what `analyze` or `render` need (numpy, Jinja, Pydantic...).
A new command module `orchestrator/cli/NAME.py` defines `register(app)` (adding its commands
or a sub-app to the Typer app it is given) and gets one line per command in `COMMANDS`.
`tests/unit/test_cli_imports.py` checks that the two agree and what each command imports.

Help is click's plain formatter (`rich_markup_mode=None`): Typer's Rich help imports Rich and
a Markdown parser, three times a bare Python's start-up, for every `--help`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
import typer.main
from typer.core import TyperGroup

from orchestrator import __version__
from orchestrator.cli.state import STATE
from orchestrator.core.errors import GhRunError


class Entry(NamedTuple):
    module: str  # orchestrator.cli.<module>, which defines register(app)
    summary: str  # its line in `gh-run --help`: the first paragraph of the command's help


COMMANDS: dict[str, Entry] = {
    "render": Entry("jobs", "Print the job script exactly as `submit` would submit it."),
    "check": Entry("jobs", "Check a job against its partition and the SLURM controller."),
    "submit": Entry("jobs", "Submit a job; --wait tracks it to the end and collects it."),
    "status": Entry("jobs", "Show runs and their states (refreshed in one batched query)."),
    "logs": Entry("jobs", "Print a run's log (stdout of rank 0; --err, --rank N)."),
    "cancel": Entry("jobs", "Cancel a run (scancel, or a signal to the local job)."),
    "adopt": Entry(
        "adopt", "Bind runs recorded elsewhere to this home, after showing what each would run."
    ),
    "fetch": Entry("jobs", "Collect a finished run's artifacts (idempotent, verified)."),
    "wait": Entry("jobs", "Wait for runs to end, then collect their artifacts."),
    "analyze": Entry("analysis", "Analyse nsys SQLite exports / PyTorch-profiler traces."),
    "compare": Entry("analysis", "Side-by-side comparison; the first run is the baseline."),
    "report": Entry("analysis", "Write report.html (self-contained), report.md and report.json."),
    "schema": Entry(
        "schema", "Print the JSON Schema of a file kind (for editors: yaml-language-server, IDEs)."
    ),
    "partitions": Entry(
        "partitions",
        "Partitions of a cluster: what users may request; import a draft from live SLURM.",
    ),
    "campaign": Entry(
        "campaign",
        "Nightly profiling campaigns: a matrix of one job, as job arrays, compared with the "
        "last good night.",
    ),
    "try": Entry("trial", "Run a finding's knob and check its projection."),
    "scores": Entry(
        "trial", "How the projections held: each try, and the running accuracy per rule."
    ),
    "doctor": Entry("doctor", "What this machine has for gh-run, or what one job needs here."),
    "init": Entry("init", "Start a project here: starter jobs, their schemas and a .gh-run home."),
}


# A click command (typer vendors click; its types are not public).
Command = Any


def load_module(module: str, into: MutableMapping[str, Command], only: str | None = None) -> None:
    """Import orchestrator.cli.<module> and add the click commands its register() defines:
    all of them, or (`only`) the one named: turning a function into a click command reads
    its signature and every parameter, 0.5 ms a command, which `render` need not pay for the
    seven others of its module."""
    mod = importlib.import_module(f"orchestrator.cli.{module}")
    sub = typer.Typer(rich_markup_mode=None, add_completion=False)
    mod.register(sub)
    for info in sub.registered_commands:
        assert info.callback is not None
        name = info.name or typer.main.get_command_name(info.callback.__name__)
        if only in (None, name) and name not in into:
            into[name] = typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=sub.pretty_exceptions_short,
                rich_markup_mode=sub.rich_markup_mode,
            )
    for group in sub.registered_groups:
        if only in (None, group.name) and group.name and group.name not in into:
            into[group.name] = typer.main.get_group_from_info(
                group,
                pretty_exceptions_short=sub.pretty_exceptions_short,
                rich_markup_mode=sub.rich_markup_mode,
                suggest_commands=sub.suggest_commands,
            )


class LazyCommands(MutableMapping[str, Command]):
    """The root group's commands: every name of COMMANDS, each loaded on first lookup."""

    def __init__(self, loaded: MutableMapping[str, Command]) -> None:
        self.loaded = loaded

    def __getitem__(self, name: str) -> Command:
        if name not in self.loaded and name in COMMANDS:
            load_module(COMMANDS[name].module, self.loaded, only=name)
        return self.loaded[name]

    def __setitem__(self, name: str, cmd: Command) -> None:
        self.loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self.loaded]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self.loaded))


class LazyGroup(TyperGroup):
    """The root group: commands from COMMANDS, imported when used; --help lists the summaries
    without importing any command module."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = LazyCommands(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, entry.summary) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="gh-run",
    cls=LazyGroup,
    help=(
        "Run profiled LLM-training jobs on SLURM clusters of GH200 nodes.\n\n"
        "\b\n"
        "Typical use:\n"
        "  gh-run render jobs/smoke.yaml          print the sbatch script\n"
        "  gh-run submit jobs/smoke.yaml --wait   submit, track, collect artifacts\n"
        "  gh-run status                          what ran, and how it ended\n"
        "  gh-run logs last --follow              the job's output\n\n"
        "`gh-run COMMAND --help` explains a command."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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
            help="gh-run home: state store and artifact store (default: the nearest .gh-run "
            "folder here or above, else the per-user one in $XDG_DATA_HOME or ~/.local/share).",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE.home_override = home
    STATE.debug = debug


def _error(text: str) -> None:
    """`error: ...` on stderr, in red where stderr is a terminal that takes colours. Messages
    carry text from elsewhere (file names, a controller's ClusterName, job output): control
    characters are shown as escapes, never sent to the terminal (line breaks between the
    problems of one error stay)."""
    from orchestrator.cli.table import paint
    from orchestrator.core.escape import plain

    text = "\n".join(plain(line) for line in text.split("\n"))

    print(f"{paint('error:', 'bold red', sys.stderr)} {text}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """The `gh-run` command line. Run as a program (no `argv`: the console script, `python -m
    orchestrator`) it leaves without the interpreter's teardown (cli/exiting.py); called with
    `argv` (tests, other front ends) it raises SystemExit as usual."""
    code = _run(argv)
    if argv is None:
        from orchestrator.cli.exiting import leave

        leave(code)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """Run the command; its exit code (0, 1 runtime failure, 2 bad input, 130 interrupted)."""
    try:
        rc = app(args=argv, standalone_mode=False)
        # Without standalone mode, click returns typer.Exit's code instead of exiting.
        return rc if isinstance(rc, int) else 0
    except GhRunError as exc:
        if STATE.debug:
            raise
        _error(exc.message)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(
            "interrupted: runs already submitted keep running; `gh-run status` shows them",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:  # click usage errors carry their own exit code (2)
        # Usage errors (click's, vendored by typer) know how to show themselves; exit 2.
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show()
            return int(exc.exit_code)  # type: ignore[attr-defined]
        if STATE.debug:
            raise
        from orchestrator.core.escape import plain

        print(
            f"internal error: {type(exc).__name__}: {plain(str(exc))} "
            "(run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
