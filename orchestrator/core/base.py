"""Shared bits of the Pydantic contracts."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from pydantic import BaseModel, ConfigDict

# Third-party Pydantic plugins (the `pydantic` entry-point group: tracing, logging) are not
# loaded in a process that uses gh-run's contracts. Pydantic looks for them when it builds the
# first validator, in `pydantic.plugin._loader`, whose import alone pulls in importlib.metadata
# (email, zipfile, csv: 10-20 ms of CPU, more than a quarter of what `gh-run render` spends
# beyond importing its libraries, bench/bench_cli.py) before it reads the metadata of every
# installed distribution. A stand-in for that module answers "no plugins", as pydantic itself
# does when none is installed or PYDANTIC_DISABLE_PLUGINS is set. Should pydantic ask the
# module for anything else, the stand-in steps aside: the real module is loaded and answers.
_LOADER = "pydantic.plugin._loader"


def _real_loader() -> types.ModuleType:
    sys.modules.pop(_LOADER, None)
    return importlib.import_module(_LOADER)


class _NoPlugins(types.ModuleType):
    @staticmethod
    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asking what kind of module this is
            raise AttributeError(name)
        return getattr(_real_loader(), name)


if _LOADER not in sys.modules:
    sys.modules[_LOADER] = _NoPlugins(_LOADER)


class Strict(BaseModel):
    """Every contract refuses unknown keys: a typo must never be silently ignored.

    `defer_build`: a model's validator is built when first used, not when its module is
    imported; a command validates a few of the models it imports (a job spec builds the
    validators of its parts in one go), and the start-up of `gh-run render` shows it.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=False, validate_assignment=True, defer_build=True
    )
