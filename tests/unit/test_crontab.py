"""Issue 15, class 2: `campaign schedule` treats only crontab's documented "no crontab for
USER" as an empty table; any other failure of `crontab -l` writes nothing, so the user's
entries are never lost. The failures come from a stand-in crontab (tests/fixtures/standin_bin/
crontab: an I/O error cannot be caused safely in the real spool of a shared machine); the
wording of "no crontab" is checked against the real crontab."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.campaign.schedule import NO_CRONTAB
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "fixtures" / "standin_bin"
USER_TABLE = "MAILTO=me@example.org\n15 3 * * * /home/me/backup.sh\n"


def test_real_crontab_says_no_crontab_as_we_expect() -> None:
    if shutil.which("crontab") is None or os.geteuid() != 0:
        pytest.skip("needs Debian's crontab and root (to ask about another user's table)")
    res = subprocess.run(
        ["crontab", "-u", "nobody", "-l"], capture_output=True, text=True, check=False
    )
    assert res.returncode != 0
    assert NO_CRONTAB.fullmatch(res.stderr.strip()), res.stderr


def _schedule(tmp: Path, home: Path, mode: str) -> tuple[int, str, str]:
    table = tmp / "table"
    if not table.exists():
        table.write_text(USER_TABLE)
    camp = tmp / "camp.yaml"
    camp.write_text(
        f"name: sched\njob: {REPO / 'jobs' / 'smoke.yaml'}\ninclude: [{{name: a}}]\n"
        "schedule: {cron: '0 2 * * *', tz: UTC, mode: cron}\n"
    )
    env = {
        "PATH": f"{STANDIN}:{os.environ['PATH']}",
        "STANDIN_CRONTAB_FILE": str(table),
        "STANDIN_CRONTAB_MODE": mode,
        "TZ": "UTC",
    }
    res = run_cli(["campaign", "schedule", str(camp)], home, env=env)
    return res.rc, res.err, table.read_text()


def test_a_failing_crontab_l_writes_nothing(tmp_path: Path, gh_home: Path) -> None:
    rc, err, table = _schedule(tmp_path, gh_home, "fail")
    assert rc == 1, err
    [line] = err.strip().splitlines()
    assert "`crontab -l` failed (crontab: error reading" in line and "left as it was" in line
    assert table == USER_TABLE  # the user's entries are all there


def test_the_users_entries_are_kept(tmp_path: Path, gh_home: Path) -> None:
    rc, err, table = _schedule(tmp_path, gh_home, "table")
    assert rc == 0, err
    lines = table.splitlines()
    assert lines[:2] == USER_TABLE.splitlines()
    assert len(lines) == 3 and lines[2].endswith("# gh-run-campaign:sched")


def test_no_crontab_is_an_empty_table(tmp_path: Path, gh_home: Path) -> None:
    (tmp_path / "table").write_text("")
    rc, err, table = _schedule(tmp_path, gh_home, "none")
    assert rc == 0, err
    [line] = table.splitlines()
    assert line.startswith("0 2 * * * ") and line.endswith("# gh-run-campaign:sched")
