"""How `analyze` prints the memory family's figures (`RankMetrics.memory`): an out of memory
first of all (what was asked, what was free, what held the rest, the knob), then, after the
metrics table, each entry's peak and what held it by category, growth per step and the
allocator's cache, and the memory findings (presentation/memory_findings.py)."""

from __future__ import annotations

from orchestrator.analysis.families.memory_classes import LABELS
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.metrics import Metrics, RankMetrics
from orchestrator.analysis.presentation import memory_findings
from orchestrator.cli.piped import Out
from orchestrator.cli.wrapped import print_wrapped
from orchestrator.core.escape import markup
from orchestrator.core.human import dur, size

MAX_ENTRIES = 8  # entries whose memory is printed (the rest: --json, report)


def memory_only(m: Metrics) -> bool:
    """Every input is a memory snapshot: no trace, no table of GPU time."""
    return bool(m.sources) and all(s.kind == "torch-snapshot" for s in m.sources)


def print_oom(m: Metrics, console: Out) -> None:
    """An out of memory leads: what was asked, what was free, what held the rest, the knob."""
    for r in m.ranks:
        use = r.memory
        if use is None or use.oom is None:
            continue
        oom = use.oom
        console.print("[bold red]GPU out of memory[/]")
        print_wrapped(console, memory_findings.oom_sentence(r.rank, oom), "  ")
        held = [c for c in oom.categories if c.bytes > 0]
        if held:
            print_wrapped(
                console,
                "held: " + ", ".join(f"{LABELS.get(c.name, c.name)} {size(c.bytes)}" for c in held),
                "  ",
            )
        rule, why = memory_findings.oom_knob(oom, m.workload_kind)
        print_wrapped(console, f"knob: {memory_findings.knob(rule, m.workload_kind)} ({why})", "  ")


def print_memory(m: Metrics, console: Out) -> None:
    """Each entry's memory, then the memory findings."""
    shown = [r for r in m.ranks if r.memory is not None]
    if not shown and memory_only(m):
        console.print("memory: the snapshots hold no event and no allocated block", markup=False)
    for r in shown[:MAX_ENTRIES]:
        assert r.memory is not None
        _entry(r, r.memory, console, len(m.ranks) > 1)
    if len(shown) > MAX_ENTRIES:
        console.print(f"memory: {len(shown) - MAX_ENTRIES} more entries: --json or gh-run report")
    for a in memory_findings.findings(m):
        if a.rule == "memory-oom":
            continue  # said first, above the table
        checked = f" (checked: {markup(a.checked)})" if a.checked else ""
        console.print(
            f"[bold yellow]advice[/] {markup(a.rule)}: {markup(a.message)}; knob:"
            f" {markup(a.knob)}{checked}"
        )


def _entry(r: RankMetrics, use: MemoryUse, console: Out, named: bool) -> None:
    who = f" rank {r.rank} dev {use.device}" if named else ""
    marks = f"; phases from {use.marks}" if use.marks else "; no step marks"
    print_wrapped(
        console, f"memory{who}: {use.source}; {use.events:,} events over {dur(use.span_ns)}{marks}"
    )
    if use.level == "cuda":
        peak = f"peak reserved {size(use.peak_reserved_bytes)}"
    else:
        peak = f"peak {size(use.peak_allocated_bytes)} allocated"
        if use.peak_reserved_bytes is not None:
            peak += f", {size(use.peak_reserved_bytes)} reserved"
    if use.peak_step is not None:
        peak += f" (step {use.peak_step}, {use.peak_phase})"
    cap = use.partition_bytes or use.limit_bytes or use.capacity_bytes
    if cap:
        peak += f"; of {size(cap)}"
    print_wrapped(console, peak, "  ")
    cats = [c for c in use.categories if c.bytes > 0 or c.max_bytes > 0]
    total = use.peak_allocated_bytes or 0
    if cats:
        print_wrapped(
            console,
            "at the peak: "
            + ", ".join(
                f"{LABELS.get(c.name, c.name)} {size(c.bytes)}"
                + (f" ({100 * c.bytes / total:.0f} %)" if total and c.name != "cache" else "")
                for c in cats
                if c.bytes > 0
            ),
            "  ",
        )
        highs = [c for c in cats if c.name != "cache" and c.max_bytes > c.bytes]
        if highs:
            print_wrapped(
                console,
                "each at its own high: "
                + ", ".join(f"{LABELS.get(c.name, c.name)} {size(c.max_bytes)}" for c in highs),
                "  ",
            )
    extra = []
    if use.growth_per_step_bytes is not None:
        extra.append(
            f"growth per step {size(use.growth_per_step_bytes)} (median of {use.growth_steps})"
        )
    if use.fragmentation_pct is not None:
        extra.append(
            f"cache at the reserved peak {size(use.cache_at_reserved_peak_bytes)}"
            f" ({use.fragmentation_pct:.0f} % of reserved)"
        )
    if extra:
        print_wrapped(console, "; ".join(extra), "  ")
    for note in use.notes:
        print_wrapped(console, f"note: {note}", "  ")
