"""ProfileSpec → the profiler's argv prefix and the post-processing commands."""

from __future__ import annotations

from typing import Literal

from orchestrator.base import Strict


class ProfileSpec(Strict):
    """What profiles the workload: nothing, Nsight Systems, or the PyTorch profiler."""

    tool: Literal["none", "nsys", "torch"] = "none"


def profiler_prefix(spec: ProfileSpec, output: str) -> list[str]:
    """The argv that wraps the workload (empty unless nsys)."""
    if spec.tool != "nsys":
        return []
    return ["nsys", "profile", f"--output={output}"]
