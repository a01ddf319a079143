"""One resolver of run references for every command (issue 25): analyze, compare and report
take a run id, a unique prefix, a job id or `last` exactly as logs and status do, with the same
answers when it matches nothing or several runs, and head what they write with the run's id."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
TRACE = REPO / "tests" / "data" / "nsys_cpu" / "smoke-profiled.sqlite"


def _traced_run(cli, name: str) -> str:  # type: ignore[no-untyped-def]
    """A local run whose artifacts hold a real nsys export (copied by the job itself)."""
    res = cli(
        "submit",
        SMOKE,
        "-x",
        "local",
        "--wait",
        "--set",
        f"name={name}",
        "--set",
        "artifacts.include=['*.sqlite']",
        "--set",
        f'workload.args=[-c, "cp {TRACE} $GH_RUN_ARTIFACTS/"]',
    )
    assert res.rc == 0, res.text
    return res.out.split()[1]


def test_compare_and_report_resolve_like_logs(cli, gh_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = _traced_run(cli, "alpha")
    second = _traced_run(cli, "alps")
    # A unique prefix and `last`, as logs takes them; headed by the runs' ids.
    assert cli("logs", "alpha").rc == 0
    res = cli("compare", "alpha", "last", "--json")
    assert res.rc == 0, res.text
    assert json.loads(res.out)["labels"] == [first, second]
    out = tmp_path / "report"
    rep = cli("report", "last", "--out", str(out))
    assert rep.rc == 0, rep.text
    (run,) = json.loads((out / "report.json").read_text())["runs"]
    assert run["label"] == second  # not "last"
    assert "## last" not in (out / "report.md").read_text()
    # The same answers as logs when a reference matches nothing, or several runs.
    for ref, words in (
        ("nomatch", f"no run matches 'nomatch' in {gh_home / 'state.db'}"),
        ("al", f"'al' matches 2 runs ({second}, {first}"),
    ):
        logs, compare = cli("logs", ref), cli("compare", ref, "last")
        assert logs.rc == compare.rc == 2, (logs.text, compare.text)
        assert words in logs.err and words in compare.err, (logs.err, compare.err)
    assert "not a file or folder here" in cli("analyze", "nomatch").err
