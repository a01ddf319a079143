"""Import discipline of the command line (issue 16): each command imports only what it uses.

Every check runs the real CLI in a fresh interpreter and reads `sys.modules` when the command
has finished: `--help` imports no command module and none of the heavy libraries; `status` and
`logs` read the store without Pydantic, Jinja, YAML, Rich, numpy or submitit; `render` and
`check` (Pydantic, Jinja, YAML: they validate and render) still leave numpy and submitit out.
Timings are bench/bench_cli.py's business, not this file's.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import COMMANDS, load_module
from tests.fixtures.store_rows import ended_run

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"numpy", "submitit", "pydantic", "jinja2", "yaml", "rich", "orjson", "markdown_it"}
# Prints the top-level packages and gh-run modules imported once the command has run.
PROBE = """
import json, sys
from orchestrator.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def modules_after(args: list[str], home: Path, tmp_path: Path, **env: str) -> set[str]:
    report = tmp_path / "modules.json"
    res = subprocess.run(
        [sys.executable, "-c", PROBE, str(report), *args],
        cwd=REPO,
        env={**os.environ, "GH_RUN_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.is_file(), res.stdout + res.stderr
    return set(json.loads(report.read_text()))


def top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.fixture
def home_with_a_run(tmp_path: Path) -> tuple[Path, str]:
    """A home with one ended local run that wrote a log (what status/logs read)."""
    home = tmp_path / "home"
    rid = "probe-20250101-000000-abcdef"
    ended_run(home, rid, state="FAILED", exit_code=3, log="hello\n")
    return home, rid


def test_help_imports_no_command_module_and_no_heavy_library(
    home_with_a_run: tuple[Path, str], tmp_path: Path
) -> None:
    home, _ = home_with_a_run
    mods = modules_after(["--help"], home, tmp_path)
    assert "orchestrator.cli" in mods
    assert not top(mods) & HEAVY, sorted(top(mods) & HEAVY)
    loaded = {m for m in mods if m.startswith("orchestrator.cli.")}
    assert not loaded & {f"orchestrator.cli.{e.module}" for e in COMMANDS.values()}, loaded


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "RUN"],
        ["status", "--json"],
        ["logs", "RUN"],
        ["logs", "RUN", "--err"],
    ],
    ids=["status", "status-run", "status-json", "logs", "logs-err"],
)
def test_status_and_logs_read_the_store_without_heavy_libraries(
    home_with_a_run: tuple[Path, str], tmp_path: Path, args: list[str]
) -> None:
    home, rid = home_with_a_run
    mods = modules_after([rid if a == "RUN" else a for a in args], home, tmp_path)
    assert "orchestrator.cli.jobs" in mods and "orchestrator.store.db" in mods
    assert not top(mods) & HEAVY, sorted(top(mods) & HEAVY)


@pytest.mark.parametrize("command", ["render", "check"])
def test_render_and_check_leave_out_numpy_and_submitit(
    home_with_a_run: tuple[Path, str], tmp_path: Path, command: str
) -> None:
    home, _ = home_with_a_run
    # An empty slurm.conf: `check` gets the controller's refusal at once (no cluster needed).
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    mods = modules_after(
        [command, "jobs/smoke.yaml", *(["-x", "local"] if command == "render" else [])],
        home,
        tmp_path,
        SLURM_CONF=str(conf),
    )
    assert {"pydantic", "jinja2", "yaml"} <= top(mods)  # it did validate and render
    assert not top(mods) & {"numpy", "submitit", "orjson", "rich"}, sorted(top(mods) & HEAVY)
    assert "orchestrator.analysis" not in mods
    # Nor what only runs need (the state store, artifacts, run views), nor Pydantic's plugin
    # search (importlib.metadata: email, zipfile, csv).
    unused = {
        "sqlite3",
        "orchestrator.store.db",
        "orchestrator.artifacts.collect",
        "orchestrator.cli.run_view",
    }
    assert not mods & (unused | {"importlib.metadata"}), sorted(
        mods & (unused | {"importlib.metadata"})
    )


def test_analyze_of_a_trace_imports_only_what_it_uses(tmp_path: Path) -> None:
    """`analyze` of one Kineto trace (issue 27 item 7): the reader, the metrics and the
    catalogue; not the report (Jinja), compare, the nsys reader, the state store, the
    executors, or YAML (a trace alone has no spec.lock.yaml); and, its output piped, not Rich
    (cli/piped.py writes Rich's bytes). The bench measures the time (bench/bench_cli.py's
    `analyze` row); this holds the reason."""
    trace = REPO / "tests" / "data" / "traces" / "baseline" / "sft_rank0.pt.trace.json.gz"
    mods = modules_after(["analyze", str(trace)], tmp_path / "home", tmp_path)
    assert {
        "orchestrator.analysis.readers.kineto",
        "orchestrator.analysis.presentation.advice",
    } <= mods  # it ran
    assert {"numpy", "pydantic", "orjson"} <= top(mods)
    assert "orchestrator.cli.piped" in mods
    unused = {
        "rich",
        "orchestrator.cli.compare_view",
        "jinja2",
        "yaml",
        "submitit",
        "orchestrator.analysis.presentation.report",
        "orchestrator.analysis.presentation.compare",
        "orchestrator.analysis.readers.nsys_sqlite",
        "orchestrator.analysis.readers.sqlite_columns",
        "orchestrator.analysis.readers.sqlite_pages",
        "orchestrator.nsys.versions",
        "orchestrator.store.db",
        "orchestrator.runs.lifecycle",
        "orchestrator.executors",
        "concurrent.futures",
    }
    assert not (mods | top(mods)) & unused, sorted((mods | top(mods)) & unused)


