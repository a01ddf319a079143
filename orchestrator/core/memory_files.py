"""The files of the memory hook (`profile.memory`; orchestrator/nsys/memory_hook.py writes
them): their folder among a run's artifacts and their names. Names only, no imports:
collection (local and over SSH), `status` and the analysis all ask it.

- `memory/memory.rank<R>.pickle`: the allocator's snapshot when the capture window ended or the
  process exited, with the hook's step marks under `gh_run`;
- `memory/memory-oom.rank<R>.pickle`: the same, taken when the allocator ran out of memory;
- `memory/oom.rank<R>.json`: what the out-of-memory observer was told (small, written first).
A rank whose task ran two processes that used CUDA has `.pid<N>` before the suffix for the
second.
"""

from __future__ import annotations

import re

MEMORY_DIR = "memory"
_DUMP_RE = re.compile(
    r"^(?:(?P<dump>memory|memory-oom)\.rank(?P<rank>\d+)(?:\.pid\d+)?\.pickle"
    r"|oom\.rank(?P<oom_rank>\d+)(?:\.pid\d+)?\.json)$"
)


def is_memory_file(rel: str) -> bool:
    """Whether an artifacts-relative path is one the hook wrote (`memory/<name>`)."""
    folder, _, name = rel.rpartition("/")
    return folder == MEMORY_DIR and bool(_DUMP_RE.match(name))


def dump_rank(name: str) -> tuple[int, bool] | None:
    """(rank, taken at an out of memory) of a snapshot file the hook named; None otherwise."""
    m = _DUMP_RE.match(name)
    if m is None or m.group("dump") is None:
        return None
    return int(m.group("rank")), m.group("dump") == "memory-oom"
