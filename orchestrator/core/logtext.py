"""A job's log as a terminal shows it: progress bars (nsys's `[1/8] [====  ] 42%`, pip's,
tqdm's) redraw one line with carriage returns, so the file holds every state of the bar on one
line (1,449 characters for one nsys export). `gh-run logs` prints each line in its final state,
what the terminal showed once the bar was done, so that a log piped to a file, `less` or `grep`
reads like the screen did.
"""

from __future__ import annotations


def final_line(line: str) -> str:
    """One line (no newline in it) as a terminal leaves it: each carriage return moves back to
    the start of the line and what follows overwrites what was there, character by character
    (a shorter redraw leaves the end of the longer one, as on screen)."""
    if "\r" not in line:
        return line
    shown: list[str] = []
    for part in line.split("\r"):
        shown[: len(part)] = part
    return "".join(shown)


def final_state(text: str) -> str:
    """Every line of `text` in its final state; newlines (and CRLF line ends) are kept."""
    if "\r" not in text:
        return text
    lines = text.split("\n")
    return "\n".join(final_line(line.removesuffix("\r")) for line in lines)


class LineFollower:
    """The final state of a log that is still being written (`logs --follow`): whole lines are
    given out as they complete; the line being written (a progress bar still redrawing) is held
    until its newline comes, or the job ends (`rest`)."""

    def __init__(self) -> None:
        self._partial = ""

    def feed(self, text: str) -> str:
        """What can be shown of the log so far, given its next piece."""
        text = self._partial + text
        head, sep, self._partial = text.rpartition("\n")
        return final_state(head + sep) if sep else ""

    def rest(self) -> str:
        """The unfinished last line, in its final state (the log has ended)."""
        out, self._partial = final_state(self._partial), ""
        return out
