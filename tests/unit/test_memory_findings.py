"""The memory rules (presentation/memory_findings.py) on figures made here: each fires on the
figure its threshold names and not below it, they are ordered by what each gives back, an out of
memory picks the knob of what held it (fragmentation when the request fits the cache but not its
largest block), and the capacity is the partition's first, then the process's cap, then the
device's."""

from __future__ import annotations

from orchestrator.analysis.memory_model import MemoryCategory, MemoryOom, MemoryUse
from orchestrator.analysis.metrics import Aggregate, CrossRank, Metrics, RankMetrics
from orchestrator.analysis.presentation import memory_changes, memory_findings
from orchestrator.analysis.presentation.verdict import verdict

GIB = 2**30


def use(peak: int = 10 * GIB, **cats: int) -> MemoryUse:
    categories = [MemoryCategory(name=k, bytes=v, max_bytes=v) for k, v in cats.items()]
    return MemoryUse(
        source="stand-in", level="allocator", device=0, events=10, peak_allocated_bytes=peak,
        peak_reserved_bytes=peak, categories=categories, peak_step=2, peak_phase="backward",
    )  # fmt: skip


def run(*ranks: RankMetrics) -> Metrics:
    """A run of these entries (no sources: made here)."""
    return Metrics(sources=[], ranks=list(ranks), aggregate=Aggregate(), cross_rank=CrossRank())


def rules_of(u: MemoryUse, kind: str = "generic") -> list[str]:
    r = RankMetrics(rank=0, devices=[0], source="x", memory=u)
    return [a.rule for a in memory_findings.rules(r, kind)]


def test_activations_and_optimizer_fire_at_their_thresholds() -> None:
    assert rules_of(use(activations=3 * GIB, parameters=7 * GIB)) == ["memory-activations"]
    assert rules_of(use(activations=3 * GIB - 1, parameters=7 * GIB + 1)) == []
    assert rules_of(use(optimizer_state=int(2.5 * GIB), parameters=int(7.5 * GIB))) == [
        "memory-optimizer"
    ]
    assert rules_of(use(optimizer_state=int(2.5 * GIB) - 1, parameters=int(7.5 * GIB))) == []


def test_knobs_in_the_words_of_the_workload() -> None:
    r = RankMetrics(rank=0, devices=[0], source="x", memory=use(activations=9 * GIB))
    (nemo,) = memory_findings.rules(r, "nemo")
    assert "activations_checkpoint_granularity" in nemo.knob and "cpu_offloading" in nemo.knob
    (ref,) = memory_findings.rules(r, "reference")
    assert "--activation-checkpointing" in ref.knob


def test_fragmentation_needs_a_share_and_a_size() -> None:
    u = use(activations=1 * GIB)
    u.cache_at_reserved_peak_bytes, u.fragmentation_pct = 4 * GIB, 40.0
    assert "memory-fragmentation" in rules_of(u)
    u.fragmentation_pct = 29.0
    assert "memory-fragmentation" not in rules_of(u)
    u.fragmentation_pct, u.cache_at_reserved_peak_bytes = 40.0, 100 << 20
    assert "memory-fragmentation" not in rules_of(u)


def test_a_leak_needs_growth_and_blocks_each_step_keeps() -> None:
    u = use()
    u.growth_per_step_bytes, u.growth_steps, u.retained_per_step_bytes = 12 << 20, 5, 12 << 20
    assert rules_of(u) == ["memory-leak"]
    u.retained_per_step_bytes = 0  # a growing batch: the step's end rises, nothing is kept
    assert rules_of(u) == []
    u.retained_per_step_bytes, u.growth_steps = 12 << 20, 2
    assert rules_of(u) == []


def test_capacity_is_the_partitions_then_the_cap_then_the_device() -> None:
    u = use(peak=90 * GIB, parameters=90 * GIB)
    u.capacity_bytes = 141 * GIB
    assert "memory-capacity" not in rules_of(u)
    u.partition_bytes = 96 * GIB  # a GH200 partition (the cluster file's gpu_mem)
    r = RankMetrics(rank=0, devices=[0], source="x", memory=u)
    (a,) = [x for x in memory_findings.rules(r, "nemo") if x.rule == "memory-capacity"]
    assert "partition" in a.message and "micro_batch_size" in a.knob and "C2C" in a.knob
    u.partition_bytes, u.limit_bytes = None, 95 * GIB
    assert "memory-capacity" in rules_of(u)


def test_the_order_is_what_each_gives_back() -> None:
    u = use(peak=20 * GIB, activations=7 * GIB, optimizer_state=8 * GIB, parameters=5 * GIB)
    assert rules_of(u)[:2] == ["memory-activations", "memory-optimizer"]
    m = run(RankMetrics(rank=0, devices=[0], source="x", memory=u))
    # activations give back 7 GiB, half the optimizer state 4 GiB
    assert [a.rule for a in memory_findings.findings(m)] == [
        "memory-activations",
        "memory-optimizer",
    ]
    u.growth_per_step_bytes, u.growth_steps, u.retained_per_step_bytes = 2 << 20, 4, 2 << 20
    assert memory_findings.findings(m)[0].rule == "memory-leak"


def oom(requested: int, cached: int, largest: int, **cats: int) -> MemoryOom:
    return MemoryOom(
        requested_bytes=requested, allocated_bytes=sum(cats.values()),
        reserved_bytes=sum(cats.values()) + cached, cached_free_bytes=cached,
        largest_free_block_bytes=largest, limit_bytes=24 * GIB, total_bytes=80 * GIB,
        device_free_bytes=50 * GIB, step=3, phase="forward",
        categories=[MemoryCategory(name=k, bytes=v) for k, v in cats.items()],
    )  # fmt: skip


def test_an_out_of_memory_leads_with_the_knob_of_what_held_it() -> None:
    frag = oom(2 * GIB, cached=6 * GIB, largest=1 * GIB, activations=10 * GIB)
    assert memory_findings.oom_knob(frag, "generic")[0] == "memory-fragmentation"
    acts = oom(8 * GIB, cached=1 * GIB, largest=1 * GIB, activations=10 * GIB, parameters=4 * GIB)
    assert memory_findings.oom_knob(acts, "generic")[0] == "memory-activations"
    state = oom(8 * GIB, 0, 0, optimizer_state=12 * GIB, parameters=4 * GIB)
    assert memory_findings.oom_knob(state, "generic")[0] == "memory-optimizer"
    text = memory_findings.oom_sentence(3, acts)
    assert text.startswith("rank 3 ran out of GPU memory in forward, step 3: it asked for 8.00 GiB")
    assert "under its cap of 24.00 GiB" in text and "50.00 GiB free on the device" in text
    u = use(activations=10 * GIB)
    u.oom = acts
    m = run(RankMetrics(rank=3, devices=[0], source="x", memory=u))
    assert memory_findings.findings(m)[0].rule == "memory-oom"
    v = verdict(m, [])
    assert v.memory and v.memory[0].rule == "memory-oom"


def test_what_changed_says_the_category_that_moved() -> None:
    a = run(RankMetrics(rank=0, devices=[0], source="a",
                        memory=use(peak=5 * GIB, activations=1 * GIB)))  # fmt: skip
    b = run(RankMetrics(rank=0, devices=[0], source="b",
                        memory=use(peak=9 * GIB, activations=5 * GIB)))  # fmt: skip
    said = memory_changes.sentence(a, b)
    assert said is not None and said.startswith("memory: activations at the peak +4.00 GiB")
    assert "the peak grew 4.00 GiB" in said
    assert memory_changes.sentence(a, a) is None
    assert memory_changes.sentence(a, run()) is None
