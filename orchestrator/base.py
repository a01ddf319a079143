"""Shared bits of the Pydantic contracts."""

from __future__ import annotations

import contextlib

from pydantic import BaseModel, ConfigDict

# Third-party Pydantic plugins (the `pydantic` entry-point group: tracing, logging) are not
# loaded in a process that uses gh-run's contracts. Looking for them reads the metadata of every
# installed distribution when the first validator is built (bench/bench_cli.py). An empty table
# is what pydantic caches when it finds none; should the private module or name go, pydantic
# simply looks them up again.
with contextlib.suppress(ImportError):
    from pydantic.plugin import _loader as pydantic_plugins

    if getattr(pydantic_plugins, "_plugins", {}) is None:
        pydantic_plugins._plugins = {}


class Strict(BaseModel):
    """Every contract refuses unknown keys: a typo must never be silently ignored.

    `defer_build`: a model's validator is built when first used, not when its module is
    imported; a command validates a few of the models it imports (a job spec builds the
    validators of its parts in one go), and the start-up of `gh-run render` shows it.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=False, validate_assignment=True, defer_build=True
    )
