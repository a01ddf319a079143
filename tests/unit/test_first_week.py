"""Issue 36, "a newcomer's first week": the small defects met on the way, each reproduced.

`report --help` says nothing of `example:` inputs; `campaign --help` cuts its subcommands'
descriptions; `render` without SLURM renders for the `direct` launcher yet says "Submit by hand
with: sbatch"; `doctor SPEC` says "fix: ... fix:"; `analyze` of a run that left no trace says
"pass a run folder or trace files" (which was passed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli


@pytest.mark.parametrize("command", ["analyze", "compare", "report"])
def test_the_analysis_commands_help_names_the_shipped_examples(gh_home: Path, command: str) -> None:
    res = run_cli([command, "--help"], gh_home)
    assert res.rc == 0
    assert "example:baseline" in res.out and "example:offload" in res.out, res.out


@pytest.mark.parametrize("group", ["campaign", "partitions"])
def test_a_group_lists_its_commands_whole_at_80_columns(gh_home: Path, group: str) -> None:
    res = run_cli([group, "--help"], gh_home, env={"COLUMNS": "80"})
    listing = res.out[res.out.index("Commands:") :]
    lines = [x for x in listing.splitlines()[1:] if x.strip()]
    assert len(lines) >= 3
    assert not any(x.rstrip().endswith("...") for x in lines), listing
    assert all(len(x) <= 80 for x in lines)


def test_a_direct_script_says_how_to_run_it_by_hand(gh_home: Path) -> None:
    local = run_cli(["render", "jobs/smoke.yaml", "--executor", "local"], gh_home)
    assert local.rc == 0, local.err
    assert "run by hand with: bash <this file>" in local.out
    assert "sbatch <this file>" not in local.out
    slurm = run_cli(["render", "jobs/smoke.yaml", "--executor", "slurm"], gh_home)
    assert "Submit by hand with: sbatch <this file>" in slurm.out


def test_doctor_names_each_fix_once(gh_home: Path) -> None:
    res = run_cli(["doctor", "jobs/sft.yaml"], gh_home)
    lines = res.out.splitlines()
    assert all(x.count("fix") <= 1 for x in lines), [x for x in lines if x.count("fix") > 1]
    (nsys,) = [x for x in lines if " nsys: " in x]
    assert "bring the image here first" in nsys  # not "install nsys" for an absent image


def test_analyze_of_a_run_without_a_trace_says_why(gh_home: Path) -> None:
    sub = run_cli(["submit", "jobs/smoke.yaml", "--executor", "local", "--wait"], gh_home)
    assert sub.rc == 0, sub.text
    res = run_cli(["analyze", "last"], gh_home)
    assert res.rc == 2
    assert "pass a run folder" not in res.err
    assert "left no trace to analyse" in res.err and "profile.tool: none" in res.err
    assert "jobs/smoke.yaml" in res.err, res.err


def test_the_time_limit_refusal_reads(gh_home: Path) -> None:
    res = run_cli(["render", "jobs/smoke.yaml", "--set", "resources.time=03:00:00"], gh_home)
    assert res.rc == 2
    assert "''s" not in res.err
    assert "is over the limit of partition 'gh', 02:00:00" in res.err, res.err


def test_full_timeline_is_said_once_with_the_inputs_named(tmp_path: Path) -> None:
    """A run of two exports whose reports were left on the cluster read "Full timeline: nsys-ui
    on the .nsys-rep this export was made from (...); nsys-ui on the .nsys-rep this export was
    made from (...)": the same sentence once per input, naming none. Now once, with both."""
    from orchestrator.analysis import analyze_paths, write_report

    m = analyze_paths([REPO / "tests" / "data" / "nsys_cpu" / "smoke-profiled.sqlite"])
    (src,) = m.sources
    other = src.model_copy(
        update={"path": src.path.replace("profiled.sqlite", "profiled.1.sqlite")}
    )
    two = m.model_copy(update={"sources": [src, other]})
    paths = write_report([two], tmp_path)
    for kind in ("html", "md"):
        text = paths[kind].read_text().replace("\\", "")
        assert text.count("Full timeline") == 1, kind
        assert text.count("this export was made from") == 1, kind
        assert "smoke-profiled.sqlite, smoke-profiled.1.sqlite" in text, kind
