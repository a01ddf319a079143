"""gh-run's built-in cluster `local`: this machine, run by the local executor (bash, no
scheduler). It answers for the name `local` when no cluster file of that name is found, and is
the default cluster when no site, user or project file exists (`site_config.default_cluster`),
so that an installed gh-run works on a laptop with nothing else: `pip install`, `gh-run init`,
`gh-run submit jobs/smoke.yaml --wait`, `gh-run analyze last`.

Its one partition describes what this machine has, read when it is loaded: its CPUs (those
this process may run on), its memory, its architecture and its NVIDIA GPUs (as the driver lists
them in /proc/driver/nvidia/gpus; none where there is no driver). A job asking for more is
refused by the same checks as on any cluster. A file named `local.yaml` in the search
(`gh-run doctor` lists it) replaces it: write one to describe this machine otherwise.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

NAME = "local"
WHAT = "this machine, run by the local executor (bash, no scheduler)"
# What `platform.machine()` says → the architectures a partition names.
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container or cgroup limits it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def memory_mib() -> int:
    try:
        return max(1, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20)
    except (ValueError, OSError, AttributeError):
        return 1024


def gpus() -> int:
    try:
        return sum(1 for p in NVIDIA_GPUS.iterdir() if p.is_dir())
    except OSError:
        return 0


def local_cluster_data() -> dict[str, Any]:
    """The built-in cluster file's content, from this machine's facts (`cluster.load_cluster`
    validates it as any cluster file)."""
    arch = _ARCH.get(platform.machine().lower(), "x86_64")
    n_gpus = gpus()
    return {
        "name": NAME,
        "description": f"gh-run's built-in cluster: {WHAT}.",
        "scheduler": "none",
        "local_fallback": True,
        "default_partition": NAME,
        "partitions": {
            NAME: {
                "description": f"{platform.node() or 'this machine'}: {WHAT}.",
                "arch": arch,
                "nodes": [platform.node()] if platform.node() else [],
                "max_nodes": 1,
                "gpus_per_node": n_gpus,
                "cpus_per_node": cpus(),
                "mem_per_node": f"{memory_mib()}M",
                "max_time": "24:00:00",
                "default_time": "01:00:00",
                "launcher": {"kind": "direct"},
            }
        },
    }
