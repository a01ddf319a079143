"""One device's memory timeline, as every memory reader gives it and the memory family reads it.

The sources differ in what they see (docs/metrics.md, "Memory"):
- PyTorch's allocator snapshot (`readers/torch_snapshot.py`): every allocation and free of the
  caching allocator with its block size, the segments it reserved from CUDA, often the Python
  stack of each allocation, and (from gh-run's hook) the step phases: `level` "allocator";
- Kineto `[memory]` events (`readers/kineto_memory.py`): the same allocations and frees with the
  allocator's running totals, no stacks; phases from the trace's operators;
- nsys `CUDA_GPU_MEMORY_USAGE_EVENTS` (`readers/nsys_memory.py`): what the process took from
  and gave back to CUDA (cudaMalloc / cudaFree: the allocator's segments), `level` "cuda": the
  reserved memory only, nothing of what the allocator handed to tensors.

Events are columns in time order (`MemoryEvents`); the allocations they make are paired into
blocks with a lifetime (`Blocks`, made by the family); `Marks` say where each step and phase of
training began. Times are nanoseconds on the source's clock (a snapshot's Unix microseconds
times 1000).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

I64 = np.int64

# MemoryEvents.action
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE = 0, 1, 2, 3, 4
SEGMENT_MAP, SEGMENT_UNMAP, OOM, SNAPSHOT = 5, 6, 7, 8
ACTIONS = {
    "alloc": ALLOC,
    "free_requested": FREE_REQUESTED,
    "free_completed": FREE_COMPLETED,
    "segment_alloc": SEGMENT_ALLOC,
    "segment_free": SEGMENT_FREE,
    "segment_map": SEGMENT_MAP,
    "segment_unmap": SEGMENT_UNMAP,
    "oom": OOM,
    "snapshot": SNAPSHOT,
}
# what grows the reserved memory (segments from CUDA, or pages mapped into an expandable
# segment) and what shrinks it
RESERVE = (SEGMENT_ALLOC, SEGMENT_MAP)
RELEASE = (SEGMENT_FREE, SEGMENT_UNMAP)

# MemoryTimeline.marks: the hook's marks (memory_hook.py), a source's own (optimizer annotations,
# step ranges) in the same words; STEP_END: the end of a training step (the first optimizer's
# step() returned), which the readers add
STEP_START, FWD_BEGIN, BWD_BEGIN, BWD_END, OPT_BEGIN, OPT_END, STEP_END = 0, 1, 2, 3, 4, 5, 6
MARK_NAMES = {
    "step_start": STEP_START,
    "fwd_begin": FWD_BEGIN,
    "bwd_begin": BWD_BEGIN,
    "bwd_end": BWD_END,
    "opt_begin": OPT_BEGIN,
    "opt_end": OPT_END,
}

# phase of a moment in a step (`phases`)
SETUP, FORWARD, BACKWARD, AFTER_BACKWARD, OPTIMIZER, UNKNOWN = 0, 1, 2, 3, 4, 5
PHASE_NAMES = {
    SETUP: "before the first step",
    FORWARD: "forward",
    BACKWARD: "backward",
    AFTER_BACKWARD: "after backward",
    OPTIMIZER: "optimizer step",
    UNKNOWN: "forward or backward",
}


@dataclass(frozen=True)
class Frame:
    """One frame of an allocation's Python stack."""

    filename: str
    name: str
    line: int


@dataclass
class MemoryEvents:
    """One device's allocator (or CUDA) events, in time order: columns of equal length."""

    t_ns: Any  # int64; where the source has no times, the event's index (notes say so)
    action: Any  # int8 (`ACTIONS`)
    addr: Any  # int64 (an OOM's: -1)
    size: Any  # int64 bytes (an OOM's: the request)
    stack: Any  # int32 index into `MemoryTimeline.stacks`, -1: none recorded

    @classmethod
    def empty(cls) -> MemoryEvents:
        z = np.zeros(0, dtype=I64)
        return cls(z, np.zeros(0, dtype=np.int8), z, z, np.zeros(0, dtype=np.int32))

    @property
    def size_n(self) -> int:
        return int(self.t_ns.size)


@dataclass
class LiveBlock:
    """A block the allocator held when the source's history begins or ends (a snapshot's
    segments): its address, size and the stack it was allocated from."""

    addr: int
    size: int
    stack: int = -1


@dataclass
class Segment:
    """A segment at the end of the history (a snapshot's `segments`): its size and its free
    (inactive) blocks, for the largest request it could still serve."""

    size: int
    free_blocks: list[int] = field(default_factory=list)
    expandable: bool = False


@dataclass
class OomInfo:
    """What the allocator was told when it ran out of memory."""

    t_ns: int
    requested: int
    device_free: int | None = None  # what CUDA said was free on the device
    limit: int | None = None  # the process's cap (memory fraction x total), else the total
    total: int | None = None
    source: str = ""


@dataclass
class MemoryTimeline:
    """One device of one rank: its events and what the source said around them."""

    source: str  # "torch snapshot", "Kineto [memory] events", "nsys memory-usage events"
    level: str  # "allocator" (allocated and reserved) | "cuda" (reserved only)
    device: int
    events: MemoryEvents
    stacks: list[tuple[Frame, ...]] = field(default_factory=list)
    # blocks allocated before the first event that were still held when the history ends, and
    # their reserved memory at the first event (a ring buffer drops the oldest events)
    start_allocated: int | None = None
    start_reserved: int | None = None
    # the source's own running totals after each event, where it writes them (Kineto's
    # `Total Allocated` and `Total Reserved`): they are the curves, the pairs give the blocks
    allocated: Any = None
    reserved: Any = None
    # blocks held at the end (a snapshot's active blocks), and the segments then
    end_blocks: list[LiveBlock] | None = None
    end_segments: list[Segment] | None = None
    # (t_ns, kind) from `MARK_NAMES`, in time order; `marks_source` says where they came from
    marks: list[tuple[int, int]] = field(default_factory=list)
    marks_source: str | None = None
    oom: OomInfo | None = None
    # the device's capacity and the process's cap where the source says (bytes)
    total_memory: int | None = None
    limit: int | None = None
    # the GPU memory of the partition the job was rendered for (its cluster file's gpu_mem)
    partition_memory: int | None = None
    # the allocator's settings (PYTORCH_CUDA_ALLOC_CONF), where the source says
    expandable_segments: bool | None = None
    alloc_conf: str | None = None
    mode: str | None = None  # the hook's: timeline | snapshot (None: not the hook's)
    max_events: int | None = None
    rank: int | None = None
    notes: list[str] = field(default_factory=list)
