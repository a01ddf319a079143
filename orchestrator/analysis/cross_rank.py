"""The cross-rank view (docs/metrics.md, "Across ranks"): each metric's spread over the entries
(min / median / max, the worst rank named), step-time skew, collective-start skew, and the
likely straggler with its evidence.

Collectives are matched by the id NCCL gives every rank's instance of one operation where the
exports hold it (nsys 2025.6+ with NCCL 2.28+: `nsys_nccl`, (commHash, seqNumber) or
operationId; the operations on every entry, in the first entry's start order). Else they are the
communication kernels (HTA: `^nccl.*Kernel`) of each entry in start order: the k-th collective
of every rank is the same collective (a communicator's ranks issue the same collectives in the
same order), so they are matched by position: over the whole trace when every entry holds the
same number, else within each training step present on every entry (by step number), else the
first N of each (noted). `SkewStats.how` says which. Start skew of a collective = latest start
- earliest start; the rank that starts last holds the others back (they wait inside the
collective: their copy of the kernel lasts longer). HTA's straggler analysis uses the same
signal (the start of the dominant collective, normalised per iteration). Start times of
different nodes are only as comparable as their clocks.

Straggler rule: the entry that starts last in at least `LATE_SHARE` of the matched collectives
and whose lateness (its start - the median start of the others) at the worst collective of a
step is at least `LATE_MIN_NS` and `LATE_MIN_STEP_SHARE` of the median step; without
collectives, the entry whose median step time is at least `SLOW_STEP` times the median
over entries.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

import numpy as np

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.families.stats import quantile
from orchestrator.analysis.metrics import CrossRank, RankMetrics, RankSpread, SkewStats, Straggler
from orchestrator.analysis.rank_metrics import CrossRankInput
from orchestrator.analysis.timeline.step_names import step_family
from orchestrator.core.human import dur as human_dur

LATE_SHARE = 0.6
LATE_MIN_NS = 20_000
LATE_MIN_STEP_SHARE = 0.01
SLOW_STEP = 1.10


def labels(rs: list[RankMetrics]) -> list[str]:
    """`rank 3`, or `rank 3 dev 1` where a rank has several entries."""
    count: dict[int, int] = {}
    for r in rs:
        count[r.rank] = count.get(r.rank, 0) + 1
    return [
        f"rank {r.rank} dev {','.join(map(str, r.devices))}"
        if count[r.rank] > 1
        else f"rank {r.rank}"
        for r in rs
    ]


def spreads(rs: list[RankMetrics], names: list[str]) -> list[RankSpread]:
    """Each metric of the catalogue's spread view (`catalogue.views.SPREAD`) over the entries
    that measure it; metrics that are 0 everywhere are left out."""
    out = []
    for row in views.run_rows("spread"):
        worse = row.metric.worse or "higher"
        vals = [
            (v, names[i]) for i, r in enumerate(rs) if (v := views.spread_value(row, r)) is not None
        ]
        if len(vals) < 2 or not any(v for v, _ in vals):
            continue
        lo = min(vals, key=lambda x: x[0])
        hi = max(vals, key=lambda x: x[0])
        out.append(
            RankSpread(
                metric=row.label,
                unit=row.unit,
                min=lo[0],
                median=statistics.median(v for v, _ in vals),
                max=hi[0],
                min_rank=lo[1],
                max_rank=hi[1],
                worst_rank=hi[1] if worse == "higher" else lo[1],
                worse=worse,
                key=row.metric.key,
            )
        )
    return out


_NUM = re.compile(r"(\d+)\D*$")


def _step_table(c: CrossRankInput) -> dict[Any, tuple[int, int]]:
    """step key -> (start, duration) of the entry's training steps (the family with most
    ranges, as `host.steps` picks); key = the step number, else the position."""
    fams: dict[str, list[tuple[str, int, int]]] = {}
    for name, start, dur in c.steps:
        fam = step_family(name)
        if fam is not None:
            fams.setdefault(fam, []).append((name, start, dur))
    if not fams:
        return {}
    _, rows = max(fams.items(), key=lambda kv: (len(kv[1]), sum(d for *_, d in kv[1])))
    rows.sort(key=lambda x: x[1])
    numbered = [(_NUM.search(n), s, d) for n, s, d in rows]
    if all(m is not None for m, _, _ in numbered):
        table = {int(m.group(1)): (s, d) for m, s, d in numbered if m is not None}
        if len(table) == len(rows):
            return table
    return {i: (s, d) for i, (_, s, d) in enumerate(rows)}


def _skew(matrix: Any, names: list[str], how: str) -> SkewStats:
    """SkewStats of a (events x entries) matrix: spread per event, who is latest (max)."""
    spread = matrix.max(axis=1) - matrix.min(axis=1)
    latest = matrix.argmax(axis=1)
    real = spread > 0
    counts = np.bincount(latest[real], minlength=matrix.shape[1])
    top = int(counts.argmax()) if real.any() else None
    s = np.sort(spread)
    return SkewStats(
        matched=int(matrix.shape[0]),
        median_ns=float(np.median(s)),
        p90_ns=quantile(s.tolist(), 0.9),
        max_ns=int(s[-1]),
        latest_rank=names[top] if top is not None else None,
        latest_share_pct=100.0 * counts[top] / matrix.shape[0] if top is not None else 0.0,
        how=how,
    )


def _by_id(cross: list[CrossRankInput]) -> tuple[Any, Any, str] | None:
    """(starts, ends) matrices of the NCCL operations every entry ran, matched by the id their
    ranks share (`nsys_nccl`), in the first entry's start order; None when an entry has none."""
    if not all(c.nccl_ops is not None and c.nccl_ops.size for c in cross):
        return None
    tables = []
    for c in cross:
        ops = c.nccl_ops
        keys = list(zip(ops.key_a.tolist(), ops.key_b.tolist(), strict=True))
        if len(set(keys)) != len(keys):  # an id twice on one rank: not an id to match by
            return None
        tables.append(dict(zip(keys, zip(ops.start.tolist(), ops.end.tolist(), strict=True),
                               strict=True)))  # fmt: skip
    common = set(tables[0])
    for t in tables[1:]:
        common &= set(t)
    if not common:
        return None
    order = sorted(common, key=lambda k: tables[0][k])
    starts = np.array([[t[k][0] for t in tables] for k in order], dtype=np.int64)
    ends = np.array([[t[k][1] for t in tables] for k in order], dtype=np.int64)
    first = cross[0].nccl_ops
    unmatched = sum(len(t) for t in tables) - len(common) * len(tables)
    left = f"; {unmatched} operations not on every rank left out" if unmatched else ""
    return (
        starts,
        ends,
        (
            f"{len(order)} NCCL operations matched by their shared id ({first.key_name},"
            f" {first.table}){left}"
        ),
    )


