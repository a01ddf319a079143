"""Node-wide collectors: which of a profile's collectors see the whole node, and which rank of
each node runs them.

Some nsys collectors record the node, not the process they wrap: GPU-metric sampling (every GPU
it is given), system-wide CPU sampling (`--sample=system-wide`), system-wide event sampling
(`--event-sample=system-wide`, the CPU core events), system-wide context switches
(`--cpuctxsw=system-wide`), CPU core and uncore metrics (`--cpu-metrics`, nsys 2026.3+). Two
of them on one node conflict (GPU counters have one owner) or record the node twice, and N
ranks per node would record it N times. So one rank per node runs them, the same one for all
of them: local rank `gpu_metrics.sampler_local_rank` (0 unless set), as GPU metrics always
did; the other ranks' nsys keep what is their own (process-tree sampling and context switches
of their processes, no event sampling, no CPU metrics, no GPU metrics).

This module decides which rank; profile.py (and nsys_versions.py) say how each flag is spelled
for a version. A field added to `ProfileSpec` must be classified here (`PER_PROCESS` or
`_NODE_WIDE`): tests/unit/test_node_fit.py fails until it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.nsys.profile import ProfileSpec

# field -> (is it node-wide for this value?, what the other ranks of the node get instead)
_NODE_WIDE: dict[str, tuple[Callable[[object], bool], object]] = {
    "gpu_metrics": (lambda v: v is not None, None),
    "gpu_metrics_devices": (lambda v: v is not None and v != "none", None),
    "sample": (lambda v: v == "system-wide", "process-tree"),
    "event_sample": (lambda v: v == "system-wide", "none"),
    "cpuctxsw": (lambda v: v == "system-wide", "process-tree"),
    # CPU core and uncore (socket) events and metrics (nsys 2026.3+): counters of the cores and
    # sockets, not of a process
    "cpu_metrics": (lambda v: bool(v), None),
}

# Every other field of ProfileSpec: what one rank's nsys records of its own processes, or how
# the tool and its reports are set up.
PER_PROCESS = frozenset(
    {
        "tool",
        "trace",
        "delay",
        "duration",
        "capture_range",
        "capture_range_end",
        "nvtx_capture",
        "cuda_memory_usage",
        "cuda_um_cpu_page_faults",
        "cuda_um_gpu_page_faults",
        "show_output",
        "force_overwrite",
        "output",
        "ranks",
        "export_sqlite",
        "reports",
        "torch_profile_flag",
        "nsys_version",
        "nsys_path",
        "nsys_placement",
        # PyTorch's allocator history: each rank's own process (nsys/memory_collect.py)
        "memory",
        "memory_max_events",
        # PyTorch's own annotations of the rank's process (nsys 2024.3+)
        "pytorch",
    }
)
NODE_WIDE_FIELDS = frozenset(_NODE_WIDE)


def collectors(spec: ProfileSpec) -> list[str]:
    """The node-wide collectors `spec` asks for, as `field=value` (empty: none, or not nsys)."""
    if spec.tool != "nsys":
        return []
    out = []
    for field, (node_wide, _) in _NODE_WIDE.items():
        value = getattr(spec, field)
        if node_wide(value):
            shown = ",".join(value) if isinstance(value, list) else value
            out.append(field if field == "gpu_metrics" else f"{field}={shown}")
    return out


def sampler_local_rank(spec: ProfileSpec) -> int:
    """The local rank (SLURM_LOCALID) of each node that runs the node-wide collectors."""
    return spec.gpu_metrics.sampler_local_rank if spec.gpu_metrics is not None else 0


def others(spec: ProfileSpec) -> ProfileSpec:
    """What the other ranks of a node run: `spec` without its node-wide collectors, each
    narrowed to the rank's own processes where nsys has such a mode."""
    update = {
        field: instead
        for field, (node_wide, instead) in _NODE_WIDE.items()
        if node_wide(getattr(spec, field))
    }
    return spec.model_copy(update=update)


def is_sampler(rank: int, tasks_per_node: int, local_rank: int) -> bool:
    """Whether `rank` runs its node's collectors under SLURM's default block distribution
    (rank = node * tasks_per_node + local rank)."""
    return rank % tasks_per_node == local_rank
