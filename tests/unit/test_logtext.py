"""`gh-run logs` prints a log as the terminal showed it: a progress bar redrawn with carriage
returns is one line in its final state, with and without --follow. The sample is real: what
nsys 2023.4.4 printed while `nsys profile` wrote its report (tests/data/logs/)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.logtext import LineFollower, final_line, final_state
from orchestrator.store.db import Store

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
NSYS_OUT = REPO / "tests" / "data" / "logs" / "nsys-2023.4-profile.out"
SHOWN = (
    "Generating '/tmp/nsys-report-81e3.qdstrm'\n"
    "[1/1] [========================100%] cl-prog.nsys-rep\n"
    "Generated:\n"
    "    /tmp/cl-prog.nsys-rep\n"
)


def test_nsys_progress_bar_is_its_final_state() -> None:
    raw = NSYS_OUT.read_bytes().decode()
    assert max(len(line) for line in raw.split("\n")) == 648  # 12 redraws of one line
    assert final_state(raw) == SHOWN


def test_a_redraw_overwrites_like_a_terminal() -> None:
    assert final_line("abcdef\rxy") == "xycdef"  # a shorter redraw leaves the end
    assert final_line("50%\r100%") == "100%"
    assert final_line("done\r") == "done"
    assert final_state("a\r\nb\r\n") == "a\nb\n"  # CRLF line ends are line ends
    assert final_state("no bars\n") == "no bars\n"


@given(st.lists(st.text(alphabet="ab\r\n", max_size=12), max_size=8))
def test_following_in_pieces_shows_what_reading_whole_does(pieces: list[str]) -> None:
    follower = LineFollower()
    shown = "".join(follower.feed(p) for p in pieces) + follower.rest()
    assert shown == final_state("".join(pieces))


def test_logs_and_follow_print_the_final_state(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    # The real bytes, written in three pieces a second apart, cut inside the bar's line.
    src = str(NSYS_OUT)
    script = (
        f"head -c 300 {src}; sleep 1; tail -c +301 {src} | head -c 200; sleep 1; tail -c +501 {src}"
    )
    res = cli("submit", SMOKE, "-x", "local", "--set", f"workload.args=[-c, '{script}']")
    assert res.rc == 0, res.text
    run = Store(gh_home).find_run("last")
    followed = cli("logs", run.run_id, "--follow", timeout=120)
    assert followed.rc == 0, followed.text
    assert followed.out == SHOWN
    assert cli("logs", run.run_id).out == SHOWN
    assert cli("logs", run.run_id, "--tail", "2").out == SHOWN.split("\n", 2)[2]
