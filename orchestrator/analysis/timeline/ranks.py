"""Which rank each trace is: from the trace first, from an explicit file-name pattern next, else
numbered in input order with a note (docs/metrics.md, "Inputs and ranks").

- Kineto: `distributedInfo.rank`;
- nsys: the rank variable (`RANK`, `SLURM_PROCID`, `PMI_RANK`, ...) of the environment nsys
  recorded for the profiled job; an export that holds several processes with GPU work gives
  one rank per process: `base * processes + index` (torchrun's node-rank numbering), where the
  index orders the processes by their first device, then pid;
- the file name (`rank_from_name`): `rank3`, `rank-3`, `procid2`, `_r3`, or gh-run's
  per-rank `name.3.sqlite`; never a timestamp or job id;
- else the lowest rank no other input holds, in input order (`file order`, with a note).
Two inputs that claim the same rank keep it for the first and renumber the second (noted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Claim:
    """What one rank (one process of one input file) says about itself."""

    path: Path
    by_trace: tuple[int, str] | None  # (rank, rule) read from the trace
    process: int = 0  # index among the file's processes with GPU work
    processes: int = 1


@dataclass
class Assigned:
    rank: int
    rule: str
    note: str | None = None


def assign(claims: list[Claim]) -> list[Assigned]:
    """Ranks for the claims, in their order (see the module docstring)."""
    out: list[Assigned | None] = []
    for c in claims:
        base: tuple[int, str] | None = c.by_trace
        if base is None:
            by_name = rank_from_name(c.path)
            base = (by_name, "file name") if by_name is not None else None
        if base is None:
            out.append(None)
            continue
        rank, rule = base
        if c.processes > 1:
            rank = rank * c.processes + c.process
            rule = f"{rule}, process {c.process + 1} of {c.processes}"
        out.append(Assigned(rank, rule))
    taken: dict[int, Path] = {}
    for i, (c, a) in enumerate(zip(claims, out, strict=True)):
        if a is None:
            continue
        if a.rank in taken:
            first = taken[a.rank]
            out[i] = Assigned(
                -1, "file order", f"rank {a.rank} ({a.rule}) is also {first.name}'s; renumbered"
            )
        else:
            taken[a.rank] = c.path
    free = 0
    final: list[Assigned] = []
    for c, a in zip(claims, out, strict=True):
        if a is not None and a.rank >= 0:
            final.append(a)
            continue
        while free in taken:
            free += 1
        taken[free] = c.path
        if a is not None:  # renumbered
            final.append(Assigned(free, a.rule, f"{a.note} to {free}"))
        elif c.processes > 1:
            final.append(
                Assigned(
                    free,
                    "file order",
                    f"no rank in the trace or its name: process {c.process + 1} of"
                    f" {c.processes} numbered {free} in input order",
                )
            )
        else:
            final.append(
                Assigned(
                    free,
                    "file order",
                    f"no rank in the trace or its name: numbered {free} in input order",
                )
            )
    return final


# explicit rank words anywhere: sft_rank12, rank-3, trace_procid-2, proc5
_RANK_WORD = re.compile(r"(?i)(?:rank|procid|proc)[_\-.]?(\d+)")
# `_r3`: a lone r before the number, between separators
_RANK_R = re.compile(r"(?i)(?:^|[._\-])r(\d+)(?=[._\-]|$)")
# gh-run's per-rank names (`-o name.%q{SLURM_PROCID}` gives sft.3.nsys-rep): a short number
# after a last `.`; a longer one is a timestamp (PyTorch's default
# `<worker>.<epoch_ms>.pt.trace.json`), and one after `_` or `-` as likely a job id
# (`sft_42.sqlite`, `slurm-1234.json`): neither is a rank
_RANK_SUFFIX = re.compile(r"\.(\d{1,4})$")
_STRIP = (".gz", ".json", ".sqlite", ".nsys-rep", ".trace", ".pt")


def rank_from_name(path: Path) -> int | None:
    """Rank encoded in a file name, or None.

    Rules, first match wins: `rank<N>` / `procid<N>` / `proc<N>` anywhere (`sft_rank3.sqlite`,
    `rank-3.json`); `r<N>` between separators (`sft_r3.json`); a number of at most four digits
    after the last `.` once known suffixes are stripped (`sft.3.sqlite`: what
    `-o name.%q{SLURM_PROCID}` gives). Never a longer number nor one after `_` or `-`:
    `host.1623143089861.pt.trace.json` (PyTorch's default name ends in a timestamp),
    `worker0.1623143089861.pt.trace.json`, `sft_4242817.sqlite` and `sft_42.sqlite` (job ids)
    say nothing about the rank."""
    name = path.name
    m = _RANK_WORD.search(name)
    if m:
        return int(m.group(1))
    stem = name
    changed = True
    while changed:
        changed = False
        for suf in _STRIP:
            if stem.lower().endswith(suf):
                stem = stem[: -len(suf)]
                changed = True
    m = _RANK_R.search(stem) or _RANK_SUFFIX.search(stem)
    return int(m.group(1)) if m else None
