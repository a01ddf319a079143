"""Where the training steps are, when the workload did not say (issue 28 item 1).

A cascade of rules over one rank's timeline; the first rule that answers gives the steps, and the
answer says which rule it was and what evidence it used (`FoundSteps.rule`, `.evidence`). Steps
found by any rule are handed on as (name, start, duration) rows named `step_1`, `step_2`, ...,
so that the statistics, the step picture and the cross-rank skew treat them as they treat the
workload's own ranges.

1. `ranges`: the workload's own step ranges (NVTX in the default domain, Kineto's
   `ProfilerStep#N`): `step_names.step_rows`. Library ranges never count (`library_ranges`).
2. `optimizer`: the optimizer's kernels close each step. Kernels whose names belong to an
   optimizer family (`SPECIFIC`: Adam/AdamW/SGD/LAMB/Lion/Adagrad/RMSprop/Adafactor...; else
   `GENERIC`: PyTorch's and apex's multi-tensor `foreach` kernels, which training scripts run in
   the optimizer step) are grouped into bursts (no more than `MAX_INTERLEAVE` other kernels
   between two of them); the end of a burst's last kernel closes a step. The rule steps aside
   when the steps it would give do not hold about the same number of kernels (`SAME_KERNELS`):
   two bursts a step (a foreach `zero_grad` at the start, say) would give alternating steps.
3. `period`: the repeating kernel sequence. A kernel name that occurs at evenly spaced positions
   of the sequence (spacing within `PERIOD_SPREAD`) gives a candidate period P; the candidate is
   taken when the sequence matches itself shifted by P (`PERIOD_MATCH` of the names agree, for
   up to `PERIOD_CHECKS` periods); the largest such count (the shortest period) wins. A step's
   boundary is the place in the period where the GPU waits longest (the median over periods of
   the gap before each position): what a loop does between steps (loading data, logging) shows
   there; with no gap every place is as good.
4. `optimizer`, bursts joined: where multi-tensor kernels came in bursts that gave uneven
   steps and no period repeats (a step's kernels vary: checks that sync in some steps only), the
   bursts less than half the longest distance between two of them apart are one optimizer step:
   an eager optimizer whose foreach ops alternate with per-parameter kernels runs several bursts
   a step, and the longest distance is the forward and backward between two steps. It steps
   aside, as rule 2 does, when the steps would not hold about the same number of kernels.
5. `profiler-window`: the cudaProfilerStart/Stop window divided by the step count the run's own
   metrics.json says the window holds (`cuda_profiler_window` S:E): even steps, a mean only.
   Where the trace holds the start call but no stop call (nsys, told to end the capture at the
   stop, may keep no row of it), the window closes at the end of the capture's last CUDA work
   or call, and the evidence says so. This is the rule that finds the steps of a loop replayed
   as one CUDA graph a step: a graph launch is one GPU row, no kernel sequence to repeat.

Rules 2 to 4 count a step from a closing to the next. The first step opens where the capture
opens (the end of the cudaProfilerStart call, where the trace holds it; else the first GPU
activity) and is counted when it holds at least `FULL_STEP` of a step's kernels; after the last
closing (rule 2) the kernels are a partial step and are not counted. When no rule answers, the
answer is "no steps" and says why each rule stepped aside.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.kernel_names import short_kernel
from orchestrator.analysis.timeline.step_names import step_rows

SPECIFIC = re.compile(
    r"(?i)adam|sgd|(?<![a-z])lamb(?!da)|lion(?![a-z])|adagrad|rmsprop|adafactor|novograd"
    r"|adadelta|muon|shampoo|sophia"
)
GENERIC = re.compile(r"(?i)multi_tensor_apply|_foreach_|multi_tensor_")
MAX_INTERLEAVE = 8  # other kernels allowed between two optimizer kernels of one burst
SAME_KERNELS = 1.25  # the most kernels of a found step over the fewest
FULL_STEP = 0.9  # share of a step's kernels a first (or last) step must hold to count
MIN_PERIOD = 3  # kernels: a shorter "period" is one kernel name repeated, not a step
PERIOD_SPREAD = 0.05  # anchor spacings within this share of their mean
PERIOD_MATCH = 0.9  # share of names equal between a period and the next
PERIOD_CHECKS = 16  # periods compared
PROFILER_START = re.compile(r"^cu(da)?ProfilerStart")
PROFILER_STOP = re.compile(r"^cu(da)?ProfilerStop")


@dataclass
class FoundSteps:
    """The steps of a rank and how they were found."""

    rule: str  # "ranges" | "optimizer" | "period" | "profiler-window" | "none"
    evidence: str
    rows: list[tuple[str, int, int]] = field(default_factory=list)


def known_step_count(data: dict[str, Any]) -> tuple[int, str] | None:
    """(steps, which field) in a cudaProfilerApi window, from the workload's metrics.json: its
    `cuda_profiler_window` [S, E] (top level or under `config`)."""
    for where, d in (("cuda_profiler_window", data), ("config.cuda_profiler_window",
                                                      data.get("config"))):  # fmt: skip
        w = d.get("cuda_profiler_window") if isinstance(d, dict) else None
        if (
            isinstance(w, list)
            and len(w) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in w)
            and w[1] > w[0]
        ):
            return w[1] - w[0], f"{where} {w[0]}:{w[1]}"
    return None


def find(tl: T.RankTimeline, known: tuple[int, str] | None = None) -> FoundSteps:
    """The first rule of the cascade that answers (see the module docstring)."""
    own = step_rows(tl)
    if own:
        return FoundSteps("ranges", f"the workload's own step ranges ({len(own)} ranges)", own)
    asides: list[str] = ["no step ranges of the workload's own"]
    k = _kernels(tl)
    opened = _profiler_calls(tl)
    if k is not None:
        names, start, end = k
        for family, rx in (("optimizer", SPECIFIC), ("multi-tensor (foreach)", GENERIC)):
            found, why = _optimizer(tl, names, start, end, rx, family, opened)
            if found is not None:
                return found
            asides.append(why)
        found, why = _period(tl, names, start, end, opened)
        if found is not None:
            return found
        asides.append(why)
        if bool(tl.name_mask(GENERIC.search, names)[names].any()):
            found, why = _optimizer(tl, names, start, end, GENERIC, "multi-tensor (foreach)",
                                    opened, joined=True)  # fmt: skip
            if found is not None:
                return found
            asides.append(why)
    else:
        asides.append("no kernels to find a period in")
    found, why = _profiler_window(opened, known, _last_cuda(tl))
    if found is not None:
        return found
    asides.append(why)
    return FoundSteps("none", "no steps found: " + "; ".join(asides))


def _kernels(tl: T.RankTimeline) -> tuple[Any, Any, Any] | None:
    """Name ids, starts and ends of the kernels of the device with most kernels, by start."""
    g = tl.gpu
    m = g.kind == T.KERNEL
    if not bool(m.any()):
        return None
    dev = g.device[m]
    if int(dev.min()) != int(dev.max()):
        ids, counts = np.unique(dev, return_counts=True)
        m = m & (g.device == ids[int(np.argmax(counts))])
    s, e, n = g.start[m], g.end[m], g.name[m]
    order = np.argsort(s, kind="stable")
    return np.asarray(n)[order], np.asarray(s)[order], np.asarray(e)[order]


def _profiler_calls(tl: T.RankTimeline) -> tuple[int | None, int | None]:
    """(end of the first cudaProfilerStart, start of the last cudaProfilerStop) of the trace."""
    h = tl.host
    api = h.kind == T.CUDA_API
    if not bool(api.any()):
        return None, None
    out: list[int | None] = []
    for rx, first in ((PROFILER_START, True), (PROFILER_STOP, False)):
        m = api & tl.name_mask(rx.match, h.name[api])[h.name]
        if not bool(m.any()):
            out.append(None)
        else:
            out.append(int(h.end[m].min()) if first else int(h.start[m].max()))
    return out[0], out[1]


def _last_cuda(tl: T.RankTimeline) -> int | None:
    """The end of the capture's last GPU work or CUDA call (None: neither)."""
    ends = [int(tl.gpu.end.max())] if tl.gpu.size else []
    api = tl.host.kind == T.CUDA_API
    if bool(api.any()):
        ends.append(int(tl.host.end[api].max()))
    return max(ends) if ends else None


