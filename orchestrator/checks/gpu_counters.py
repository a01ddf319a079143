"""Whether the GPU performance counters that nsys's GPU-metric sampling reads may be closed to
a job (`gh-run doctor SPEC`, `gh-run check`): said as warnings, since the compute nodes decide,
not the machine gh-run runs on.

Two things close them (NVIDIA's Nsight documentation; NeMo-Run's and the issue's notes):
- the driver restricts profiling to admins (`NVreg_RestrictProfilingOnlyToAdminUsers=1`, shown
  as `RmProfilingAdminOnly: 1` in /proc/driver/nvidia/params): nsys then records no samples and
  says ERR_NVGPUCTRPERM;
- DCGM's profiling module samples the same counters (`nv-hostengine` running, `dcgmi` present):
  one of the two gets them; `dcgmi profile --pause` before the job and `--resume` after frees
  them (a partition's setup lines can do it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core import tools

if TYPE_CHECKING:
    from orchestrator.spec.job import JobSpec

PARAMS = Path("/proc/driver/nvidia/params")


def asks_for_metrics(spec: JobSpec) -> bool:
    p = spec.profile
    if p.tool != "nsys":
        return False
    return p.gpu_metrics is not None or p.gpu_metrics_devices not in (None, "none")


def _admin_only(params: Path) -> bool | None:
    """The driver's profiling restriction (None: no NVIDIA driver here to ask)."""
    try:
        text = params.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "RmProfilingAdminOnly":
            return value.strip() == "1"
    return None


def _hostengine_running(proc: Path = Path("/proc")) -> bool:
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "nv-hostengine":
                return True
        except OSError:
            continue
    return False


def warnings(
    spec: JobSpec,
    setup_lines: list[str],
    params: Path = PARAMS,
    proc: Path = Path("/proc"),
) -> list[str]:
    """One sentence per reason the job's GPU metrics may come back empty (none when it asks
    for none). `setup_lines`: the cluster's and partition's setup, where a site pauses DCGM."""
    if not asks_for_metrics(spec):
        return []
    out = []
    admin = _admin_only(params)
    if admin is None:
        out.append(
            "GPU counters: no NVIDIA driver on this machine to ask; on the compute nodes nsys"
            " records GPU metrics only where the driver opens the counters to users"
            " (NVreg_RestrictProfilingOnlyToAdminUsers=0), else none (ERR_NVGPUCTRPERM) and the"
            " job fails its post-processing"
        )
    elif admin and os.geteuid() != 0:
        out.append(
            f"GPU counters: {params} says RmProfilingAdminOnly: 1, so nsys records no GPU"
            " metrics for a user (ERR_NVGPUCTRPERM); ask the admins for"
            " NVreg_RestrictProfilingOnlyToAdminUsers=0 on the compute nodes, or drop"
            " profile.gpu_metrics"
        )
    paused = any("dcgmi profile --pause" in line for line in setup_lines)
    dcgm = tools.find("dcgmi") is not None or _hostengine_running(proc)
    if dcgm and not paused:
        out.append(
            "GPU counters: DCGM is here (dcgmi or nv-hostengine) and its profiling samples the"
            " same counters: pause it around the job (`dcgmi profile --pause`, then"
            " `--resume`; a partition's setup lines can), or nsys may record none"
        )
    return out
