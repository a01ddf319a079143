"""What the memory family gives (`RankMetrics.memory`): one device's memory use over the history
a source recorded, the peak and what held it by category, the steps, a leak, fragmentation,
and an out of memory (docs/metrics.md, "Memory")."""

from __future__ import annotations

from typing import Literal

from orchestrator.core.base import Strict


class MemoryCategory(Strict):
    """One kind of memory at a moment (the peak, or the out of memory): its bytes and blocks
    then, the most it held at any moment of the history (`max_bytes`), and how its bytes were
    classed (the rules, largest share first: families/memory_classes.py)."""

    name: str
    bytes: int
    blocks: int = 0
    max_bytes: int = 0
    how: str = ""


class MemoryStep(Strict):
    """One training step of the history (between two ends of the first optimizer's step;
    the last one may be unfinished). Times in ns from the history's first event."""

    step: int
    start_ns: int
    end_ns: int
    finished: bool
    allocated_start: int | None = None
    allocated_end: int | None = None
    peak_bytes: int
    peak_phase: str
    reserved_end: int | None = None
    # bytes of the blocks allocated in this step and never freed (category retained)
    retained_bytes: int = 0


class MemoryOom(Strict):
    """The allocator ran out of memory: what was asked, what was free, what held the rest."""

    requested_bytes: int
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    # reserved but not allocated (free blocks in the allocator's cache), and the largest of
    # them: a request larger than that block but not larger than the cache is fragmentation
    cached_free_bytes: int | None = None
    largest_free_block_bytes: int | None = None
    # what CUDA said was free on the device; the process's cap (memory fraction x total)
    device_free_bytes: int | None = None
    limit_bytes: int | None = None
    total_bytes: int | None = None
    step: int | None = None
    phase: str | None = None
    categories: list[MemoryCategory] = []
    source: str = ""


class MemoryLane(Strict):
    """The history in equal buckets (at most `memory_use.LANE_BUCKETS`), for the report: in each
    bucket the allocated and reserved bytes at its highest moment, and what held them then."""

    start_ns: int
    bucket_ns: int
    allocated: list[int] = []
    reserved: list[int] = []
    categories: dict[str, list[int]] = {}
    # each step's end, ns from the history's start
    step_ends_ns: list[int] = []
    peak_ns: int | None = None


class MemoryUse(Strict):
    """One device's memory over the history one source recorded (see docs/metrics.md)."""

    source: str
    level: Literal["allocator", "cuda"]
    device: int
    events: int
    span_ns: int = 0
    # where the steps and phases came from (None: no marks; no step, no phase)
    marks: str | None = None
    stacks: bool = False
    # the history holds every allocation since the first use of the GPU (no ring buffer loss)
    whole: bool = True
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_at_ns: int | None = None
    peak_step: int | None = None
    peak_phase: str | None = None
    # what held the peak (allocated bytes by category, and the cache: reserved - allocated at
    # that moment), largest first
    categories: list[MemoryCategory] = []
    # reserved but not allocated at the reserved peak, and that over the reserved bytes
    cache_at_reserved_peak_bytes: int | None = None
    fragmentation_pct: float | None = None
    largest_free_block_bytes: int | None = None
    expandable_segments: bool | None = None
    alloc_conf: str | None = None
    # per finished step after the first: the median growth of the allocated bytes at the
    # step's end, and the median bytes each step allocated and never freed; the stack most of
    # the never-freed bytes came from
    growth_per_step_bytes: int | None = None
    retained_per_step_bytes: int | None = None
    growth_steps: int = 0
    leak_where: str | None = None
    steps: list[MemoryStep] = []
    oom: MemoryOom | None = None
    capacity_bytes: int | None = None
    limit_bytes: int | None = None
    # the GPU memory of the partition the job ran on (its cluster file's gpu_mem)
    partition_bytes: int | None = None
    lane: MemoryLane | None = None
    notes: list[str] = []

    def category(self, name: str) -> MemoryCategory | None:
        return next((c for c in self.categories if c.name == name), None)

    def category_bytes(self, name: str) -> int | None:
        c = self.category(name)
        return c.bytes if c is not None else None

    def category_max(self, name: str) -> int | None:
        c = self.category(name)
        return c.max_bytes if c is not None else None