def _rows(bounds: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    return [(f"step_{i + 1}", s, e - s) for i, (s, e) in enumerate(bounds)]


def _steps_from_closings(
    close_idx: list[int],
    start: Any,
    end: Any,
    opened: tuple[int | None, int | None],
    tail_counts: bool,
) -> tuple[list[tuple[int, int]], list[int], str]:
    """Steps between closings (kernel index of each step's last kernel), the first from where
    the capture opens when it holds a full step, the last to the final kernel when
    `tail_counts` and it holds one; with the kernels per step and a note on what was left."""
    reach = np.maximum.accumulate(end)  # a step ends when all its kernels have
    bounds: list[tuple[int, int]] = []
    counts: list[int] = []
    for a, b in itertools.pairwise(close_idx):
        bounds.append((int(reach[a]), int(reach[b])))
        counts.append(b - a)
    typical = float(np.median(counts)) if counts else 0.0
    notes = []
    first_n = close_idx[0] + 1
    begin, open_how = (
        (opened[0], "the cudaProfilerStart call")
        if opened[0] is not None and opened[0] <= int(start[0])
        else (int(start[0]), "the first kernel")
    )
    if (typical and first_n >= FULL_STEP * typical) or (not typical and opened[0] is not None):
        bounds.insert(0, (begin, int(reach[close_idx[0]])))
        counts.insert(0, first_n)
        notes.append(f"the first step opens at {open_how}")
    else:
        notes.append(f"the {first_n} kernels before the first closing are a partial step")
    tail = int(start.size) - 1 - close_idx[-1]
    if tail:
        if tail_counts and typical and tail >= FULL_STEP * typical:
            bounds.append((int(reach[close_idx[-1]]), int(reach[-1])))
            counts.append(tail)
        else:
            notes.append(f"the {tail} kernels after the last closing are a partial step")
    return bounds, counts, "; ".join(notes)


def _optimizer(
    tl: T.RankTimeline,
    names: Any,
    start: Any,
    end: Any,
    rx: re.Pattern[str],
    family: str,
    opened: tuple[int | None, int | None],
    joined: bool = False,
) -> tuple[FoundSteps | None, str]:
    is_opt = tl.name_mask(rx.search, names)
    idx = np.flatnonzero(is_opt[names])
    if idx.size == 0:
        return None, f"no {family} kernels"
    # a burst ends where more than MAX_INTERLEAVE other kernels follow, or (steps of only a few
    # kernels) where the distance is over half the longest one; `joined` (module docstring,
    # rule 4): only where the distance is over half the longest one
    d = np.diff(idx)
    half = max(1, int(d.max()) // 2) if d.size else 1
    limit = half if joined else min(MAX_INTERLEAVE + 1, half)
    if joined:
        family = f"{family} bursts joined"
    cut = np.flatnonzero(d > limit)
    lasts = [int(x) for x in np.r_[idx[cut], idx[-1]]]
    example = tl.names[int(names[idx[0]])]
    bounds, counts, note = _steps_from_closings(lasts, start, end, opened, False)
    if not bounds:
        return None, f"{family} kernels close no whole step ({note})"
    if min(counts) * SAME_KERNELS < max(counts):
        return None, (
            f"{family} kernels come in {len(lasts)} bursts whose steps hold {min(counts)} to"
            f" {max(counts)} kernels: not one burst per step"
        )
    word = m.group(0) if (m := rx.search(example)) else family
    how = (
        f" (bursts less than {half} kernels apart are one optimizer step: its foreach ops"
        " alternate with per-parameter kernels)"
        if joined
        else ""
    )
    return FoundSteps(
        "optimizer",
        f"{family} kernels close each step ({idx.size} kernels named like `{word}` in"
        f" {len(lasts)} bursts{how}, e.g. {short_kernel(example, 60)}); {note}",
        _rows(bounds),
    ), ""


def _period(
    tl: T.RankTimeline, names: Any, start: Any, end: Any, opened: tuple[int | None, int | None]
) -> tuple[FoundSteps | None, str]:
    n = int(names.size)
    if n < 2 * MIN_PERIOD:
        return None, f"{n} kernels are too few for a repeating sequence"
    ids, inv, counts = np.unique(names, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")  # positions grouped by name, ascending within
    bounds_at = np.r_[0, np.cumsum(counts)]
    cand = np.flatnonzero((counts >= 2) & (counts <= n // MIN_PERIOD))
    # evenly spaced names, most occurrences (shortest period) first
    regular: list[tuple[int, int]] = []
    for c in cand[np.argsort(-counts[cand], kind="stable")].tolist():
        pos = order[bounds_at[c] : bounds_at[c + 1]]
        d = np.diff(pos)
        mean = float(d.mean())
        if mean >= MIN_PERIOD and float(d.max() - d.min()) <= PERIOD_SPREAD * mean:
            regular.append((c, int(counts[c])))
    tried: set[int] = set()
    for c, _ in regular:
        pos = order[bounds_at[c] : bounds_at[c + 1]]
        d = np.diff(pos)
        length = int(d.min())
        if length in tried:
            continue
        tried.add(length)
        checks = min(PERIOD_CHECKS, d.size)
        agree = [
            float(np.mean(names[p : p + length] == names[q : q + length]))
            for p, q in zip(pos[:checks].tolist(), pos[1 : checks + 1].tolist(), strict=True)
            if q + length <= n
        ]
        if not agree or min(agree) < PERIOD_MATCH:
            continue
        # where in the period the GPU waits longest: the step boundary
        reach = np.maximum.accumulate(end)
        gap = np.r_[0, np.maximum(start[1:] - reach[:-1], 0)]
        anchors = pos[pos + length <= n]
        grid = gap[anchors[:, None] + np.arange(length)[None, :]]
        j = int(np.argmax(np.median(grid, axis=0)))
        firsts = [int(a) + j for a in anchors.tolist()]
        if firsts[0] - int(d.mean()) >= 0:
            firsts.insert(0, firsts[0] - round(float(d.mean())))
        lasts = [f - 1 for f in firsts if 0 < f <= n - 1]
        if not lasts:
            continue
        bounds, _, note = _steps_from_closings(lasts, start, end, opened, True)
        if not bounds:
            continue
        who = short_kernel(tl.names[int(ids[c])], 60)
        return FoundSteps(
            "period",
            f"the kernel sequence repeats every {length} kernels (at least {min(agree) * 100:.0f} %"
            f" of the names agree over {len(agree)} periods; anchor {who} x"
            f" {int(counts[c])}); a step starts where the GPU waits longest in the period;"
            f" {note}",
            _rows(bounds),
        ), ""
    return None, (
        "no repeating kernel sequence (no evenly spaced kernel name whose period the sequence"
        " repeats)"
    )


# The profiler-window rule builds one row per step the workload says the window holds.
MAX_WINDOW_STEPS = 1_000_000
MIN_STEP_NS = 1_000


def _profiler_window(
    opened: tuple[int | None, int | None],
    known: tuple[int, str] | None,
    last: int | None = None,
) -> tuple[FoundSteps | None, str]:
    lo, hi = opened
    closed = "the cudaProfilerStart/Stop window"
    if lo is not None and hi is None and last is not None and last > lo:
        hi = last
        closed = (
            "the window from the cudaProfilerStart call to the end of the capture's last CUDA"
            " work (the trace holds no cudaProfilerStop call)"
        )
    if lo is None or hi is None or hi <= lo:
        return None, "no cudaProfilerStart/Stop window"
    if known is None:
        return None, (
            "a cudaProfilerStart/Stop window, but the run does not say how many steps it holds"
        )
    count, where = known
    # the workload's word is a side input: a count past one step per microsecond of the
    # window, or past MAX_WINDOW_STEPS, says nothing real and would build that many rows
    most = min(MAX_WINDOW_STEPS, (hi - lo) // MIN_STEP_NS)
    if count > most:
        return None, (
            f"{where} says {count} steps in a {(hi - lo) / 1e6:.3f} ms cudaProfilerStart/Stop"
            f" window: more than {most} (one per {MIN_STEP_NS // 1000} us, at most"
            f" {MAX_WINDOW_STEPS}), not used"
        )
    width = (hi - lo) / count
    bounds = [(lo + round(i * width), lo + round((i + 1) * width)) for i in range(count)]
    return FoundSteps(
        "profiler-window",
        f"{closed} divided by the {count} steps of {where}: even steps (their mean, not each"
        " step's time)",
        _rows(bounds),
    ), ""


def realign(
    rows: list[tuple[str, int, int]], a: Any, h: Any, input_ns: Any
) -> tuple[list[tuple[str, int, int]], int]:
    """Steps that end where the workload's own step ends (issue 35 item 4): a step found by the
    optimizer or period rule closes with its last kernel, but what the loop does after the
    optimizer (logging, a sync, evaluation) is still that step, and the next step starts with
    its data fetch. Each boundary that opens a GPU-idle interval (start `a`, host window up to
    `h`, the next work's launch) moves to where the interval's input begins: `h` less the time
    claimed for input (`input_ns`, the part nearest the next batch's copy); with no input, to
    `h` (the next step's first launch). (rows, boundaries moved)."""
    if len(rows) < 2 or a.size == 0:
        return rows, 0
    order = np.argsort(a, kind="stable")
    sa = a[order]
    names = [n for n, _, _ in rows]
    starts = [s for _, s, _ in rows]
    ends = [s + d for _, s, d in rows]
    moved = 0
    for k in range(len(rows) - 1):
        t = ends[k]
        i = int(np.searchsorted(sa, t))
        if i >= sa.size or sa[i] != t:
            continue  # no examined idle interval opens at this boundary
        j = int(order[i])
        new = int(max(a[j], h[j] - min(int(input_ns[j]), int(h[j] - a[j]))))
        if new == t:
            continue
        moved += 1
        ends[k] = starts[k + 1] = new
    return [(n, s, e - s) for n, s, e in zip(names, starts, ends, strict=True)], moved
