"""A long line as `analyze` prints it: wrapped at 100 columns (or the terminal's width), its
continuation indented. Its own module so that the views `metrics_view` puts together
(`memory_view`) use it without importing `metrics_view` back."""

from __future__ import annotations

import textwrap

from orchestrator.cli.piped import Out
from orchestrator.core.escape import plain


def print_wrapped(console: Out, text: str, indent: str = "") -> None:
    """A long line wrapped at 100 columns (or the terminal's width), its continuation indented."""
    width = min(console.width, 100)
    wrapped = textwrap.fill(
        plain(text), width, initial_indent=indent, subsequent_indent=indent + "    "
    )
    console.print(wrapped, markup=False, highlight=False, soft_wrap=True)
