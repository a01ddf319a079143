"""PyTorch memory snapshots among `analyze`'s inputs: which files are snapshots, which rank and
run each belongs to, and how each joins the run's other inputs.

A snapshot is no trace of its own: it is folded into the entry of its rank in the run its
traces make (the memory figures it gives replace those the trace's own memory events gave),
and a snapshot with no trace beside it (one taken by hand, or a run profiled with
`profile.tool: none`) makes an entry of its own, with memory and nothing else.

- Which files: any `.pickle`/`.pkl` named on the command line; in a folder, only the files the
  hook names (`memory_files`: `memory/memory.rank<R>.pickle`, `memory-oom.rank<R>.pickle`), so
  that a folder's other pickles are never read. Of a rank's two dumps (the window's end and
  the out of memory), the out-of-memory one is read: it is what ended the run.
- Which rank: the hook's own word (`gh_run.rank`: the process's RANK), else the file name's
  (`timeline.ranks.rank_from_name`), else 0.
- Which run: a snapshot and a trace are of one run when they lie in one gh-run run folder
  (the parent of their nearest `artifacts` folder), else in one folder (a hook's `memory/`
  folder counts as the folder that holds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.analysis.families import memory_use
from orchestrator.analysis.memory_model import MemoryUse
from orchestrator.analysis.metrics import RankMetrics, Source
from orchestrator.analysis.readers import torch_snapshot
from orchestrator.analysis.timeline.ranks import rank_from_name
from orchestrator.core.memory_files import MEMORY_DIR, dump_rank

SUFFIXES = (".pickle", ".pkl")
KIND = "torch-snapshot"


def is_snapshot(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def hook_dump(path: Path) -> bool:
    """A snapshot file the hook wrote (read when a folder is analysed)."""
    return path.parent.name == MEMORY_DIR and dump_rank(path.name) is not None


def home(path: Path) -> Path:
    """The run a file belongs to: its gh-run run folder, else its folder (a hook's `memory/`
    folder: the one above it)."""
    for d in path.parents:
        if d.name == "artifacts":
            return d.parent.resolve()
    folder = path.parent
    if folder.name == MEMORY_DIR and dump_rank(path.name) is not None:
        folder = folder.parent
    return folder.resolve()


@dataclass
class Snapshot:
    """One snapshot file read: its rank, how the rank was found, its run, its devices' use."""

    path: Path
    rank: int
    rank_rule: str
    home: Path
    uses: list[MemoryUse]
    notes: list[str] = field(default_factory=list)

    @property
    def use(self) -> MemoryUse | None:
        """The device the process used most (the most events; a training process uses one)."""
        return max(self.uses, key=lambda u: u.events) if self.uses else None


def choose(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """One snapshot per rank and run folder: the out-of-memory dump over the window's."""
    by_key: dict[tuple[Path, int | None, str], list[Path]] = {}
    for p in paths:
        named = dump_rank(p.name)
        key = (home(p), named[0] if named else None, p.name if named is None else "")
        by_key.setdefault(key, []).append(p)
    out: list[Path] = []
    notes = []
    for group in by_key.values():
        oom = [p for p in group if (d := dump_rank(p.name)) is not None and d[1]]
        if oom and len(group) > 1:
            out.extend(oom)
            rest = [p.name for p in group if p not in oom]
            notes.append(f"{', '.join(rest)}: not read; {oom[0].name} (the out of memory) is")
        else:
            out.extend(group)
    return sorted(out), notes


def read(path: Path, max_bytes: int | None = None) -> Snapshot:
    tls = torch_snapshot.read(path, max_bytes)
    uses = [memory_use.analyze(tl) for tl in tls]
    hook_rank = next((tl.rank for tl in tls if tl.rank is not None), None)
    if hook_rank is not None:
        rank, rule = hook_rank, "gh-run's memory hook (the process's RANK)"
    elif (named := rank_from_name(path)) is not None:
        rank, rule = named, "file name"
    else:
        rank, rule = 0, "only snapshot (no rank in it or its name)"
    return Snapshot(path, rank, rule, home(path), uses)


def source(s: Snapshot) -> Source:
    return Source(
        path=str(s.path),
        kind=KIND,
        rank=s.rank,
        rank_rule=s.rank_rule,
        notes=list(s.notes),
        open_with="PyTorch's memory viewer: https://pytorch.org/memory_viz (drop the file there)",
    )


def entry(s: Snapshot) -> RankMetrics:
    """A rank that has a snapshot and no trace: its memory and nothing else."""
    use = s.use
    return RankMetrics(
        rank=s.rank,
        devices=[use.device] if use is not None else [],
        source=str(s.path),
        memory=use,
        peak_gpu_memory_bytes=use.peak_allocated_bytes if use is not None else None,
        peak_gpu_memory_source=f"{s.path.name}: {use.source}" if use is not None else None,
    )


def fold(ranks: list[RankMetrics], snaps: list[Snapshot]) -> list[RankMetrics]:
    """Each snapshot into its rank's first entry (its memory replaces the trace's), or an entry
    of its own where no trace has its rank."""
    out = list(ranks)
    for s in snaps:
        use = s.use
        if use is None:
            continue
        at = next((i for i, r in enumerate(out) if r.rank == s.rank), None)
        if at is None:
            out.append(entry(s))
            continue
        r = out[at]
        notes = list(use.notes)
        if r.memory is not None:
            notes.append(f"{s.path.name} replaces the memory figures of {r.memory.source}")
        out[at] = r.model_copy(update={"memory": use.model_copy(update={"notes": notes})})
    return sorted(out, key=lambda r: (r.rank, r.devices))
