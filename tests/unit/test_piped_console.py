"""The piped console (orchestrator/cli/piped.py) against Rich, its reference: what it prints
of any text is what Rich's Console prints to the same non-terminal (or it hands the text to
Rich), it is chosen exactly where Rich would see no terminal, and its width is Rich's."""

from __future__ import annotations

import io
import os
import pty
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape as rich_escape

from orchestrator.cli import piped
from orchestrator.core.escape import markup, plain
from tests.budget import examples

# Pieces that exercise every branch of Rich's markup and text handling: tags opened and
# closed (implicitly, explicitly, with nothing to close), escaped brackets and backslashes,
# handlers, links, emoji codes with variants, the control characters Rich drops, tabs, wide
# characters and newlines.
PIECES = st.sampled_from(
    [
        "[bold]", "[/]", "[/bold]", "[bold yellow]", "[link=https://x/]", "[@click]",
        "[@click('a')]", "[#ff0000]", "\\[bold]", "\\\\[bold]", "\\", "[", "]", "[1]",
        ":fire:", ":fire-text:", ":thumbs_up-emoji:", ":no_such:", "::", ":",
        "\t", "\r", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\n", " ", "  ",
        "at::native::kernel<float>", "é", "中文", "x", "advice", "=",
    ]
)  # fmt: skip
TEXTS = st.lists(st.one_of(PIECES, st.text(max_size=4)), max_size=12).map("".join)


def rich_prints(text: str, markup_on: bool) -> str | type[Exception]:
    out = io.StringIO()
    console = Console(file=out, _environ={})
    console.soft_wrap = not console.is_terminal  # as `analyze` sets it up
    try:
        console.print(text, markup=markup_on)
    except MarkupError:
        return MarkupError
    return out.getvalue()


def piped_prints(text: str, markup_on: bool) -> str | type[Exception]:
    out = io.StringIO()
    try:
        piped.PipedConsole({}, out).print(text, markup=markup_on)
    except MarkupError:
        return MarkupError
    return out.getvalue()


@settings(max_examples=examples(600), deadline=None)
@given(TEXTS, st.booleans())
def test_prints_what_rich_prints_to_a_pipe(text: str, markup_on: bool) -> None:
    assert piped_prints(text, markup_on) == rich_prints(text, markup_on)


@settings(max_examples=examples(300), deadline=None)
@given(TEXTS)
def test_escaped_text_prints_as_rich_prints_it(text: str) -> None:
    """gh-run's escaping is Rich's, and escaped text (what `analyze` prints) comes through the
    piped console as it comes through Rich."""
    assert markup(text) == rich_escape(plain(text))
    line = f"[bold yellow]advice[/] {markup(text)}: x"
    assert piped_prints(line, True) == rich_prints(line, True)


def test_what_analyze_prints_needs_no_rich() -> None:
    """The lines `analyze` prints are written by the piped console itself (no step aside)."""
    for text, on in [
        (f"[bold yellow]advice[/] {markup('x[/y]')}: m; knob: {markup('--k [a]')}", True),
        (f"peak GPU memory: {markup('metrics.json: peak')}", True),
        ("[bold]straggler[/]: rank 3", True),
        (f"note: {plain('rank 0: at::native::k<1>')}", False),
        ("", True),
    ]:
        assert piped.plain_text(text, on) == rich_prints(text, on)[:-1]  # type: ignore[index]


@pytest.fixture
def terminal() -> Iterator[io.TextIOWrapper]:
    """A real pseudo-terminal's slave end, open for writing."""
    leader, follower = pty.openpty()
    stream = os.fdopen(follower, "w")
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


@pytest.mark.parametrize("compatible", [None, "0", "1", "yes"])
@pytest.mark.parametrize("force", [None, "", "0", "1"])
def test_is_chosen_where_rich_sees_no_terminal(
    terminal: io.TextIOWrapper, compatible: str | None, force: str | None
) -> None:
    env = {
        k: v for k, v in (("TTY_COMPATIBLE", compatible), ("FORCE_COLOR", force)) if v is not None
    }
    for stream in (io.StringIO(), terminal):
        sees = piped.rich_sees_a_terminal(stream, env)
        assert sees == Console(file=stream, _environ=env).is_terminal, (env, stream)


@pytest.mark.parametrize("columns", [None, "77", "250", "0", "wide", " 90"])
def test_width_is_richs(columns: str | None) -> None:
    env = {} if columns is None else {"COLUMNS": columns}
    assert piped.PipedConsole(env).width == Console(file=io.StringIO(), _environ=env).width
