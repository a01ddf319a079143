"""`profile.memory` → what the job needs to record PyTorch's allocator history: the hook's two
files in the run folder (`memory_hook/sitecustomize.py`, the loader, and
`memory_hook/gh_run_memory_hook.py`, the hook: orchestrator/nsys/memory_sitecustomize.py and
orchestrator/nsys/memory_hook.py, copied), and the variables task.sh exports (`GH_RUN_MEMORY*`, the
folder first on `PYTHONPATH`). Off: nothing at all, and the job's script is what it was.

The hook writes into `<run>/artifacts/memory/` (`memory_files`), which is collected whatever the
job's `artifacts.include` says, as the job's analysis records are.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from orchestrator.core.base import Strict
from orchestrator.core.memory_files import MEMORY_DIR
from orchestrator.core.units import parse_mem_mib
from orchestrator.nsys.profile import ProfileSpec

HOOK_FOLDER = "memory_hook"
LOADER_NAME = "sitecustomize.py"
HOOK_NAME = "gh_run_memory_hook.py"


class MemoryHook(Strict):
    """The hook of a job with `profile.memory` on: where its files are, what task.sh exports."""

    folder: str = Field(description="The run folder's memory_hook/, first on PYTHONPATH.")
    env: dict[str, str] = Field(description="GH_RUN_MEMORY, _DIR, _MAX_EVENTS, _DUMP_AT.")


def hook_for(
    prof: ProfileSpec, run_dir: str, artifacts_dir: str, gpu_mem: str | None = None
) -> MemoryHook | None:
    """The job's hook, None when `profile.memory` is off. `gpu_mem`: the partition's GPU memory
    (its cluster file's `gpu_mem`), which the analysis holds the peak against."""
    if prof.memory == "off":
        return None
    from orchestrator.nsys import memory_hook as H  # its names; a job without the hook skips it

    # the window's end: cudaProfilerStop when nsys keys on it, else the process's exit
    dump_at = "profiler-stop" if prof.capture_range == "cudaProfilerApi" else "exit"
    return MemoryHook(
        folder=f"{run_dir}/{HOOK_FOLDER}",
        env={
            H.ENV_MODE: prof.memory,
            H.ENV_DIR: f"{artifacts_dir}/{MEMORY_DIR}",
            H.ENV_MAX_EVENTS: str(prof.memory_max_events or H.DEFAULT_MAX_EVENTS),
            H.ENV_DUMP_AT: dump_at,
            **({H.ENV_PARTITION: str(parse_mem_mib(gpu_mem) << 20)} if gpu_mem else {}),
        },
    )


def hook_sources() -> dict[str, str]:
    """`name in the run folder` → source: the loader and the hook (standard library only)."""
    here = Path(__file__).parent
    return {
        f"{HOOK_FOLDER}/{LOADER_NAME}": (here / "memory_sitecustomize.py").read_text(),
        f"{HOOK_FOLDER}/{HOOK_NAME}": (here / "memory_hook.py").read_text(),
    }
