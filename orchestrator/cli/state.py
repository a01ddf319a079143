"""Process-wide CLI options (set by the root callback) and shared output helpers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from orchestrator.paths import gh_run_home
from orchestrator.store import Store


@dataclass
class CliState:
    home_override: Path | None = None
    debug: bool = False
    _store: Store | None = None

    @property
    def home(self) -> Path:
        return gh_run_home(self.home_override)

    def store(self) -> Store:
        if self._store is None or self._store.home != self.home:
            self._store = Store(self.home)
        return self._store


STATE = CliState()
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")
