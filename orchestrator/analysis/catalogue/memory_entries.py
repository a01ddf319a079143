"""The memory family's metrics (`families/memory_use.py`, `RankMetrics.memory`), declared once:
the peak and what held it by category, fragmentation, growth per step. Kept apart from
`entries.py` (which lists them in `CATALOGUE`) so that the memory metrics move as one piece.

A run without a memory history (no snapshot, no Kineto `[memory]` or nsys memory-usage events)
reads "not measured" for every one, never 0. The categories need the allocator's own history
(a PyTorch snapshot or Kineto's `[memory]` events): nsys sees only what the allocator reserved
from CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.analysis.catalogue.model import Metric, Need, Sources

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics

GROUP = "Memory use"


def _recorded(m: Metrics) -> bool:
    return any(r.memory is not None for r in m.ranks)


def _allocator(m: Metrics) -> bool:
    return any(r.memory is not None and r.memory.level == "allocator" for r in m.ranks)


ALL_KINDS = frozenset({"nsys-sqlite", "kineto-json", "torch-snapshot"})
ALLOCATOR_KINDS = frozenset({"kineto-json", "torch-snapshot"})
RECORDED = Sources(
    ALL_KINDS,
    Need(
        "a memory history: profile.memory's snapshot, Kineto profile_memory, nsys"
        " --cuda-memory-usage",
        _recorded,
    ),
)
ALLOCATOR = Sources(
    ALLOCATOR_KINDS,
    Need("the allocator's history: profile.memory's snapshot or Kineto profile_memory", _allocator),
)
# where a metric shows beyond the layouts that place it (views.py)
VIEWS = frozenset({"campaign"})


def _use(get: Callable[[RankMetrics], float | int | None]) -> Callable[[RankMetrics], float | None]:
    def read(r: RankMetrics) -> float | None:
        if r.memory is None:
            return None
        v = get(r)
        return None if v is None else float(v)

    return read


def _category(name: str) -> Callable[[RankMetrics], float | None]:
    def read(r: RankMetrics) -> float | None:
        if r.memory is None or r.memory.level != "allocator":
            return None
        return float(r.memory.category_bytes(name) or 0)

    return read


CATEGORIES = [
    ("parameters", "parameters", "the model's weights and buffers"),
    ("gradients", "gradients", "gradients: made in backward, held after it"),
    ("optimizer_state", "optimizer state", "the optimizer's state (Adam's two moments)"),
    ("activations", "activations", "tensors saved in forward for backward"),
    ("temporaries", "temporaries", "scratch freed where it was made"),
    ("inputs", "inputs and outputs", "batches and outputs held across a step"),
    ("retained", "retained across steps", "made in a step and never freed: leaks, caches"),
    ("cache", "allocator cache", "reserved by the allocator, not allocated (fragmentation)"),
]

MEMORY: list[Metric] = [
    Metric("mem_peak_allocated_bytes", GROUP, "peak allocated", "bytes",
           "the most memory the caching allocator had handed to tensors at one moment of the"
           " history (what torch.cuda.max_memory_allocated reads)",
           rank=_use(lambda r: r.memory.peak_allocated_bytes if r.memory else None),
           across="max", better="lower", sources=ALLOCATOR, views=VIEWS),
    Metric("mem_peak_reserved_bytes", GROUP, "peak reserved", "bytes",
           "the most memory the allocator held from CUDA at one moment (its segments; nsys:"
           " cudaMalloc - cudaFree)",
           rank=_use(lambda r: r.memory.peak_reserved_bytes if r.memory else None),
           across="max", better="lower", sources=RECORDED, views=VIEWS),
    *[
        Metric(f"mem_{key}_bytes", GROUP, f"{label} at the peak", "bytes",
               f"{what}: bytes held at the moment of peak allocation (families/memory_classes.py"
               " says how each block is classed)",
               rank=_category(key), across="max", better="lower", sources=ALLOCATOR,
               views=VIEWS)
        for key, label, what in CATEGORIES
    ],
    Metric("mem_fragmentation_pct", GROUP, "allocator cache at its peak", "%",
           "reserved but not allocated, percent of the reserved memory, when the reserved"
           " memory peaked (free blocks the cache keeps; fragmentation when requests do not fit"
           " them)",
           rank=_use(lambda r: r.memory.fragmentation_pct if r.memory else None),
           across="max", better="lower", sources=ALLOCATOR, views=VIEWS),
    Metric("mem_growth_per_step_bytes", GROUP, "growth per step", "bytes",
           "median rise of the allocated memory from one step's end to the next (steps after"
           " the first); above 0: memory that survives every step (a leak)",
           rank=_use(lambda r: r.memory.growth_per_step_bytes if r.memory else None),
           across="max", better="lower", sources=RECORDED, views=VIEWS),
]  # fmt: skip
