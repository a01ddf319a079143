"""Environment variables in specs and cluster files: one rule for names, one for values, and
the shared fields of every workload that runs a process (env, secret_env, workdir).

Names are written unquoted (`export NAME=...`), so only plain names may reach a shell; values
are data, quoted at render time, and arrive in the job byte for byte.
"""

from __future__ import annotations

import re
from typing import Self

from pydantic import Field, field_validator, model_validator

from orchestrator.core.base import Strict

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_env_name(name: object) -> str:
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        raise ValueError(
            f"environment variable name {name!r} is not valid; "
            "use letters, digits and _ and do not start with a digit"
        )
    return name


def env_dict(v: object) -> object:
    """A `mode="before"` validator body: names checked, scalar values as text (booleans as
    true/false, as a shell user writes them); anything but a mapping is left to pydantic."""
    if not isinstance(v, dict):
        return v
    out: dict[str, str] = {}
    for key, value in v.items():
        name = check_env_name(key)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int | float):
            text = str(value)
        else:
            raise ValueError(f"the value of {name} must be a string, a number or a boolean")
        if "\x00" in text:
            raise ValueError(f"the value of {name} contains a NUL byte; remove it")
        out[name] = text
    return out


class ProcessEnv(Strict):
    """Fields shared by every workload kind that starts a process."""

    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(
        default_factory=list,
        description=(
            "Names of environment variables (e.g. HF_TOKEN) the job needs from the submit "
            "environment; their values are never written into scripts, specs or the store."
        ),
    )
    workdir: str | None = Field(None, description="Directory to run in; default: the run dir.")
    distributed_env: bool | None = Field(
        None,
        description=(
            "Export the rendezvous variables (RANK, LOCAL_RANK, NODE_RANK, WORLD_SIZE, "
            "MASTER_ADDR, MASTER_PORT; MASTER_NODE under srun): true always, false never; "
            "default: only when the job runs more than one task (nodes x tasks per node > 1), "
            "so that a single-process job sees the environment it would see without gh-run "
            "(libraries such as accelerate start a process group when they find them)."
        ),
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: object) -> object:
        return env_dict(v)

    @field_validator("secret_env")
    @classmethod
    def _secret_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not ENV_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not an environment variable name; list only names "
                    "(letters, digits, _), never the secret values themselves"
                )
        if len(set(v)) != len(v):
            raise ValueError("lists a name twice; keep each name once")
        return v

    @model_validator(mode="after")
    def _secret_not_in_env(self) -> Self:
        both = sorted(set(self.secret_env) & set(self.env))
        if both:
            raise ValueError(
                f"the variable {', '.join(both)} is both in env (written into the script) "
                "and in secret_env; remove it from env"
            )
        return self
