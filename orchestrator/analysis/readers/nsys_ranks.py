"""Which process of an nsys export is which rank, and the split of one export's timeline into a
timeline per process.

Each process with GPU work (the `globalPid` of the GPU tables) or a CUDA context becomes a rank,
ordered by its first device, then pid. Host rows of other processes (launchers, data-loader
workers) stay with the first rank. The rank number itself comes from the environment nsys
recorded (TARGET_INFO_SYSTEM_ENV `DeviceEnvironment`: the launcher's rank variables).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from orchestrator.analysis.readers.nsys_db import SYSTEM_ENV, Db
from orchestrator.analysis.timeline import model as T

# rank variables of launchers and MPI implementations, most specific first
RANK_VARS = ("RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
             "MV2_COMM_WORLD_RANK")  # fmt: skip


def env_rank(db: Db) -> tuple[int, str] | None:
    """(rank, variable) from the environment nsys recorded for the profiled job
    (`TARGET_INFO_SYSTEM_ENV.DeviceEnvironment`: NUL- or `;`-separated NAME=value pairs)."""
    if not db.has(SYSTEM_ENV, "name", "value"):
        return None
    for (value,) in db.q(
        f"SELECT value FROM \"{db.name(SYSTEM_ENV)}\" WHERE name = 'DeviceEnvironment'"
        " ORDER BY value"
    ):
        if not isinstance(value, str):
            continue
        found: dict[str, int] = {}
        for m in re.finditer(r"(?:^|[;\x00])([A-Z_]+)=(\d{1,7})(?=[;\x00]|$)", value):
            if m.group(1) in RANK_VARS:
                found.setdefault(m.group(1), int(m.group(2)))
        for var in RANK_VARS:
            if var in found:
                return found[var], var
    return None


def ranked_pids(gpu_pid: Any, gpu: T.GpuTable, contexts: dict[int, int]) -> list[int]:
    """Processes with GPU work or a CUDA context on a device, ordered by their first device,
    then pid: the ranks of a file (a report that stopped before any kernel still names the
    processes of each GPU in TARGET_INFO_CUDA_CONTEXT_INFO)."""
    found: dict[int, int] = dict(contexts)
    if gpu_pid is not None and gpu_pid.size:
        lo, hi = int(gpu_pid.min()), int(gpu_pid.max())
        for p in [lo] if lo == hi else np.unique(gpu_pid).tolist():
            dev = int(gpu.device[gpu_pid == p].min()) if lo != hi else int(gpu.device.min())
            found[int(p)] = min(found.get(int(p), dev), dev)
    return sorted(found, key=lambda p: (found[p], p))


def split(
    base: T.RankTimeline,
    gpu_pid: Any,
    pids: list[int],
    um_whole: T.UnifiedMemoryEvents,
    um_per_pid: dict[int, T.UnifiedMemoryEvents],
) -> list[T.RankTimeline]:
    """One timeline per process; host rows of processes without GPU work go to the first."""
    out = []
    others = ~np.isin(base.host.pid, pids)
    for i, pid in enumerate(pids):
        hm = base.host.pid == pid
        if i == 0:
            hm |= others
        threads = {
            k: v for k, v in base.threads.items() if k[0] == pid or (i == 0 and k[0] not in pids)
        }
        tl = T.RankTimeline(
            source=base.source,
            names=base.names,
            gpu=base.gpu.take(gpu_pid == pid),
            host=base.host.take(hm),
            rank=base.rank,
            rank_rule=base.rank_rule,
            threads=threads,
            cuda_pids=base.cuda_pids,
            single_main_rule=base.single_main_rule,
            osrt_traced=base.osrt_traced,
            device_names=base.device_names,
            peak_memory_source=base.peak_memory_source,
            um=um_of(pid, um_whole, um_per_pid),
            hta=base.hta,
            split_devices=True,
            pid=pid,
            process_index=i,
            processes=len(pids),
            notes=base.notes,
            gpu_samples=base.gpu_samples,
            nccl_ops=_own_ops(base.nccl_ops, pid),
        )
        out.append(tl)
    return out


def set_peaks(tl: T.RankTimeline, peaks: dict[str, dict[int, int]]) -> None:
    tl.peak_memory = peaks.get("device", {})
    tl.peak_pinned_memory = peaks.get("pinned", {})
    tl.peak_managed_memory = peaks.get("managed", {})


def um_of(
    pid: int, whole: T.UnifiedMemoryEvents, per_pid: dict[int, T.UnifiedMemoryEvents]
) -> T.UnifiedMemoryEvents:
    """One process's UM events: zero faults (not None) where the file traced them."""
    um = per_pid.get(pid, T.UnifiedMemoryEvents())
    if um.cpu_faults is None and whole.cpu_faults is not None:
        um.cpu_faults = 0
    if um.gpu_faults is None and whole.gpu_faults is not None:
        um.gpu_faults = {}
    return um


def _own_ops(ops: Any, pid: int) -> Any:
    """The NCCL operations (`nsys_nccl.NcclOps`) of one process; None where the export does not
    say which process ran them (they cannot be told apart)."""
    if ops is None or not bool((ops.pid != 0).any()):
        return None
    return ops.take(ops.pid == pid)
