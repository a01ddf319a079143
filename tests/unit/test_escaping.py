"""Issue 15, class 4: text from traces (kernel, NVTX and thread names) is escaped for each
medium. In the terminal: never Rich markup (`[/x]` must not crash `analyze`, `[link=...]` must
not make a live link) and no raw control characters; in report.md: Markdown-escaped (a name
cannot embed a remote image); in report.html: HTML-escaped."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from orchestrator.analysis import analyze_paths, write_report
from orchestrator.core.escape import markdown, markup, plain
from orchestrator.store.db import Store
from tests.conftest import run_cli
from tests.fixtures.kineto_builder import KinetoBuilder
from tests.fixtures.store_rows import ended_run

HOSTILE = [
    "[/x]",
    "[link=https://evil.example/]click me[/link]",
    "\x1b[31mred\x1b]0;pwned title\x07",
    "![track](https://evil.example/t.png)",
    "<img src=x onerror=alert(1)>",
    "rtl\u202eevil",
]
THREAD = "[bold]thread\x1b[2J[/bold]"


def _trace(tmp: Path) -> Path:
    b = KinetoBuilder(rank=0)
    b.events[0]["args"]["name"] = THREAD  # the main thread's name
    for i, name in enumerate(HOSTILE):
        b.gpu("kernel", name, 10 + 20 * i, 10 - i)
    b.cpu("user_annotation", "[/nvtx] ![n](https://evil.example/n.png)", 0, 200)
    return b.write(tmp / "hostile.pt.trace.json")


def test_plain_text_escapes() -> None:
    assert plain("a\x1b[31mb\x07\n\u202e") == "a\\x1b[31mb\\x07\\x0a\\u202e"
    assert markup("[/x]") == "\\[/x]"
    assert markdown("![a](http://e/x.png)") == "\\!\\[a\\]\\(http://e/x\\.png\\)"
    assert markdown("a|b\nc") == "a\\|b c"


def test_plain_fast_path_escapes_every_character_the_character_scan_escapes() -> None:
    # `plain` returns a text that str.isprintable() accepts as it is: sound only if no code
    # point of the escaped categories is printable. The scan by category is the reference.
    hidden = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}
    printable_yet_hidden = [
        hex(code)
        for code in range(0x110000)
        if chr(code).isprintable() and unicodedata.category(chr(code)) in hidden
    ]
    assert printable_yet_hidden == []
    assert plain("naïve ✓ kernel<float>") == "naïve ✓ kernel<float>"
    assert plain("a\u00adb\u2028c\ue000") == "a\\xadb\\u2028c\\ue000"


def test_analyze_prints_hostile_names_as_text(tmp_path: Path, gh_home: Path) -> None:
    trace = _trace(tmp_path)
    # A terminal that takes colours and links: Rich would emit them if markup got through.
    env = {"NO_COLOR": "", "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "250"}
    res = run_cli(["analyze", str(trace)], gh_home, env=env)
    assert res.rc == 0, res.text
    assert "Traceback" not in res.text and "internal error" not in res.text
    out = res.out
    assert "[/x]" in out
    assert "[link=https://evil.example/]click me[/link]" in out
    assert "\x1b]" not in out, "an OSC sequence (hyperlink, window title) reached the terminal"
    assert "\x07" not in out and "\x1b[2J" not in out and "\u202e" not in out
    assert "\\x1b[31mred" in out  # shown, as text
    res = run_cli(["compare", str(trace), str(trace)], gh_home, env=env)
    assert res.rc == 0, res.text


def test_status_shows_control_characters_as_escapes(gh_home: Path) -> None:
    """`status` prints without Rich; a reason or an event detail (they quote job output and
    file names) still never sends a control sequence to the terminal."""
    ended_run(gh_home, "hostile-20260101-000000-abcdef", state="FAILED", exit_code=3)
    store = Store(gh_home)
    store.update_run(
        "hostile-20260101-000000-abcdef",
        reason="\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 \x1b[2J",
        event="detail \x1b]0;pwned\x07 \u202eevil",
    )
    store.close()
    res = run_cli(["status", "hostile-20260101-000000-abcdef"], gh_home)
    assert res.rc == 0, res.text
    assert "\x1b" not in res.text and "\x07" not in res.text and "\u202e" not in res.text
    assert "\\x1b]8;;https://evil.example/" in res.out  # shown, as text
    assert "\\x1b]0;pwned" in res.out and "\\u202eevil" in res.out


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Path]:
    m = analyze_paths([_trace(tmp_path)], label="[/x] ![l](https://evil.example/l.png)")
    return write_report([m], tmp_path / "r", "![title](https://evil.example/title.png)")


def test_report_md_is_markdown_escaped(report: dict[str, Path]) -> None:
    text = report["md"].read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    assert "<img" not in rendered, "a name embedded an image"
    assert "evil.example" in rendered  # the names are there, as text
    assert 'href="https://evil' not in rendered
    assert "\x1b" not in text and "\x07" not in text
    assert "<img src=x" not in rendered and "&lt;img src=x" in rendered


def test_report_html_stays_escaped(report: dict[str, Path]) -> None:
    html = report["html"].read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html and "\x07" not in html
