"""A STAND-IN for an out-of-memory snapshot, made from a real recording (issue 39): the GPU run
meant to record a real one failed before it started (bench/workloads/memory_cases.py's `oom`
case asked `torch.cuda.set_per_process_memory_fraction` for the device "cuda", which wants an
index; fixed since, not yet run again). Until a real one is recorded, this is what the tests of
the out-of-memory explanation read, and it is named a stand-in everywhere it is used.

What it is: the real snapshot of a run (gh-run's hook, an H200) cut at a moment of its history
(`--at-phase`, `--step`: the middle of that phase of that step), with what the allocator would
have written had it run out of memory there appended: an `oom` event asking for `--request`
bytes with `--device-free` bytes free on the device, the segments rebuilt from the blocks the
cut history leaves held (one segment per block: no free block in the cache), and the hook's
`gh_run` record cut to the same moment with `reason: oom`, its out-of-memory note and a memory
fraction whose cap is `--limit` bytes. Everything before the cut is the real recording.

    python bench/memory_oom_standin.py REAL.pickle OUT.pickle [--step 3] [--at-phase forward]
        [--request BYTES] [--limit BYTES] [--device-free BYTES]

It prints what it planted (the truth the tests hold the analysis to) as JSON.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any


def cut(snap: dict[str, Any], step: int, phase: str) -> int:
    """The index of the first event after the middle of `phase` of `step` (hook marks)."""
    marks = snap["gh_run"]["marks"]
    opens = {"forward": "fwd_begin", "backward": "bwd_begin"}[phase]
    closes = {"forward": "bwd_begin", "backward": "bwd_end"}[phase]
    begins = [t for t, k, _ in marks if k == opens]
    ends = [t for t, k, _ in marks if k == closes]
    t = (begins[step] + ends[step]) // 2
    trace = snap["device_traces"][0]
    return next(i for i, e in enumerate(trace) if e["time_us"] > t)


def held(trace: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The blocks a history leaves allocated (address -> its alloc event)."""
    live: dict[int, dict[str, Any]] = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] in ("free_requested", "free_completed"):
            live.pop(e["addr"], None)
    return live


def rebuild(trace: list[dict[str, Any]], live: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The allocator's segments at the end of a history: each segment the history reserved
    (and did not give back), its held blocks where they lie and the gaps between them as free
    (inactive) blocks, as `torch.cuda.memory._snapshot` lays them out."""
    segs: dict[int, dict[str, Any]] = {}
    for e in trace:
        if e["action"] == "segment_alloc":
            segs[e["addr"]] = e
        elif e["action"] == "segment_free":
            segs.pop(e["addr"], None)
    out = []
    for addr, seg in sorted(segs.items()):
        end = addr + seg["size"]
        inside = sorted((a, b) for a, b in live.items() if addr <= a < end)
        blocks, at = [], addr
        for a, b in inside:
            if a > at:
                blocks.append({"address": at, "size": a - at, "requested_size": 0,
                               "state": "inactive", "frames": []})  # fmt: skip
            blocks.append({"address": a, "size": b["size"], "requested_size": b["size"],
                           "state": "active_allocated", "frames": b.get("frames", [])})  # fmt: skip
            at = a + b["size"]
        if at < end:
            blocks.append({"address": at, "size": end - at, "requested_size": 0,
                           "state": "inactive", "frames": []})  # fmt: skip
        held_bytes = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        out.append({
            "device": 0, "address": addr, "total_size": seg["size"],
            "allocated_size": held_bytes, "active_size": held_bytes,
            "requested_size": held_bytes, "stream": 0,
            "segment_type": "large" if seg["size"] > 1 << 20 else "small",
            "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": seg.get("frames", []), "blocks": blocks,
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("real", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--step", type=int, default=3)
    p.add_argument("--at-phase", choices=("forward", "backward"), default="forward")
    p.add_argument("--request", type=int, default=12 << 30)
    p.add_argument("--limit", type=int, default=20 << 30)
    p.add_argument("--device-free", type=int, default=120 << 30)
    ns = p.parse_args(argv)
    with open(ns.real, "rb") as fh:
        snap = pickle.load(fh)  # our own recording: plain data
    trace = snap["device_traces"][0]
    k = cut(snap, ns.step, ns.at_phase)
    kept = trace[:k]
    t = kept[-1]["time_us"] + 1
    live = held(kept)
    allocated = sum(e["size"] for e in live.values())
    frames = kept[-1].get("frames", [])
    kept.append({"action": "oom", "device_free": ns.device_free, "size": ns.request,
                 "stream": 0, "time_us": t, "frames": frames})  # fmt: skip
    segments = rebuild(kept, live)
    hook = dict(snap["gh_run"])
    hook["marks"] = [m for m in hook["marks"] if m[0] < t] + [[t, "oom", ns.request]]
    hook["reason"] = "oom"
    total = hook["devices"][0]["total_memory"]
    hook["devices"] = [dict(hook["devices"][0], memory_fraction=ns.limit / total)]
    hook["oom"] = {"format": hook["format"], "rank": hook["rank"], "time_us": t, "device": 0,
                   "requested_bytes": ns.request, "device_free_bytes": ns.device_free,
                   "observer_device_allocated": ns.limit, "devices": hook["devices"]}  # fmt: skip
    hook["standin"] = (
        f"A STAND-IN, not a real out of memory: {ns.real.name} cut in the {ns.at_phase} of step"
        f" {ns.step}, an oom event appended (bench/memory_oom_standin.py)"
    )
    out = {
        "segments": segments,
        "device_traces": [kept],
        "allocator_settings": snap.get("allocator_settings", {}),
        "gh_run": hook,
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    with open(ns.out, "wb") as fh:
        pickle.dump(out, fh, protocol=4)
    json.dump(
        {
            "standin": hook["standin"],
            "requested_bytes": ns.request,
            "limit_bytes": int(total * (ns.limit / total)),
            "device_free_bytes": ns.device_free,
            "allocated_at_oom": allocated,
            "reserved_at_oom": sum(x["total_size"] for x in segments),
            "largest_free_block": max(
                (b["size"] for x in segments for b in x["blocks"] if b["state"] == "inactive"),
                default=0,
            ),
            "events": len(kept),
            "step": ns.step,
            "phase": ns.at_phase,
        },
        sys.stdout,
        indent=1,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
