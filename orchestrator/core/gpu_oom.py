"""A job that died of GPU out-of-memory, told from its log: PyTorch's own words when its caching
allocator cannot serve a request (`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
...`, and the older `RuntimeError: CUDA out of memory. Tried to allocate ... (GPU 0; ... total
capacity; ... free; ...)`), or CUDA's (`CUDA error: out of memory`, `CUBLAS_STATUS_ALLOC_FAILED`,
`cudaErrorMemoryAllocation`). The executors read the tails of a failed job's logs (SLURM's
`<job>_*_log.err`, the local executor's) and, when they hold such a line, give the run the
reason `GPU out of memory: ...`: `status` shows it (the state stays SLURM's FAILED, which retry
policies and campaigns key on), and `analyze RUN` explains it from the memory hook's dump.

Names only and `re`: `status` imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PREFIX = "GPU out of memory"
_SIZE = r"[\d.]+ ?(?:[KMGTP]?i?B|bytes)"
# torch >= 2.1: "... Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of
# which 1.23 GiB is free. ..."; older: "... Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB
# total capacity; 14.56 GiB already allocated; 3.75 MiB free; 14.60 GiB reserved ...)"
_TORCH = re.compile(
    rf"(?P<what>[\w.]*(?:OutOfMemoryError|RuntimeError)): CUDA out of memory\. Tried to allocate"
    rf" (?P<ask>{_SIZE})"
    # (torch 2.1's message spells it "capacty")
    rf"(?:\. GPU (?P<gpu>\d+) has a total capaci?ty of (?P<total>{_SIZE}) of which"
    rf" (?P<free>{_SIZE}) is free"
    rf"|\s*\(GPU (?P<gpu2>\d+); (?P<total2>{_SIZE}) total capacity;[^;]*;"
    rf" (?P<free2>{_SIZE}) free)?"
)
_CUDA = re.compile(
    r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
    r"|CUDA_ERROR_OUT_OF_MEMORY"
)


def match(tails: Iterable[str]) -> str | None:
    """`GPU out of memory: ...` from the first log tail that says so, None otherwise."""
    for text in tails:
        m = _TORCH.search(text)
        if m:
            gpu = m.group("gpu") or m.group("gpu2")
            total = m.group("total") or m.group("total2")
            free = m.group("free") or m.group("free2")
            where = f" of {total} on GPU {gpu}" if gpu is not None and total else ""
            free_part = f"; {free} free{where}" if free else ""
            return (
                f"{PREFIX}: tried to allocate {m.group('ask')}{free_part}"
                f" ({m.group('what').rsplit('.', 1)[-1]} in the job's log)"
            )
        c = _CUDA.search(text)
        if c:
            return f"{PREFIX}: {c.group(0)} (in the job's log)"
    return None


def is_gpu_oom(reason: str | None) -> bool:
    return bool(reason) and PREFIX in (reason or "")
