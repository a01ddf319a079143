"""Process-wide CLI options (set by the root callback) and shared output helpers.

`out` and `err` are Rich consoles made on first use: commands that print through them (submit,
campaigns, analysis) pay for Rich; `status`, `logs` and `render` never touch them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.core.paths import Home, locate_home

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.store.db import Store


@dataclass
class CliState:
    home_override: Path | None = None
    debug: bool = False
    _store: Store | None = None

    @property
    def home(self) -> Path:
        return self.located_home.path

    @property
    def located_home(self) -> Home:
        """The home and how it was found (`Home.describe`)."""
        return locate_home(self.home_override)

    def store(self) -> Store:
        from orchestrator.store.db import Store  # render and check never open it

        home = self.home
        if self._store is None or self._store.home != home:
            self._store = Store(home)
        return self._store


class _LazyConsole:
    """A rich Console built (and Rich imported) on first use."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def real(self) -> Console:
        """The Console itself (for Rich's Live and Progress, which need the object)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


STATE = CliState()
_out = _LazyConsole(highlight=False, soft_wrap=True)
_err = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)
out = cast("Console", _out)
err = cast("Console", _err)


def err_console() -> Console:
    """The stderr Console as an object (Live displays and progress bars take it)."""
    return _err.real()


def note(message: str) -> None:
    """A line on stderr that is information, not a warning (dim on a terminal)."""
    from orchestrator.cli.table import paint

    print(paint(message, "dim", sys.stderr), file=sys.stderr)


def note_once(message: str) -> None:
    """A note said once per gh-run home: a fact that holds from one command to the next (the
    cluster file a project chose is not the site's) is said at its first command, not on every
    one (the run records keep it). The home's `said/` folder remembers it by the message's
    hash; where the home does not exist yet or cannot be written, it is said every time."""
    import hashlib

    from orchestrator.core.errors import GhRunError

    try:
        home = STATE.home
    except GhRunError:
        home = None
    if home is None or not home.is_dir():
        note(message)
        return
    mark = home / "said" / hashlib.sha256(message.encode()).hexdigest()[:32]
    if mark.exists():
        return
    note(message)
    try:
        mark.parent.mkdir(exist_ok=True, mode=0o700)
        mark.touch()
    except OSError:
        pass


def warn(message: str) -> None:
    from orchestrator.cli.table import paint
    from orchestrator.core.escape import plain

    # Messages carry file names, job output and trace text: control characters are shown as
    # escapes, never sent to the terminal.
    print(f"{paint('warning:', 'yellow', sys.stderr)} {plain(message)}", file=sys.stderr)
