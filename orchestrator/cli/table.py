"""Listing tables and terminal colour for the commands that must answer at once.

Run ids, states and names are what every other command takes, so a table never cuts them:
- output that is not a terminal (a pipe, a file) gets every column at full width as plain
  aligned text (two spaces between columns, no colour, no box), which `cut`, `awk`, `grep` and
  `column -t` read;
- in a terminal narrower than the table, the other columns are left out first, in the order
  the table gives, and a last line says which; kept columns are never cut (a line still wider
  than the terminal wraps, as any long line does).

Rich is not used here: importing it costs about twice a bare Python's start-up, and `status`,
`logs` and the listing commands must answer at once (bench/bench_cli.py). Colour follows the
usual conventions: only on a terminal, never with NO_COLOR set or TERM=dumb.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

_SGR = {"bold": 1, "dim": 2, "red": 31, "green": 32, "yellow": 33, "magenta": 35, "cyan": 36}
GAP = "  "


def colours_on(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, style: str | None, stream: TextIO | None = None) -> str:
    """`text` in `style` (words of _SGR, e.g. "bold red") where `stream` shows colours."""
    if not style or not colours_on(stream or sys.stdout):
        return text
    codes = ";".join(str(_SGR[word]) for word in style.split())
    return f"\x1b[{codes}m{text}\x1b[0m"


@dataclass(frozen=True)
class Column:
    """A column; `keep` columns (ids, states, names) are never left out nor cut. Columns that
    are not kept are left out of a narrow terminal by descending `drop`, the rightmost first
    among equals."""

    name: str
    keep: bool = False
    drop: int = 0
    right: bool = False


# A cell: its text, or (text, style) for colour on a terminal.
Cell = str | tuple[str, str | None]


def _styled(cell: Cell) -> tuple[str, str | None]:
    return (cell, None) if isinstance(cell, str) else cell


def _text(cell: Cell) -> str:
    return _styled(cell)[0]


def fit(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None) -> list[int]:
    """Indices of the columns shown: all of them, or as many as fit `width` after leaving out
    droppable columns (see Column)."""
    widths = [max([len(c.name), *(len(_text(r[i])) for r in rows)]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    order = sorted(
        (i for i, c in enumerate(columns) if not c.keep),
        key=lambda i: (-columns[i].drop, -i),
    )

    def total() -> int:
        return sum(widths[i] for i in shown) + len(GAP) * (len(shown) - 1)

    while width is not None and order and total() > width:
        shown.remove(order.pop(0))
    return shown


def render(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    width: int | None = None,
    stream: TextIO | None = None,
) -> list[str]:
    """The table's lines (header first); `width` None: every column (not a terminal)."""
    stream = stream or sys.stdout
    shown = fit(columns, rows, width)
    widths = {i: max([len(columns[i].name), *(len(_text(r[i])) for r in rows)]) for i in shown}
    last = shown[-1] if shown else -1

    def line(cells: list[tuple[str, str | None]]) -> str:
        parts = []
        for i, (text, style) in zip(shown, cells, strict=True):
            pad = widths[i] - len(text)
            if columns[i].right:
                text = " " * pad + paint(text, style, stream)
            else:
                text = paint(text, style, stream) + ("" if i == last else " " * pad)
            parts.append(text)
        return GAP.join(parts).rstrip()

    out = [line([(columns[i].name, "bold") for i in shown])]
    for r in rows:
        out.append(line([_styled(r[i]) for i in shown]))
    left_out = [columns[i].name for i in range(len(columns)) if i not in shown]
    if left_out:
        out.append(
            paint(
                f"(left out for the terminal's width: {', '.join(left_out)}; a wider terminal "
                "or a pipe shows them)",
                "dim",
                stream,
            )
        )
    return out


def print_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    title: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print a table: full width when not a terminal, fitted to the terminal's width on one."""
    stream = stream or sys.stdout
    width = shutil.get_terminal_size().columns if stream.isatty() else None
    if title:
        print(paint(title, "bold", stream), file=stream)
    for text in render(columns, rows, width=width, stream=stream):
        print(text, file=stream)


def print_fields(pairs: Sequence[tuple[str, Cell]], stream: TextIO | None = None) -> None:
    """`name  value` lines, names aligned (one record, e.g. `status RUN`)."""
    stream = stream or sys.stdout
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        text, style = _styled(value)
        key_text = paint(key.ljust(width), "bold", stream)
        print(f"{key_text}{GAP}{paint(text, style, stream)}", file=stream)
