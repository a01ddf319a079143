"""Which cause each GPU-idle interval is claimed for, from its evidence (`idle_evidence`), with a
margin (issue 35 item 1).

Each label of the host window counts for one class:
- `input`: data-loading ranges and frames, a tensor built from Python data (`range-tensor`);
  waits on a lock, pipe or queue while DataLoader worker threads ran; host work that recurs
  before each batch's copy (below);
- `communication`: collective ranges, waits and frames;
- `sync`: CUDA synchronisation calls, waits and frames;
- `launch-bound`: the launch path (launching kernels into a GPU that ran out of work), and host
  code run between two kernels of one optimizer step (`idle_evidence.optimizer_spans`: the
  optimizer preparing its next launches; with leaf-only samples nothing else tells it from a
  loop's host work);
- `host-compute`: host work on the main thread that is not the batch's (numpy, torch's CPU
  operators, Python, sleeping), and the host code autograd's threads run while the main thread
  waits in `backward()` (a backward hook);
- `copy-staging`: the host side of copies from or to pageable memory: the main thread inside
  the CUDA call that issues one (the driver staging it through a bounce buffer), and releasing
  the mapped storage of the batch it has just copied (`idle_evidence`: `munmap` under
  `at::MapAllocator` right after the copy's call); what pinned memory removes with the copy;
- waits with no target (a lock, a pipe with no worker running, off the CPU) and autograd's
  threads waiting themselves are evidence of no class: they count against every claim.

Host work ("neutral": the interpreter, numerical libraries, CPU operators, a sleep, a read) says
what ran, not for whom. It is the batch's when it recurs and loading shows in it: each batch's
copy (the first host-to-device copy launched from the interval's start to 2 ms after its end)
has a preamble, the neutral host work of the intervals before it; the steps' baseline is the
25th percentile of the preambles (at least two of them); a preamble within `EXTRA` of it is all
recurring, a longer one gives the baseline to the recurring part (the part nearest the copy) and
the rest to host compute (the every-Nth-step work a loop adds: logging, evaluation). The
recurring part is input only where the preambles show loading somewhere (`loading_seen`:
data-loading ranges or frames, a tensor built from Python data, sleeps or reads of the main
thread): a loop's own per-step host code (the next batch drawn by one CPU operator, the loop's
bookkeeping) also recurs before each copy, and recurrence alone does not tell them apart, so
without loading it is ambiguous (`unclassified`, its evidence shown). Neutral host work before
no batch copy is host compute; before the only one, ambiguous (no recurrence to read).

An interval is claimed for the class with most evidence when that evidence covers `COVER` of its
host window and `MARGIN` times the next class (or the waits with no target); an interval whose
neutral host work splits into a recurring part and an extra one is claimed for both, in
proportion; anything else is `unclassified`, its shares kept in the evidence. The launch latency
after the window goes with the claim; a GPU that starts the launched work `LATE_NS` or more after
its launch waited for something other than the host: that wait is `unclassified`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrator.analysis.families import idle_evidence as E
from orchestrator.analysis.readers import cpu_samples

COVER = 0.5
MARGIN = 2.0
SPLIT_MIN = 0.25  # each side of a recurring/extra split holds at least this share of the window
EXTRA = 0.15  # a preamble this much over the baseline (and SLACK_NS) has extra host work
SLACK_NS = 1_000_000
LATE_NS = 1_000_000  # the GPU starting work this long after its launch waited for more than it
WORKER_SAMPLES = 2  # DataLoader worker samples that make a wait the loader's
CLASSES = ("input", "host-compute", "launch-bound", "sync", "communication", "copy-staging")
NEUTRAL = ("sleep", "io", "s-host", "range-op", "running", "unrecorded")
OPTIMIZER_HOST = ("s-host", "range-op", "running")  # host code, not a sleep or a read
BLOCKED = ("wait-python", "wait-lock", "s-wait", "off-cpu")


@dataclass
class Part:
    """One piece of evidence of a claim: what it is, the ns of the host window it covered, the
    names it carries (frames, functions, ranges)."""

    key: str
    ns: int
    names: list[str] = field(default_factory=list)


@dataclass
class Claim:
    """Part of an interval claimed for a class (or `unclassified`), with what showed it."""

    cls: str
    ns: int
    parts: list[Part] = field(default_factory=list)

    @property
    def what(self) -> str:
        return text(self.parts)


def text(parts: list[Part], n: int = 3) -> str:
    """Evidence parts, largest first: `key (`name`, ...) 12.3 ms`."""
    out = []
    for p in sorted(parts, key=lambda x: -x.ns)[:n]:
        top = cpu_samples.top(p.names, 3)
        named = " (" + ", ".join(f"`{x}`" for x in top) + ")" if top else ""
        out.append(f"{p.key}{named}" + (f" {_ms(p.ns)}" if p.ns else ""))
    return "; ".join(out)


@dataclass
class Scored:
    """Per interval: the class nanoseconds of its host window (CLASSES, then `none`: waits with
    no target, ambiguous host work), and its claims."""

    scores: Any  # [intervals, len(CLASSES) + 1]
    claims: list[list[Claim]] = field(default_factory=list)
    baseline_ns: int | None = None  # the preambles' baseline, where two or more were seen
    preambles: int = 0


def _col(ev: E.Evidence, *names: str) -> Any:
    return ev.ns[:, [E.L[n] for n in names]].sum(axis=1)


def split_neutral(ev: E.Evidence, neutral: Any) -> tuple[Any, Any, Any, int | None, int]:
    """(recurring, extra, ambiguous) neutral ns per interval, the baseline and the preamble
    count (module docstring)."""
    n = neutral.size
    rec = np.zeros(n, dtype=np.int64)
    extra = neutral.copy()
    amb = np.zeros(n, dtype=np.int64)
    groups: dict[int, list[int]] = {}
    for i in np.argsort(ev.a, kind="stable").tolist():
        if int(ev.batch[i]) >= 0:
            groups.setdefault(int(ev.batch[i]), []).append(i)
    if not groups:
        return rec, extra, amb, None, 0
    pre = {k: int(neutral[v].sum()) for k, v in groups.items()}
    if len(groups) < 2:
        for v in groups.values():
            amb[v] = neutral[v]
            extra[v] = 0
        return rec, extra, amb, None, 1
    base = int(np.quantile(np.array(list(pre.values())), 0.25, method="inverted_cdf"))
    for k, v in groups.items():
        if pre[k] <= base * (1 + EXTRA) + SLACK_NS:
            rec[v] = neutral[v]
            extra[v] = 0
            continue
        left = base
        for i in reversed(v):  # the part nearest the copy is the batch's
            take = min(int(neutral[i]), left)
            rec[i] += take
            extra[i] -= take
            left -= take
    if not loading_seen(ev, [i for v in groups.values() for i in v]):
        amb += rec  # recurring, but nothing says it loads: the loop's own host code as much
        rec = np.zeros(n, dtype=np.int64)
    return rec, extra, amb, base, len(groups)


def loading_seen(ev: E.Evidence, preamble: list[int]) -> bool:
    """Whether the preambles (intervals before a batch copy) show loading anywhere: data-loading
    ranges or frames (a tensor built from Python data among them), the main thread sleeping or
    reading (a storage read, a rate limit, a Dataset's own wait), or waiting while DataLoader
    workers ran. Sampled evidence is sparse (a sample a millisecond), so the steps' preambles
    are read together: loading is what the workload does each step, not in one step alone."""
    if not preamble:
        return False
    idx = np.asarray(preamble, dtype=np.int64)
    seen = _col(ev, "range-data", "range-tensor", "s-data", "sleep", "io")[idx]
    return bool((seen > 0).any() or (ev.workers[idx] >= WORKER_SAMPLES).any())


def score(ev: E.Evidence) -> Scored:
    """The class nanoseconds and claims of each interval (module docstring)."""
    n = ev.a.size
    window = np.maximum(ev.h - ev.a, 0)
    # host code run between two kernels of one optimizer step is the optimizer preparing its
    # next launches (the framework's overhead a fused optimizer or a CUDA graph removes), not
    # the loop's host work: it counts for launch-bound
    inside = ev.in_optimizer if ev.in_optimizer is not None else np.zeros(n, dtype=bool)
    opt_host = np.where(inside, _col(ev, *OPTIMIZER_HOST), 0)
    neutral = _col(ev, *NEUTRAL) - opt_host
    rec, extra, amb, base, pre = split_neutral(ev, neutral)
    blocked = _col(ev, *BLOCKED)
    loader = ev.workers >= WORKER_SAMPLES
    ag = ev.ns[:, E.L["wait-autograd"]]
    ag_tot = ev.autograd.sum(axis=1)
    frac = np.divide(ev.autograd, ag_tot[:, None], out=np.zeros_like(ev.autograd, dtype=float),
                     where=ag_tot[:, None] > 0)  # fmt: skip
    k = {kind: i for i, kind in enumerate(E.AUTOGRAD_KINDS)}
    sc = np.zeros((n, len(CLASSES) + 1), dtype=np.int64)
    sc[:, 0] = _col(ev, "range-data", "range-tensor", "s-data") + rec
    sc[:, 0] += np.where(loader, blocked, 0)
    sc[:, 1] = extra + (ag * frac[:, k["host"]]).astype(np.int64)
    sc[:, 2] = _col(ev, "s-launch") + opt_host + (ag * frac[:, k["launch"]]).astype(np.int64)
    sc[:, 3] = _col(ev, "cuda-sync", "wait-sync", "s-sync") + (ag * frac[:, k["sync"]]).astype(
        np.int64
    )
    sc[:, 4] = _col(ev, "range-comm", "wait-comm", "s-comm") + (ag * frac[:, k["comm"]]).astype(
        np.int64
    )
    sc[:, 5] = _col(ev, "copy-pageable", "release")
    sc[:, -1] = np.where(loader, 0, blocked) + amb + np.where(ag_tot > 0, 0, ag)
    sc[:, -1] += (ag * frac[:, k["waiting"]]).astype(np.int64)
    out = Scored(sc, baseline_ns=base, preambles=pre)
    for i in range(n):
        out.claims.append(_claims(ev, sc[i], int(window[i]), i, int(rec[i]), int(extra[i])))
    return out


def _claims(ev: E.Evidence, s: Any, window: int, i: int, rec: int, extra: int) -> list[Claim]:
    """The window's claims, and the launch latency after it; a late start (the GPU starting the
    work LATE_NS or more after its launch) waited for something other than the host: no host
    class is claimed for it."""
    length = int(ev.b[i] - ev.a[i])
    late = int(ev.b[i] - ev.h[i]) if window > 0 else 0
    if late < LATE_NS:
        return _window_claims(ev, s, window, i, rec, extra, length)
    got = _window_claims(ev, s, window, i, rec, extra, length - late)
    what = (
        f"the GPU started the work that ended the gap ({ev.next_kind[i]}) {_ms(late)}"
        " after its launch: it waited for something other than the host (another stream's"
        " event, a copy being staged, work the capture did not record)"
    )
    return [*got, Claim("unclassified", late, [Part(what, 0)])]


def _window_claims(
    ev: E.Evidence, s: Any, window: int, i: int, rec: int, extra: int, length: int
) -> list[Claim]:
    if window <= 0:
        return [Claim("unclassified", length, [Part(_early(ev, i), 0)])]
    order = np.argsort(-s[: len(CLASSES)], kind="stable")
    w = int(order[0])
    rival = max(int(s[int(order[1])]), int(s[-1]))
    if s[w] >= COVER * window and s[w] >= MARGIN * rival and s[w] > 0:
        return [Claim(CLASSES[w], length, describe(ev, i, CLASSES[w], rec, extra))]
    inp, hc = int(s[0]), int(s[1])
    others = int(s[2:].sum())
    if (
        rec >= SPLIT_MIN * window
        and extra >= SPLIT_MIN * window
        and inp + hc >= COVER * window
        and inp + hc >= MARGIN * others
    ):
        part = round(length * inp / (inp + hc))
        return [
            Claim("input", part, describe(ev, i, "input", rec, 0)),
            Claim("host-compute", length - part, describe(ev, i, "host-compute", 0, extra)),
        ]
    return [Claim("unclassified", length, [Part(_shares(s, window), 0)])]


def _early(ev: E.Evidence, i: int) -> str:
    kind = ev.next_kind[i]
    return (
        f"the GPU's next work ({kind}) was launched before the GPU went idle: it waited for"
        " something other than the host (another stream's event, a copy being staged)"
    )


def _shares(s: Any, window: int) -> str:
    parts = [f"{c} {100 * int(v) / window:.0f} %" for c, v in zip(CLASSES, s, strict=False)
             if v > 0]  # fmt: skip
    if s[-1] > 0:
        parts.append(
            f"waits with no target or ambiguous host work {100 * int(s[-1]) / window:.0f} %"
        )
    shown = ", ".join(parts) if parts else "nothing recorded"
    return f"no class outweighs the others by {MARGIN:g}x: {shown} of the host window"


def _names(ev: E.Evidence, i: int, *labels: str) -> list[str]:
    got: list[str] = []
    for lab in labels:
        got += ev.names.get((i, E.L[lab]) if lab != "autograd" else (i, -1), [])
    return got


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def describe(ev: E.Evidence, i: int, cls: str, rec: int, extra: int) -> list[Part]:
    """What showed `cls` in interval i."""
    ns = ev.ns[i]
    parts: list[Part] = []

    def add(v: float, key: str, names: list[str] | None = None) -> None:
        if v > 0:
            parts.append(Part(key, int(v), names or []))

    if cls == "input":
        add(ns[E.L["range-data"]], "ranges: data loading", _names(ev, i, "range-data"))
        add(ns[E.L["range-tensor"]], "operators: a tensor built from Python data",
            _names(ev, i, "range-tensor"))  # fmt: skip
        add(ns[E.L["s-data"]], "samples: data-loading frames", _names(ev, i, "s-data"))
        if ev.workers[i] >= WORKER_SAMPLES:
            add(sum(ns[E.L[x]] for x in BLOCKED),
                "the main thread waited while DataLoader worker threads ran",
                _names(ev, i, *BLOCKED))  # fmt: skip
        if rec:
            for key, v, names in _neutral(ev, i, rec):
                add(v, f"recurs before each batch's copy: the main thread {key}", names)
    elif cls == "host-compute":
        if extra:
            for key, v, names in _neutral(ev, i, extra):
                add(v, f"beyond the steps' recurring host work: the main thread {key}", names)
        add(ns[E.L["wait-autograd"]],
            "the main thread waited in backward() while autograd's thread ran host code",
            _names(ev, i, "autograd"))  # fmt: skip
    elif cls == "launch-bound":
        add(ns[E.L["s-launch"]], "samples: the launch path", _names(ev, i, "s-launch"))
        if ev.in_optimizer is not None and bool(ev.in_optimizer[i]):
            add(sum(int(ns[E.L[x]]) for x in OPTIMIZER_HOST),
                "host code between two kernels of one optimizer step: the optimizer preparing"
                " its next launches", _names(ev, i, "s-host", "range-op"))  # fmt: skip
        add(ns[E.L["wait-autograd"]], "autograd's thread launching", _names(ev, i, "autograd"))
    elif cls == "sync":
        add(ns[E.L["cuda-sync"]], "CUDA API: synchronisation calls of the main thread")
        add(ns[E.L["wait-sync"]], "OS runtime: waits under a CUDA sync", _names(ev, i, "wait-sync"))
        add(ns[E.L["s-sync"]], "samples: CUDA synchronisation", _names(ev, i, "s-sync"))
    elif cls == "copy-staging":
        add(ns[E.L["copy-pageable"]],
            "CUDA API: the main thread in calls that copy from or to pageable memory (the"
            " driver staging them)")  # fmt: skip
        add(ns[E.L["release"]],
            "OS runtime: the main thread releasing the mapped storage of the pageable batch"
            " it had just copied", _names(ev, i, "release"))  # fmt: skip
    elif cls == "communication":
        add(ns[E.L["range-comm"]], "ranges: collectives", _names(ev, i, "range-comm"))
        add(
            ns[E.L["wait-comm"]] + ns[E.L["s-comm"]],
            "waits and samples in communication libraries",
            _names(ev, i, "wait-comm", "s-comm"),
        )
    return parts or [Part(cls, 0)]


def _neutral(ev: E.Evidence, i: int, share: int) -> list[tuple[str, int, list[str]]]:
    """The neutral host work of interval i by kind, scaled to `share` of it."""
    ns = ev.ns[i]
    kinds = {
        "sleep": "slept",
        "io": "read",
        "s-host": "ran host code",
        "range-op": "ran operators",
        "running": "ran (on a CPU, not sampled)",
        "unrecorded": "ran code outside PyTorch for a millisecond or more (Kineto records no"
        " operator of any thread: the loop's own Python, a library that does not call torch,"
        " or a wait)",
    }
    tot = sum(int(ns[E.L[k]]) for k in kinds)
    if tot <= 0:
        return []
    return [
        (word, round(int(ns[E.L[k]]) * share / tot), _names(ev, i, k))
        for k, word in kinds.items()
        if ns[E.L[k]] > 0
    ]