def test_the_analysis_package_imports_its_public_names_on_first_use() -> None:
    """orchestrator.analysis's public names resolve lazily (PEP 562), each to its module."""
    probe = (
        "import json, sys; import orchestrator.analysis as A; before = sorted(sys.modules); "
        # the module `compare` imported first: the package's `compare` is still the function
        "import orchestrator.analysis.presentation.compare as C; "
        "f = A.compare; "
        "print(json.dumps([before, f is C.compare, sorted(A.__all__), dir(A)]))"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    before, same, names, listed = json.loads(res.stdout)
    assert not [m for m in before if m.startswith("orchestrator.analysis.")], before
    assert same
    assert set(names) <= set(listed)
    import orchestrator.analysis as A

    for name in A.__all__:  # every name resolves to the object its module defines
        assert getattr(A, name) is getattr(
            importlib.import_module(f"orchestrator.analysis.{A._HOME[name]}"), name
        )
    with pytest.raises(AttributeError):
        _ = A.no_such_name


def test_pydantic_plugin_stand_in_steps_aside_for_other_names() -> None:
    """The stand-in for pydantic's plugin loader (orchestrator/core/base.py) answers "no plugins";
    asked for anything else, the real module is loaded and answers."""
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, orchestrator.core.base; from pydantic.plugin import _loader as l; "
            "assert tuple(l.get_plugins()) == (); "
            "assert 'importlib.metadata' not in sys.modules; "
            "print(l.PYDANTIC_ENTRY_POINT_GROUP, 'importlib.metadata' in sys.modules)",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["pydantic", "True"]


def test_a_command_run_as_a_program_ends_with_its_output_and_code(tmp_path: Path) -> None:
    """Run as a program, gh-run ends without the interpreter's teardown (cli/exiting.py):
    what it printed arrives whole, piped, and its exit code is kept."""
    env = {**os.environ, "GH_RUN_HOME": str(tmp_path / "home")}
    gh_run = [sys.executable, "-m", "orchestrator"]
    ok = subprocess.run([*gh_run, *RENDER], cwd=REPO, env=env, capture_output=True, check=False)
    assert ok.returncode == 0 and ok.stdout.endswith(b'exit "$status"\n'), ok.stderr
    bad = subprocess.run(
        [*gh_run, "render", "no-such.yaml"], cwd=REPO, env=env, capture_output=True, check=False
    )
    assert bad.returncode == 2 and bad.stderr.startswith(b"error: no-such.yaml: no such file")
    # A reader that stops early (`| head -1`): no complaint, no traceback.
    head = subprocess.run(
        f"{' '.join(gh_run)} {' '.join(RENDER)} | head -1",
        shell=True,
        cwd=REPO,
        env=env,
        capture_output=True,
        check=False,
    )
    assert head.stdout == b"#!/bin/bash\n" and b"Error" not in head.stderr, head.stderr


def test_every_registered_command_exists_and_its_summary_is_its_help() -> None:
    """COMMANDS (what --help lists without importing) agrees with the command modules."""
    for name, entry in COMMANDS.items():
        loaded: dict[str, object] = {}
        load_module(entry.module, loaded)  # type: ignore[arg-type]
        assert name in loaded, f"{entry.module}.register() defines no command {name!r}"
        cmd = loaded[name]
        first = " ".join((cmd.help or "").split("\n\n")[0].split())  # type: ignore[attr-defined]
        assert first == entry.summary, (name, first, entry.summary)


def test_a_mistyped_command_is_refused_with_a_suggestion(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("stauts")
    assert res.rc == 2
    assert "No such command 'stauts'" in res.err and "'status'" in res.err


def test_help_lists_every_command_with_its_summary(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("--help")
    assert res.rc == 0
    for name, entry in COMMANDS.items():
        line = next((x for x in res.out.splitlines() if x.strip().startswith(name + " ")), "")
        assert line, (name, res.out)
        assert entry.summary.split()[0] in line


# Counts the look-ups of installed distributions' entry points while the command runs.
ENTRY_POINTS_PROBE = """
import importlib.metadata as md, json, sys
calls = []
real = md.entry_points
def counted(*args, **kwargs):
    calls.append(sorted(kwargs))
    return real(*args, **kwargs)
md.entry_points = counted
from orchestrator.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump({"calls": len(calls), "ran": "orchestrator.render.scripts" in sys.modules}, f)
"""


RENDER = ["render", "jobs/smoke.yaml", "-x", "local"]


def test_render_looks_up_no_pydantic_plugins(tmp_path: Path) -> None:
    """Looking for Pydantic plugins reads every installed distribution's metadata on each
    start-up: gh-run's contracts load none."""
    report = tmp_path / "calls.json"
    res = subprocess.run(
        [sys.executable, "-c", ENTRY_POINTS_PROBE, str(report), *RENDER],
        cwd=REPO,
        env={**os.environ, "GH_RUN_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(report.read_text()) == {"calls": 0, "ran": True}
