"""The GPU's idle gaps of one entry (between the merged intervals of its activity), summarised:
their length distribution (`gap_stats`: count, total, mean, p50, p90, max and the buckets of
GAP_EDGES_NS) and the busy fraction over the span (`busy_timeline`: what the report draws)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from orchestrator.analysis.metrics import Bucket, GapStats, Timeline

GAP_EDGES_NS = [0, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000]
# gaps per step of the loops below (bounded temporaries on a long export)
CHUNK = 1 << 20


def gap_stats(gap_starts: Any, gap_ends: Any) -> GapStats:
    """Distribution of gap lengths (gap_ends[i] - gap_starts[i]; int64 arrays)."""
    n = len(gap_starts)
    if n == 0:
        return GapStats(buckets=_buckets([0] * len(GAP_EDGES_NS), [0] * len(GAP_EDGES_NS)))
    lens = np.asarray(gap_ends, dtype=np.int64) - np.asarray(gap_starts, dtype=np.int64)
    total = int(lens.sum())
    mx = int(lens.max())
    edges = np.array(GAP_EDGES_NS[1:])
    cnt = np.zeros(len(GAP_EDGES_NS), dtype=np.int64)
    tot = np.zeros(len(GAP_EDGES_NS), dtype=np.float64)
    # float sums of integer ns are exact below 2**53
    for lo in range(0, n, CHUNK):
        part = lens[lo : lo + CHUNK]
        idx = np.searchsorted(edges, part, side="right")
        cnt += np.bincount(idx, minlength=len(GAP_EDGES_NS))
        tot += np.bincount(idx, weights=part, minlength=len(GAP_EDGES_NS))
    counts = [int(c) for c in cnt]
    totals = [int(t) for t in tot]
    # last: the quantiles partition `lens` in place instead of a copy
    p50, p90 = (float(v) for v in np.quantile(lens, [0.5, 0.9], overwrite_input=True))
    return GapStats(
        count=n,
        total_ns=total,
        mean_ns=total / n,
        p50_ns=p50,
        p90_ns=p90,
        max_ns=mx,
        buckets=_buckets(counts, totals),
    )


def _buckets(counts: list[int], totals: list[int]) -> list[Bucket]:
    out = []
    for i, lo in enumerate(GAP_EDGES_NS):
        hi = GAP_EDGES_NS[i + 1] if i + 1 < len(GAP_EDGES_NS) else None
        out.append(Bucket(lo_ns=lo, hi_ns=hi, count=counts[i], total_ns=totals[i]))
    return out


def busy_timeline(
    gap_starts: Any, gap_ends: Any, start: int, end: int, buckets: int = 200
) -> Timeline:
    """Busy fraction per bucket: 1 - (idle time inside the bucket / bucket length)."""
    span = end - start
    if span <= 0:
        return Timeline()
    nb = max(1, min(buckets, span))
    width = math.ceil(span / nb)
    nb = math.ceil(span / width)
    idle = [0.0] * nb
    gs_all = np.asarray(gap_starts, dtype=np.int64)
    ge_all = np.asarray(gap_ends, dtype=np.int64)
    pairs: Iterable[tuple[int, int]]
    if gs_all.size > 1000:
        # the gaps inside one bucket by a bincount; those that cross a bucket's edge below
        acc = np.zeros(nb, dtype=np.float64)
        cross_s, cross_e = [], []
        # the float sums of integer ns stay exact below 2**53
        for lo in range(0, gs_all.size, CHUNK):
            gs = gs_all[lo : lo + CHUNK]
            ge = ge_all[lo : lo + CHUNK]
            bs = (gs - start) // width
            same = bs == (ge - 1 - start) // width
            acc += np.bincount(bs[same], weights=(ge - gs)[same], minlength=nb)
            cross = ~same
            cross_s.extend(gs[cross].tolist())
            cross_e.extend(ge[cross].tolist())
        idle = [float(v) for v in acc]
        pairs = zip(cross_s, cross_e, strict=True)
    else:
        pairs = zip(gs_all.tolist(), ge_all.tolist(), strict=True)
    for s, e in pairs:
        b = (s - start) // width
        while s < e:
            b_end = start + (b + 1) * width
            piece = min(e, b_end) - s
            idle[b] += piece
            s += piece
            b += 1
    frac = []
    for i in range(nb):
        lo = start + i * width
        w = min(width, end - lo)
        frac.append(round(max(0.0, 1.0 - idle[i] / w), 4) if w > 0 else 0.0)
    return Timeline(start_ns=start, bucket_ns=width, busy_fraction=frac)
