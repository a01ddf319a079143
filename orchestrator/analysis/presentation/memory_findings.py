"""What the memory family's figures mean and what to change, in the sources' terms (the PyTorch
book's chapter on single-GPU memory, the GH200 material on offloading and Unified Memory, NeMo's
knobs for the seed's runs). Each rule cites the figure that fired it (`Advice.evidence`):

- memory-oom: the allocator ran out of memory (a snapshot taken at the out of memory, or its
  `oom` event): what was asked, what was free, what held the rest, and the knob for what held
  most: a request that fits in the allocator's free cache but not in its largest free block is
  fragmentation (expandable segments); else the largest category's knob below.
- memory-leak: the allocated memory at a step's end grew by a median of at least `LEAK_BYTES`
  per step over at least `LEAK_STEPS` steps, and (allocator level) each step made that much it
  never freed (a batch that grows from step to step raises the step's end too, and frees its
  blocks): what grows per step and from which frame.
- memory-activations: activations are >= `ACTIVATIONS_PCT` % of the peak -> recompute them
  (activation checkpointing), or offload them to CPU memory (on GH200 over NVLink-C2C, as the
  seed measured).
- memory-optimizer: optimizer state is >= `OPTIMIZER_PCT` % of the peak -> a fused or 8-bit
  optimizer, ZeRO / the distributed optimizer (state sharded over ranks), LoRA (state of the
  adapters alone).
- memory-fragmentation: the allocator's cache (reserved, not allocated) is >= `CACHE_PCT` % of
  the reserved memory at its peak and >= `CACHE_BYTES` -> `expandable_segments:True`.
- memory-capacity: the peak is >= `CAPACITY_PCT` % of the GPU's memory (the partition's from the
  cluster file, else the device's or the process's cap) -> a smaller micro-batch with gradient
  accumulation; on GH200, activations offloaded to the Grace memory over NVLink-C2C or Unified
  Memory.

The findings are ordered by what each would give back, in bytes (`Advice.evidence`
`gives_back_bytes`): an out of memory first, a leak next (it grows without bound), then the
cache a fragmentation fix returns, the activations recomputation would drop, half the
optimizer state (8-bit moments keep a quarter, ZeRO over two ranks half), and the capacity
rule's overshoot. No rule fires without a memory history ("not measured", never a guess).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.analysis.families.memory_classes import LABELS
from orchestrator.analysis.memory_model import MemoryOom, MemoryUse
from orchestrator.core.human import size

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics
    from orchestrator.analysis.presentation.advice import Advice
    from orchestrator.analysis.settings import RunSettings

ACTIVATIONS_PCT = 30.0
OPTIMIZER_PCT = 25.0
CACHE_PCT = 30.0
CACHE_BYTES = 512 << 20
LEAK_BYTES = 1 << 20
LEAK_STEPS = 3
CAPACITY_PCT = 90.0
INFINITE = float(2**62)

TITLES = {
    "memory-oom": "The GPU ran out of memory",
    "memory-leak": "Memory grows every step",
    "memory-activations": "Activations hold the peak",
    "memory-optimizer": "Optimizer state holds the peak",
    "memory-fragmentation": "The allocator's cache holds memory it cannot use",
    "memory-capacity": "The peak is at the GPU's capacity",
}

KNOBS: dict[str, dict[str, str]] = {
    "memory-activations": {
        "nemo": "model.activations_checkpoint_granularity=full"
        " model.activations_checkpoint_method=uniform model.activations_checkpoint_num_layers=1"
        " (recompute in backward), or +model.cpu_offloading=True"
        " +model.cpu_offloading_num_layers=<N> (keep them in CPU memory: on GH200 over"
        " NVLink-C2C)",
        "reference": "--activation-checkpointing (recompute each block in backward), or"
        " --offload-activations (saved tensors in pinned CPU memory)",
        "generic": "activation checkpointing (torch.utils.checkpoint.checkpoint(block, x,"
        " use_reentrant=False) per layer), or save them in CPU memory"
        " (torch.autograd.graph.save_on_cpu(pin_memory=True)); a smaller micro-batch with"
        " gradient accumulation",
    },
    "memory-optimizer": {
        "nemo": "model.optim.name=distributed_fused_adam (optimizer state sharded across"
        " data-parallel ranks), or model.peft.peft_scheme=lora (state of the adapters only)",
        "reference": "--peft lora (state of the adapters only); --fused-adam keeps no extra"
        " temporaries",
        "generic": "a fused or 8-bit optimizer (torch.optim.AdamW(fused=True),"
        " bitsandbytes.optim.AdamW8bit), ZeRO / FSDP (state sharded across ranks), or LoRA",
    },
    "memory-fragmentation": {
        "nemo": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in workload.env",
        "reference": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in workload.env",
        "generic": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow"
        " instead of new ones for each new size)",
    },
    "memory-capacity": {
        "nemo": "a smaller model.micro_batch_size with the same model.global_batch_size"
        " (gradient accumulation); on GH200 +model.cpu_offloading=True (Grace memory over"
        " NVLink-C2C) or Unified Memory (the seed's rmm managed pool)",
        "reference": "a smaller --batch-size (accumulate gradients for the same global batch);"
        " on GH200 --offload-activations or --unified-memory",
        "generic": "a smaller micro-batch with gradient accumulation; on GH200 offload to the"
        " Grace memory over NVLink-C2C (activations, or Unified Memory)",
    },
    "memory-leak": {
        "nemo": "find what keeps a tensor each step (a metric or loss kept with its graph: call"
        " .item() or .detach().cpu())",
        "reference": "find what keeps a tensor each step (a metric or loss kept with its graph:"
        " .item() or .detach().cpu())",
        "generic": "do not keep GPU tensors across steps (losses or outputs appended to a list:"
        " .item() or .detach().cpu())",
    },
}


def knob(rule: str, kind: str) -> str:
    words = KNOBS[rule]
    return words.get(kind, words["generic"])


def _pct(part: int | None, whole: int | None) -> float:
    return 100.0 * part / whole if part and whole else 0.0


def _held(cats: list[tuple[str, int]], total: int | None, n: int = 4) -> str:
    parts = [
        f"{LABELS.get(name, name)} {size(b)}" + (f" ({_pct(b, total):.0f} %)" if total else "")
        for name, b in cats[:n]
        if b > 0
    ]
    return ", ".join(parts)


def rules(r: RankMetrics, kind: str = "generic", st: RunSettings | None = None) -> list[Advice]:
    """The memory rules that fire on one entry."""
    from orchestrator.analysis.presentation.advice import Advice

    use = r.memory
    if use is None:
        return []
    out: list[Advice] = []
    who = f"rank {r.rank}: "
    if use.oom is not None:
        out.append(_oom(r.rank, use, use.oom, kind))
    # at the allocator level a leak is blocks each step makes and never frees (a batch that
    # grows from step to step also raises the step's end, and frees its blocks); at the CUDA
    # level the reserved memory's growth is all there is
    survives = (
        use.retained_per_step_bytes if use.level == "allocator" else use.growth_per_step_bytes
    )
    if (
        use.growth_per_step_bytes is not None
        and use.growth_per_step_bytes >= LEAK_BYTES
        and use.growth_steps >= LEAK_STEPS
        and survives is not None
        and survives >= LEAK_BYTES
    ):
        where = f", allocated at {use.leak_where}" if use.leak_where else ""
        kept = (
            f"; each step allocates {size(use.retained_per_step_bytes)} it never frees{where}"
            if use.retained_per_step_bytes
            else ""
        )
        out.append(
            Advice(
                rule="memory-leak",
                rank=r.rank,
                cause="memory that survives every step",
                knob=knob("memory-leak", kind),
                evidence={
                    "growth_per_step_bytes": float(use.growth_per_step_bytes),
                    "growth_steps": float(use.growth_steps),
                    "retained_per_step_bytes": float(use.retained_per_step_bytes or 0),
                    "gives_back_bytes": INFINITE,
                },
                message=f"{who}allocated memory grows {size(use.growth_per_step_bytes)} per step"
                f" (median over {use.growth_steps} steps){kept}",
            )
        )
    peak = use.peak_allocated_bytes
    cats = {c.name: c.bytes for c in use.categories}
    act = cats.get("activations", 0)
    if peak and _pct(act, peak) >= ACTIVATIONS_PCT:
        ckpt = st.activation_checkpointing if st is not None else None
        checked = (
            f"activation checkpointing {'on' if ckpt.value else 'off'} ({ckpt.source})"
            if ckpt is not None
            else "no source said whether activation checkpointing was on"
        )
        out.append(
            Advice(
                rule="memory-activations",
                rank=r.rank,
                cause="activations saved for backward",
                knob=knob("memory-activations", kind),
                checked=checked,
                evidence={
                    "activations_bytes": float(act),
                    "activations_pct_of_peak": _pct(act, peak),
                    "gives_back_bytes": float(act),
                },
                message=f"{who}activations hold {size(act)} of the {size(peak)} peak"
                f" ({_pct(act, peak):.0f} %, {use.peak_phase or 'phase unknown'}"
                f"{_step(use.peak_step)})",
            )
        )
    state = cats.get("optimizer_state", 0)
    if peak and _pct(state, peak) >= OPTIMIZER_PCT:
        out.append(
            Advice(
                rule="memory-optimizer",
                rank=r.rank,
                cause="optimizer state",
                knob=knob("memory-optimizer", kind),
                evidence={
                    "optimizer_state_bytes": float(state),
                    "optimizer_state_pct_of_peak": _pct(state, peak),
                    "parameters_bytes": float(cats.get("parameters", 0)),
                    "gives_back_bytes": state / 2,
                },
                message=f"{who}optimizer state holds {size(state)} of the {size(peak)} peak"
                f" ({_pct(state, peak):.0f} %; parameters {size(cats.get('parameters', 0))})",
            )
        )
    cache = use.cache_at_reserved_peak_bytes
    if (
        cache is not None
        and use.fragmentation_pct is not None
        and use.fragmentation_pct >= CACHE_PCT
        and cache >= CACHE_BYTES
    ):
        on = use.expandable_segments is True
        out.append(
            Advice(
                rule="memory-fragmentation",
                rank=r.rank,
                cause="the allocator's cache of free blocks",
                knob=(
                    "expandable segments are on already: free the cache between phases"
                    " (torch.cuda.empty_cache()) or steady the request sizes (pad batches to a"
                    " few fixed lengths)"
                    if on
                    else knob("memory-fragmentation", kind)
                ),
                checked=f"expandable_segments {'on' if on else 'off'} (the snapshot's"
                " allocator settings)"
                if use.expandable_segments is not None
                else None,
                evidence={
                    "cache_bytes": float(cache),
                    "cache_pct_of_reserved": use.fragmentation_pct,
                    "reserved_peak_bytes": float(use.peak_reserved_bytes or 0),
                    "gives_back_bytes": float(cache),
                },
                message=f"{who}the allocator held {size(cache)} reserved but unallocated when its"
                f" reserved memory peaked at {size(use.peak_reserved_bytes)}"
                f" ({use.fragmentation_pct:.0f} %)",
            )
        )
    cap, cap_what = _capacity(use)
    top = max(use.peak_reserved_bytes or 0, use.peak_allocated_bytes or 0)
    if cap and top and _pct(top, cap) >= CAPACITY_PCT and use.oom is None:
        out.append(
            Advice(
                rule="memory-capacity",
                rank=r.rank,
                cause="the GPU's capacity",
                knob=knob("memory-capacity", kind),
                evidence={
                    "peak_bytes": float(top),
                    "capacity_bytes": float(cap),
                    "peak_pct_of_capacity": _pct(top, cap),
                    "gives_back_bytes": float(max(0, top - cap * CAPACITY_PCT / 100)),
                },
                message=f"{who}the peak ({size(top)}) is {_pct(top, cap):.0f} % of {cap_what}"
                f" ({size(cap)}); held by {_held(_ordered(use), top)}",
            )
        )
    return out


def _step(step: int | None) -> str:
    return f", step {step}" if step is not None else ""


def _ordered(use: MemoryUse) -> list[tuple[str, int]]:
    return [(c.name, c.bytes) for c in use.categories if c.bytes > 0]


def _capacity(use: MemoryUse) -> tuple[int | None, str]:
    """What the peak is held against: the partition's GPU memory (the job's cluster file), else
    the process's cap, else the device's capacity."""
    if use.partition_bytes:
        return use.partition_bytes, "the partition's GPU memory (the cluster file's gpu_mem)"
    if use.limit_bytes:
        return use.limit_bytes, "the process's cap (its memory fraction)"
    return use.capacity_bytes, "the device's memory"


def oom_knob(oom: MemoryOom, kind: str) -> tuple[str, str]:
    """(the rule whose knob answers this out of memory, why)."""
    cached, largest = oom.cached_free_bytes, oom.largest_free_block_bytes
    if cached is not None and largest is not None and largest < oom.requested_bytes <= cached:
        return "memory-fragmentation", (
            f"the request fits the {size(cached)} free in the cache but not its largest free"
            f" block ({size(largest)}): fragmentation"
        )
    held = [c for c in oom.categories if c.name != "cache" and c.bytes > 0]
    top = held[0].name if held else None
    if top == "optimizer_state":
        return "memory-optimizer", "optimizer state held the most"
    if top in ("activations", "temporaries", "inputs"):
        return "memory-activations", f"{LABELS[top]} held the most"
    return "memory-capacity", "the whole step does not fit"


def _oom(rank: int, use: MemoryUse, oom: MemoryOom, kind: str) -> Advice:
    from orchestrator.analysis.presentation.advice import Advice

    rule, why = oom_knob(oom, kind)
    held = [(c.name, c.bytes) for c in oom.categories if c.name != "cache" and c.bytes > 0]
    return Advice(
        rule="memory-oom",
        rank=rank,
        cause="out of GPU memory",
        knob=knob(rule, kind) + f" ({why})",
        evidence={
            "requested_bytes": float(oom.requested_bytes),
            "allocated_bytes": float(oom.allocated_bytes or 0),
            "cached_free_bytes": float(oom.cached_free_bytes or 0),
            "gives_back_bytes": INFINITE * 2,
        },
        message=oom_sentence(rank, oom) + (f"; held: {_held(held, oom.allocated_bytes)}"),
    )


def oom_sentence(rank: int, oom: MemoryOom) -> str:
    """`rank 0 ran out of GPU memory in forward, step 3: it asked for 512 MiB; free: ...`"""
    where = ""
    if oom.phase:
        where = f" in {oom.phase}" + (f", step {oom.step}" if oom.step is not None else "")
    free = []
    if oom.cached_free_bytes is not None:
        largest = (
            f", largest block {size(oom.largest_free_block_bytes)}"
            if oom.largest_free_block_bytes is not None
            else ""
        )
        free.append(f"{size(oom.cached_free_bytes)} in the allocator's cache{largest}")
    if oom.limit_bytes and oom.reserved_bytes is not None:
        room = max(0, oom.limit_bytes - oom.reserved_bytes)
        cap = "its cap" if oom.total_bytes and oom.limit_bytes < oom.total_bytes else "the device"
        free.append(f"{size(room)} more to reserve under {cap} of {size(oom.limit_bytes)}")
    if oom.device_free_bytes is not None:
        free.append(f"{size(oom.device_free_bytes)} free on the device (CUDA)")
    return (
        f"rank {rank} ran out of GPU memory{where}: it asked for {size(oom.requested_bytes)};"
        f" free: {'; '.join(free) or 'not recorded'}; allocated {size(oom.allocated_bytes)}"
    )


def findings(m: Metrics) -> list[Advice]:
    """Every memory rule that fired, ordered by what it would give back (the out of memory
    first, a leak next)."""
    kind = m.workload_kind
    out = [a for r in m.ranks for a in rules(r, kind, m.settings)]
    return sorted(out, key=lambda a: -a.evidence.get("gives_back_bytes", 0.0))
