"""How much of a run gh-run brings back (a cluster file's `artifacts:`), on its own so that the
cluster model does not import the artifact store (`render` and `check` start faster)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from orchestrator.core.base import Strict
from orchestrator.core.units import format_size, parse_size


class SizeLimits(Strict):
    """How much one run may bring back: per file and in all (SLURM-style sizes: 10G, 512M)."""

    max_file_size: str = Field(
        "32G", description="Largest single file collected; larger ones are refused and listed."
    )
    max_run_size: str = Field(
        "128G", description="Most bytes collected for one run; files past it are refused."
    )
    reports: Literal["fetch", "leave"] = Field(
        "fetch",
        description="The default of a job's artifacts.reports: fetch brings the profiler's "
        "reports back; leave keeps those the job analysed on the cluster (listed with size and "
        "sha256; `gh-run fetch RUN --reports` brings them later). Campaigns default to leave.",
    )

    @field_validator("max_file_size", "max_run_size", mode="before")
    @classmethod
    def _size(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        return format_size(parse_size(v)) if isinstance(v, str) else v

    @property
    def file_bytes(self) -> int:
        return parse_size(self.max_file_size)

    @property
    def run_bytes(self) -> int:
        return parse_size(self.max_run_size)

    def check(self, size: int, taken: int) -> str | None:
        """Why a file of `size` bytes cannot be collected when `taken` bytes already were."""
        if size > self.file_bytes:
            return f"{size} bytes, over the per-file limit of {self.max_file_size}"
        if taken + size > self.run_bytes:
            return f"would take the run past its limit of {self.max_run_size}"
        return None
