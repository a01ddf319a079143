"""What a range's name says about the training loop: a training step (`step_family`: its
family, `step_pattern`: its name with the step number as `*`) or a wait for input data
(`is_data_wait`). The names workloads give their NVTX / profiler ranges (`ProfilerStep#3`,
`train_step 12`, `iteration-4`, `get_batch`), and the host annotations so named (`step_rows`);
`step_rules.py` finds steps that carry no name."""

from __future__ import annotations

import re

from orchestrator.analysis.timeline import model as T

_STEP_RE = re.compile(
    r"(?i)^\s*(?P<fam>profilerstep|train(?:ing)?[ _-]?step|step|iteration|iter)"
    r"\s*[#:_ -]?\s*(?P<num>\d+)?\s*$"
)
_DATA_WAIT_RE = re.compile(r"(?i)dataloader|data[_ ]?load|get_batch|next_batch|data_wait|^data$")


def step_family(name: str) -> str | None:
    """Family of a training-step range name (numbers stripped), or None."""
    m = _STEP_RE.match(name)
    if not m:
        return None
    fam = m.group("fam").lower().replace(" ", "_").replace("-", "_")
    return fam + ("_N" if m.group("num") else "")


def step_pattern(name: str) -> str | None:
    """`step_12` → `step_*`, `ProfilerStep#3 [gpu]` → `ProfilerStep#* [gpu]`: the name with its
    step number replaced by `*`, for numbered training-step ranges; None for any other name."""
    base, gpu = (name[:-6], " [gpu]") if name.endswith(" [gpu]") else (name, "")
    m = _STEP_RE.match(base)
    if not m or m.group("num") is None:
        return None
    return base[: m.start("num")] + "*" + base[m.end("num") :] + gpu


def is_data_wait(name: str) -> bool:
    """True for ranges that say the step waits for input data."""
    return bool(_DATA_WAIT_RE.search(name))


def step_rows(tl: T.RankTimeline) -> list[tuple[str, int, int]]:
    """(name, start, duration) of the host annotations named like training steps."""
    h = tl.host
    ann = h.kind == T.ANNOTATION
    is_step = tl.name_mask(lambda n: step_family(n) is not None, h.name[ann])
    m = ann & is_step[h.name] & (h.end >= h.start) if h.size else None
    if m is None or not bool(m.any()):
        return []
    return [
        (tl.names[i], s, e - s)
        for i, s, e in zip(h.name[m].tolist(), h.start[m].tolist(), h.end[m].tolist(), strict=True)
    ]
