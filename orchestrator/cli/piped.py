"""What Rich's Console writes to a pipe or a file, written without importing Rich.

`gh-run analyze` prints through a Console. Piped or redirected (a script, `| grep`, a CI
log), Rich writes no styles and, with `soft_wrap` on, never wraps: each `print` is its text
with the markup tags taken out, `:emoji:` codes replaced, the control characters BEL, BS, VT,
FF and CR dropped, and a newline. Importing Rich for that costs more than a third of what
the whole analysis of a small trace takes (bench/bench_cli.py's `analyze` row), so
`console_for_stdout()` gives a `PipedConsole` that writes those same bytes wherever Rich
would see no terminal, and Rich's Console everywhere else.

The piped console follows Rich 15's own code (`Console.is_terminal`, `Console.size`,
`rich.markup.render`, `Text.wrap` with overflow "ignore"), and steps aside to a real Console
for whatever it does not reproduce: a tab (Rich expands it by cell widths), an explicit
closing tag such as `[/bold]` (Rich matches it by normalised style), an `[@handler]` tag, a
`[/]` with nothing to close (Rich raises), anything but one string. tests/unit/
test_piped_console.py holds it to Rich's output on generated text, and its choice and width to
Rich's under each setting that decides them.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console


class Out(Protocol):
    """What the printing of `analyze` uses of a console (Rich's Console has it all)."""

    @property
    def is_terminal(self) -> bool: ...

    @property
    def width(self) -> int: ...

    @property
    def file(self) -> IO[str]: ...

    def print(
        self,
        *objects: Any,
        markup: bool | None = None,
        highlight: bool | None = None,
        soft_wrap: bool | None = None,
    ) -> None: ...


# Rich's markup tag (rich/markup.py RE_TAGS): an opening bracket, a letter, '#', '/' or '@'.
_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
# Rich's emoji code (rich/_emoji_replace.py): `:name:` or `:name-emoji:` / `:name-text:`; a
# match with no name (C++'s `::`) is never replaced (no code is empty)
_EMOJI = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
# What rich.control.strip_control_codes drops: BEL, BS, VT, FF, CR.
_STRIP = dict.fromkeys((7, 8, 11, 12, 13))


class _StepAside(Exception):
    """The text holds something the piped console does not reproduce: Rich prints it."""


def rich_sees_a_terminal(stream: IO[str], environ: Mapping[str, str]) -> bool | None:
    """Rich's `Console.is_terminal` for a Console writing to `stream`; None where Rich's
    answer rests on what this does not follow (Windows consoles, Jupyter and Databricks)."""
    if sys.platform == "win32" or "get_ipython" in vars(builtins):
        return None
    if environ.get("DATABRICKS_RUNTIME_VERSION"):
        return None
    compatible = environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = environ.get("FORCE_COLOR")  # https://force-color.org/
    if force is not None:
        return force != ""
    isatty = getattr(stream, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # a closed stream
        return False


def rich_width(environ: Mapping[str, str]) -> int:
    """Rich's `Console.width` off a terminal: $COLUMNS, else the width of the first of stdin,
    stdout and stderr that is a terminal, else 80."""
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
        return width or 80  # a pseudo-terminal may say 0
    return 80


def _emoji(text: str) -> str:
    if not any(m.group(2) for m in _EMOJI.finditer(text)):
        return text
    from rich._emoji_replace import _emoji_replace  # the codes' table, not the Console

    return _emoji_replace(text)


def _markup_segments(text: str) -> Iterator[str]:
    """The text of `rich.markup.render(text)`, segment by segment (rich.markup._parse)."""
    position = 0
    opened = 0
    for match in _TAG.finditer(text):
        full, escapes, tag = match.groups()
        start, end = match.span()
        if start > position:
            yield text[position:start]
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            if backslashes:
                yield "\\" * backslashes
            if escaped:
                yield full[len(escapes) :]
                position = end
                continue
        name = tag.partition("=")[0]
        if name.startswith("@") or (name.startswith("/") and name[1:].strip()):
            raise _StepAside
        if name.startswith("/"):
            if not opened:
                raise _StepAside
            opened -= 1
        else:
            opened += 1
        position = end
    if position < len(text):
        yield text[position:]


def plain_text(text: str, markup: bool) -> str:
    """What Rich prints of `text` (one string, soft-wrapped, no terminal), before the newline.
    Raises _StepAside where Rich must print it."""
    if markup and "[" in text:
        out = "".join(_emoji(s.replace("\\[", "[")) for s in _markup_segments(text))
    else:
        out = _emoji(text)
    out = out.translate(_STRIP)
    if "\t" in out:
        raise _StepAside
    return out


class PipedConsole:
    """A Console for output that is no terminal: Rich's bytes, without Rich (module doc)."""

    is_terminal = False

    def __init__(
        self, environ: Mapping[str, str] | None = None, file: IO[str] | None = None
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self._file = file
        self._width = rich_width(self._environ)
        self._rich: Console | None = None

    @property
    def width(self) -> int:
        return self._width

    @property
    def file(self) -> IO[str]:
        # stdout is looked up on each use, as Rich does (a test may swap it)
        return sys.stdout if self._file is None else self._file

    def print(
        self,
        *objects: Any,
        markup: bool | None = None,
        highlight: bool | None = None,
        soft_wrap: bool | None = None,
    ) -> None:
        if not objects:
            self.file.write("\n")
            return
        if len(objects) == 1 and isinstance(objects[0], str) and soft_wrap is not False:
            try:
                line = plain_text(objects[0], markup is not False)
            except _StepAside:
                pass
            else:
                self.file.write(line + "\n")
                return
        self._console().print(*objects, markup=markup, highlight=highlight, soft_wrap=soft_wrap)

    def _console(self) -> Console:
        if self._rich is None:
            from rich.console import Console

            self._rich = Console(file=self._file, soft_wrap=True, _environ=dict(self._environ))
        return self._rich


def console_for_stdout() -> Out:
    """The console `analyze` prints to: the piped one wherever Rich would see no terminal on
    stdout, else Rich's Console (soft-wrapped when it sees none)."""
    if rich_sees_a_terminal(sys.stdout, os.environ) is False:
        return PipedConsole()
    from rich.console import Console

    console = Console()
    console.soft_wrap = not console.is_terminal  # piped: long lines stay whole
    return console