def _collective_matrix(
    cross: list[CrossRankInput], steps: list[dict[Any, tuple[int, int]]]
) -> tuple[Any, Any, str] | None:
    """(starts, ends) matrices (collectives x entries) and how they were matched: by the id
    NCCL gives every rank's instance of an operation where the exports hold one, else by
    position."""
    found = _by_id(cross)
    if found is not None:
        return found
    counts = [c.collectives.start.size for c in cross]
    if min(counts) == 0:
        return None
    if len(set(counts)) == 1:
        starts = np.stack([c.collectives.start for c in cross], axis=1)
        ends = np.stack([c.collectives.end for c in cross], axis=1)
        return starts, ends, f"all {counts[0]} collectives of each rank, by position"
    common = set(steps[0]) if all(steps) else set()
    for t in steps[1:]:
        common &= set(t)
    s_rows: list[Any] = []
    e_rows: list[Any] = []
    for key in sorted(common):
        per = []
        for c, t in zip(cross, steps, strict=True):
            lo, dur = t[key]
            m = (c.collectives.start >= lo) & (c.collectives.start < lo + dur)
            per.append((c.collectives.start[m], c.collectives.end[m]))
        n = min(p[0].size for p in per)
        if n:
            s_rows.append(np.stack([p[0][:n] for p in per], axis=1))
            e_rows.append(np.stack([p[1][:n] for p in per], axis=1))
    if s_rows:
        return (
            np.concatenate(s_rows),
            np.concatenate(e_rows),
            f"by position within each of {len(common)} steps present on every rank",
        )
    n = min(counts)
    starts = np.stack([c.collectives.start[:n] for c in cross], axis=1)
    ends = np.stack([c.collectives.end[:n] for c in cross], axis=1)
    return starts, ends, f"the first {n} collectives of each rank (their counts differ: {counts})"


