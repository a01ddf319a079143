"""Listing tables (issue 16): run ids, states and names are never cut.

Piped output (not a terminal) is plain aligned text with every value in full, whatever
$COLUMNS says; on a terminal (a real pseudo-terminal here) narrower than the table, the other
columns are left out first and a line says which. Every listing command has --json.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from orchestrator.cli.table import Column, render
from tests.conftest import CliResult, run_cli
from tests.fixtures.store_rows import ended_run

REPO = Path(__file__).resolve().parents[2]
LONG_ID = "a-rather-long-job-name-for-a-sweep-20250101-000000-abcdef"


def gh_run(args: list[str], home: Path, columns: int = 40) -> CliResult:
    return run_cli(args, home, env={"COLUMNS": str(columns)})


def on_a_terminal(args: list[str], home: Path, columns: int) -> str:
    """The command's output on a pseudo-terminal `columns` wide (colours on)."""
    main, sub = pty.openpty()
    env = {**os.environ, "GH_RUN_HOME": str(home), "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        env=env,
        stdin=sub,
        stdout=sub,
        stderr=sub,
    )
    os.close(sub)
    out = b""
    # poll, not select: select() takes no descriptor above 1,023, which a long test session
    # may have reached
    poller = select.poll()
    poller.register(main, select.POLLIN)
    while True:
        if not poller.poll(60_000):
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closes when the command ends
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(main)
    return out.decode()


def test_piped_status_prints_full_values_in_aligned_columns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ended_run(home, LONG_ID, cluster="gh200")
    res = gh_run(["status"], home, columns=40)  # a narrow $COLUMNS does not matter to a pipe
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == [
        "run",
        "state",
        "exit",
        "job",
        "where",
        "submitted",
        "elapsed",
        "collected",
    ]
    row = lines[1].split()
    assert row[:5] == [LONG_ID, "COMPLETED", "0", "local:local-4242", "gh200/gh"]
    assert "\x1b[" not in res.out and "…" not in res.out
    # Aligned: every column starts where its header does.
    for header in ("state", "job", "where"):
        assert lines[0].index(header) == lines[1].index(row[lines[0].split().index(header)])


def test_narrow_terminal_leaves_out_columns_never_the_run_id_or_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ended_run(home, LONG_ID, cluster="gh200")
    text = on_a_terminal(["status"], home, columns=72)
    plain = text.replace("\x1b[1m", "").replace("\x1b[0m", "").replace("\x1b[32m", "")
    assert LONG_ID in plain and "COMPLETED" in plain
    assert "\x1b[32mCOMPLETED" in text  # a terminal gets colour
    assert "left out for the terminal's width: " in plain
    left_out = plain.split("left out for the terminal's width: ")[1].split(";")[0].split(", ")
    assert "collected" in left_out and "run" not in left_out and "state" not in left_out
    header = next(line for line in plain.splitlines() if line.startswith("run"))
    assert "collected" not in header and "state" in header
    # A terminal too narrow even for the run id: still whole (the line wraps, as any does).
    text = on_a_terminal(["status"], home, columns=30)
    assert LONG_ID in text.replace("\r\n", "\n")


def test_render_drops_by_priority_and_keeps_kept_columns_whole() -> None:
    columns = [
        Column("run", keep=True),
        Column("state", keep=True),
        Column("a", drop=1),
        Column("b", drop=2),
    ]
    rows = [["r" * 20, "FAILED", "x" * 10, "y" * 10]]
    stream = io.StringIO()
    assert render(columns, rows, stream=stream)[0].split() == ["run", "state", "a", "b"]
    lines = render(columns, rows, width=45, stream=stream)  # b (drop 2) goes first
    assert lines[0].split() == ["run", "state", "a"] and lines[1].split()[0] == "r" * 20
    lines = render(columns, rows, width=10, stream=stream)
    assert lines[0].split() == ["run", "state"]
    assert lines[1].split() == ["r" * 20, "FAILED"]
    assert lines[2] == (
        "(left out for the terminal's width: a, b; a wider terminal or a pipe shows them)"
    )


def test_status_json_lists_every_run_in_full(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ended_run(home, LONG_ID, cluster="gh200")
    res = gh_run(["status", "--json"], home)
    doc = json.loads(res.out)
    assert [d["run"]["run_id"] for d in doc] == [LONG_ID]
    assert doc[0]["run"]["state"] == "COMPLETED" and doc[0]["events"]


def test_partitions_list_json_and_piped_table(tmp_path: Path) -> None:
    res = gh_run(["partitions", "list", "--cluster", "gh200", "--json"], tmp_path / "home")
    doc = json.loads(res.out)
    assert doc["cluster"] == "gh200" and doc["default_partition"] == "gh"
    assert doc["partitions"]["gh"]["cpus_per_node"] == 72
    res = gh_run(["partitions", "list", "--cluster", "gh200"], tmp_path / "home", columns=30)
    row = next(line for line in res.out.splitlines() if line.startswith("gh (default)"))
    assert "1 (gh200, 96G)" in row and row.split()[-1] == "singularity"


def test_campaign_list_json_on_an_empty_home(tmp_path: Path) -> None:
    res = gh_run(["campaign", "list", "--json"], tmp_path / "home")
    assert res.rc == 0, res.err
    assert json.loads(res.out) == {"schedules": [], "campaigns": []}


def test_compare_of_many_inputs_uses_letters_and_a_legend(tmp_path: Path) -> None:
    traces = ["baseline", "offload", "lora"]
    res = gh_run(["compare", *(f"tests/data/traces/{t}" for t in traces)], tmp_path / "home")
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    for key, name in zip("ABC", traces, strict=True):
        assert f"{key}  {name}  (tests/data/traces/{name})" in lines
    header = next(line for line in lines if line.strip().startswith("metric"))
    assert header.split()[2:5] == ["A", "B", "C"] and "traces" not in header
    # Two short names stay the headers themselves.
    res = gh_run(["compare", "tests/data/traces/baseline", "tests/data/traces/lora"], tmp_path)
    header = next(line for line in res.out.splitlines() if line.strip().startswith("metric"))
    assert header.split()[2:4] == ["baseline", "lora"]
