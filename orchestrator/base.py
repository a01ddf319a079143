"""Shared bits of the Pydantic contracts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Every contract refuses unknown keys: a typo must never be silently ignored.

    `defer_build`: a model's validator is built when first used, not when its module is
    imported; a command validates a few of the models it imports (a job spec builds the
    validators of its parts in one go), and the start-up of `gh-run render` shows it.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=False, validate_assignment=True, defer_build=True
    )
