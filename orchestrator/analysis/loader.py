"""Dispatch of input paths to the readers, and the rank rule.

- `.sqlite` → nsys reader; `.json` / `.json.gz` → Kineto reader; a directory → every such file
  under it (JSON files only when they hold `traceEvents`, so manifests are skipped).
- Rank: Kineto `distributedInfo.rank`; else the file-name rule (`core.rank_from_name`:
  `rank3`, `.3.sqlite`, `_3.json.gz`); else the file's position among the inputs.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from orchestrator.analysis import core, kineto, nsys_sqlite
from orchestrator.analysis.metrics import Metrics, RankMetrics, Source, aggregate
from orchestrator.errors import UserError

SUFFIXES = (".sqlite", ".json", ".json.gz")


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".sqlite"):
        return "nsys"
    if name.endswith(".json") or name.endswith(".json.gz"):
        return "kineto"
    return None


def _looks_like_trace(path: Path) -> bool:
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return False
    return b'"traceEvents"' in head


def expand(paths: list[Path]) -> list[Path]:
    """Input files from files and directories, sorted, without duplicates."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and _kind(f) is not None
                and (_kind(f) == "nsys" or _looks_like_trace(f))
            )
            if not found:
                raise UserError(
                    f"{p}: no .sqlite or PyTorch-profiler .json/.json.gz files in it;"
                    " pass a run folder or trace files"
                )
            out.extend(found)
        elif p.is_file():
            if _kind(p) is None:
                raise UserError(
                    f"{p}: unknown file type; pass an nsys export (.sqlite) or a"
                    " PyTorch-profiler trace (.json or .json.gz)"
                )
            out.append(p)
        else:
            raise UserError(f"{p}: no such file or directory; pass an existing trace path")
    seen: set[Path] = set()
    uniq = []
    for f in out:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            uniq.append(f)
    return uniq


def analyze_paths(paths: list[Path], label: str | None = None) -> Metrics:
    """Analyse nsys SQLite exports and/or Kineto traces into one Metrics."""
    files = expand([Path(p) for p in paths])
    sources: list[Source] = []
    ranks: list[RankMetrics] = []
    for index, f in enumerate(files):
        by_name = core.rank_from_name(f)
        if _kind(f) == "nsys":
            rank, rule = (by_name, "file name") if by_name is not None else (index, "file order")
            src, rms = nsys_sqlite.read_nsys(f, rank, rule)
        else:
            data = kineto.load_trace(f)
            by_info = kineto.trace_rank(data)
            if by_info is not None:
                rank, rule = by_info, "distributedInfo.rank"
            elif by_name is not None:
                rank, rule = by_name, "file name"
            else:
                rank, rule = index, "file order"
            src, rms = kineto.read_kineto(f, rank, rule, data)
        sources.append(src)
        ranks.extend(rms)
    ranks.sort(key=lambda r: (r.rank, r.devices))
    return Metrics(label=label, sources=sources, ranks=ranks, aggregate=aggregate(ranks))
