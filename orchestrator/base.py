"""Shared bits of the Pydantic contracts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Every contract refuses unknown keys: a typo must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)