def view(rs: list[RankMetrics], cross: list[CrossRankInput]) -> CrossRank:
    """The cross-rank view of the entries (ranks and devices) of one analysis."""
    if len(rs) < 2:
        return CrossRank(entries=len(rs))
    names = labels(rs)
    out = CrossRank(entries=len(rs), metrics=spreads(rs, names))
    steps = [_step_table(c) for c in cross]
    step_ns: float | None = None
    n_steps = 1
    if all(steps):
        common = set(steps[0])
        for t in steps[1:]:
            common &= set(t)
        if common:
            keys = sorted(common)
            durs = np.array([[t[k][1] for t in steps] for k in keys], dtype=np.int64)
            out.step_time_skew = _skew(
                durs, names, f"durations of the {len(keys)} steps present on every rank"
            )
            step_ns = float(np.median(durs))
            n_steps = len(keys)
    found = _collective_matrix(cross, steps)
    if found is not None:
        starts, ends, how = found
        out.collective_start_skew = _skew(starts, names, how)
        out.straggler = _late_straggler(rs, names, starts, ends, step_ns, n_steps)
    elif out.step_time_skew is not None:
        out.straggler = _slow_straggler(rs, names, steps)
    if found is None and any(
        c.collectives.start.size or (c.nccl_ops is not None and c.nccl_ops.size) for c in cross
    ):
        out.notes.append("some ranks have no communication kernels: collectives not matched")
    return out


def _late_straggler(
    rs: list[RankMetrics],
    names: list[str],
    starts: Any,
    ends: Any,
    step_ns: float | None,
    n_steps: int,
) -> Straggler | None:
    n_coll, n = starts.shape
    latest = starts.argmax(axis=1)
    spread = starts.max(axis=1) - starts.min(axis=1)
    real = spread > 0
    if not real.any():
        return None
    counts = np.bincount(latest[real], minlength=n)
    cand = int(counts.argmax())
    share = counts[cand] / n_coll
    others = np.delete(starts, cand, axis=1)
    late = starts[:, cand] - np.median(others, axis=1)
    late_med = float(np.median(late))
    # how late it is at the worst collective of a step (often the step's first: later ones
    # queue behind it on the communication stream): the mean of the n_steps largest lateness
    k = max(1, min(n_steps, late.size))
    per_step = float(np.sort(late.clip(min=0))[-k:].mean())
    need = max(LATE_MIN_NS, LATE_MIN_STEP_SHARE * step_ns if step_ns else 0)
    if share < LATE_SHARE or per_step < need:
        return None
    dur = ends - starts
    own = float(np.median(dur[:, cand]))
    rest = float(np.median(np.delete(dur, cand, axis=1)))
    r = rs[cand]
    step = f" ({100 * per_step / step_ns:.1f}% of the median step)" if step_ns else ""
    return Straggler(
        rank=r.rank,
        entry=names[cand],
        rule="starts collectives last",
        evidence={
            "late_in_pct_of_collectives": 100.0 * share,
            "matched_collectives": float(n_coll),
            "late_us_per_step": per_step / 1e3,
            "median_late_us": late_med / 1e3,
            "max_late_us": float(late.max()) / 1e3,
            "median_start_skew_us": float(np.median(spread)) / 1e3,
            "collective_us_on_straggler": own / 1e3,
            "collective_us_on_others": rest / 1e3,
        },
        message=(
            f"{names[cand]} starts its collectives last in {100 * share:.0f}% of"
            f" {n_coll} matched collectives, up to {human_dur(per_step)} late per step{step};"
            f" the others spend {human_dur(rest)} in each collective against"
            f" {human_dur(own)} on {names[cand]}: they wait for it"
        ),
    )


def _slow_straggler(
    rs: list[RankMetrics], names: list[str], steps: list[dict[Any, tuple[int, int]]]
) -> Straggler | None:
    med = [float(np.median([d for _, d in t.values()])) for t in steps]
    cand = int(np.argmax(med))
    typical = statistics.median(med)
    if typical <= 0 or med[cand] < SLOW_STEP * typical:
        return None
    r = rs[cand]
    return Straggler(
        rank=r.rank,
        entry=names[cand],
        rule="slowest steps",
        evidence={
            "median_step_ms": med[cand] / 1e6,
            "median_step_ms_over_ranks": typical / 1e6,
            "slower_pct": 100.0 * (med[cand] / typical - 1),
        },
        message=(
            f"{names[cand]}'s median step takes {med[cand] / 1e6:,.2f} ms,"
            f" {100 * (med[cand] / typical - 1):.0f}% more than the median over ranks"
            f" ({typical / 1e6:,.2f} ms); no collectives to compare"
        ),
    )
