"""Text from traces (kernel, NVTX and thread names, device names, file names) escaped for the
medium it is shown in. Such text is data written by whoever ran the job: it must never become
terminal control sequences, Rich console markup (`[/x]` crashes a table, `[link=...]` makes a
live link) or Markdown (`![x](https://...)` embeds a remote image in report.md). HTML goes
through Jinja's autoescape (templates/report/*.html.j2).
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# Rich is imported by the function that makes a Rich object: `plain` serves `status` and `logs`,
# and `markup` the piped output of `analyze` (cli/piped.py), which print without Rich.

# Format characters that reorder or hide text (bidi overrides and isolates, zero-width joiners
# stay visible as what they are).
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: str) -> str:
    """Control and invisible format characters (ESC, CR, BEL, U+202E, U+2028, ...) written
    out as `\\x1b`-style escapes, so they reach no terminal or document raw."""
    # Every character of the categories escaped here is one str.isprintable() refuses, so a
    # printable text (nearly every name in a trace) has nothing to escape.
    if text.isprintable():
        return text
    return "".join(_visible(c) if unicodedata.category(c) in _HIDDEN else c for c in text)


def term(text: str) -> Text:
    """A Rich renderable that is never read as markup."""
    from rich.text import Text

    return Text(plain(text))


# rich.markup.escape's pattern: a tag's opening bracket, with the backslashes before it.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def markup(text: str) -> str:
    """For an f-string that is printed as Rich markup: the text escaped, as
    `rich.markup.escape` escapes it (its code, so that output without a terminal, printed
    without Rich, does not import Rich for it; tests/unit/test_piped_console.py)."""
    escaped = _MARKUP_TAG.sub(lambda m: f"{m[1]}{m[1]}\\{m[2]}", plain(text))
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        return escaped + "\\"
    return escaped


# CommonMark's backslash-escapable ASCII punctuation, minus what HTML escaping (Jinja's
# autoescape, which the Markdown template also has) already turns into entities.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~=^])")


def markdown(text: str) -> str:
    """Text that Markdown shows as written: one line, every punctuation mark that could start
    emphasis, a link, an image, code, a heading or a table cell backslash-escaped."""
    one_line = plain(text.replace("\r\n", " ").replace("\n", " "))
    return _MD_SPECIAL.sub(r"\\\1", one_line)
