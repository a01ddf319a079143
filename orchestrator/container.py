"""ContainerSpec → the argv prefix that runs a command inside the container.

`runtime: none` runs on the host (the dev cluster and the local executor use it).
"""

from __future__ import annotations

from typing import Literal

from orchestrator.base import Strict


class ContainerSpec(Strict):
    """How the workload's processes are wrapped. `none` runs them directly on the node."""

    runtime: Literal["none", "singularity", "apptainer"] = "none"
    image: str | None = None


def exec_prefix(spec: ContainerSpec) -> list[str]:
    """The argv that comes before the workload's own argv (empty for `none`)."""
    if spec.runtime == "none":
        return []
    if not spec.image:
        raise ValueError("container.image is required when container.runtime is not none")
    return [spec.runtime, "exec", "--nv", spec.image]
