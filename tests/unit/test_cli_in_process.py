"""The command line run again and again in one process (`orchestrator.cli.main([...])`: the tests,
other front ends) builds the same commands each time: a command module's register() adds its
commands to the app it is given, never to a module-level one that keeps the last run's.
"""

from __future__ import annotations

import importlib

import pytest
import typer

from orchestrator.cli import COMMANDS


def _shape(app: typer.Typer) -> dict[str | None, int]:
    """How many commands each group of an app holds (None: the app's own)."""
    shape: dict[str | None, int] = {None: len(app.registered_commands)}
    for group in app.registered_groups:
        assert group.typer_instance is not None
        shape[group.name] = len(group.typer_instance.registered_commands)
    return shape


@pytest.mark.parametrize("module", sorted({entry.module for entry in COMMANDS.values()}))
def test_registering_again_gives_the_same_commands(module: str) -> None:
    mod = importlib.import_module(f"orchestrator.cli.{module}")
    first, again = typer.Typer(), typer.Typer()
    mod.register(first)
    shape = _shape(first)
    for _ in range(3):
        again = typer.Typer()
        mod.register(again)
    assert _shape(again) == shape
    assert sum(shape.values()) > 0, f"{module}.register() registered nothing"
