"""The GPU idle a host sync causes (issue 35: the sync class), gap by gap.

A sync that blocks the main thread (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
`cudaEventSynchronize`: `.item()`, `.cpu()`, `torch.cuda.synchronize()`) costs the GPU nothing
while the GPU is busy; it costs what follows: the host leaves the sync with nothing queued, so
the GPU waits for each launch until the host is ahead again. That idle lies in the µs gaps after
the sync (the drain, then late launches), which by their own look are launch waits or back to
back. Without the sync the host would have gone on `B` earlier (B: the time it blocked), so
each launch after it, up to the next sync, would have come `B` sooner.

Per sync, the gaps whose ending work was launched between its return and the next sync's call
are replayed with that shift (a small what-if, one gap after another): a gap the GPU waited in
for a launch (the work was launched after the gap began) would have lasted only as long as the
launch, `B` sooner, left it waiting after the GPU's (earlier) end, and never less than the GPU's
own gap between two queued kernels; any other gap keeps its length. What each gap loses is the
idle that sync causes. The shift only helps where the host was behind: on a launch-bound loop
(the host always behind, blocking little) it gives back little, on a GPU-bound loop the drain
and the late launches after each sync. A sync the next sync follows at once gives back only
what lies between them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline.intervals import merge_intervals

# the calls that block the host until the GPU work they wait for is done (a stream's wait on an
# event does not block the host)
BLOCKING = re.compile(r"(?i)^cu(da)?(Stream|Device|Event|Ctx)?Synchronize")
MAX_QUEUED_GAP_NS = 5_000  # the GPU's own gap between queued kernels is taken at most this


def blocking_syncs(tl: T.RankTimeline, main: tuple[int, int] | None) -> tuple[Any, Any]:
    """(starts, ends) of the main thread's blocking sync calls, merged."""
    h = tl.host
    z = np.zeros(0, dtype=np.int64)
    if main is None or h.size == 0:
        return z, z
    api = h.kind == T.CUDA_API
    m = api & tl.name_mask(BLOCKING.match, h.name[api])[h.name]
    m &= (h.pid == main[0]) & (h.tid == main[1])
    if not bool(m.any()):
        return z, z
    order = np.argsort(h.start[m], kind="stable")
    s, e = merge_intervals(h.start[m][order], h.end[m][order])
    return np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64)


def caused(
    tl: T.RankTimeline,
    rows: T.GpuTable,
    gap_starts: Any,
    gap_ends: Any,
    main: tuple[int, int] | None,
) -> Any:
    """ns of each gap (of the GPU's busy union, sorted) that the main thread's syncs caused
    (module docstring); zeros without syncs or launches."""
    n = int(gap_starts.size)
    out = np.zeros(n, dtype=np.int64)
    ss, se = blocking_syncs(tl, main)
    if n == 0 or ss.size == 0 or rows.size == 0:
        return out
    # the work that ends each gap and its launch
    j = np.searchsorted(rows.start, gap_ends)
    jj = np.minimum(j, rows.size - 1)
    launch = np.where(j < rows.size, rows.launch[jj], -1)
    known = launch >= 0
    waited = known & (launch > gap_starts)
    lens = gap_ends - gap_starts
    queued = lens[known & ~waited]
    bb = int(min(np.median(queued), MAX_QUEUED_GAP_NS)) if queued.size else 0
    # each gap's sync: the last one returned before its work was launched, if the next sync had
    # not been called by then
    k = np.searchsorted(se, launch, side="right") - 1
    kk = np.maximum(k, 0)
    nxt = np.minimum(kk + 1, ss.size - 1)
    mine = known & (k >= 0) & ((kk + 1 >= ss.size) | (launch < ss[nxt]))
    blocked = se - ss
    idx = np.flatnonzero(mine)
    if idx.size == 0:
        return out
    # every sync gone at once: the host's launches after sync k come the blocking of syncs
    # 0..k sooner (`shift`), and the GPU runs ahead of the real one by what it gained so far
    shifts = np.cumsum(blocked)
    ahead = 0
    for g in idx.tolist():
        if not waited[g]:
            continue
        shift = int(shifts[int(k[g])])
        a, b, lau = int(gap_starts[g]), int(gap_ends[g]), int(launch[g])
        a2 = a - ahead
        b2 = max(a2 + bb, lau - shift + (b - lau))
        out[g] = max(0, min(b - a, (b - a) - (b2 - a2)))
        ahead = max(0, b - b2)
    return out
