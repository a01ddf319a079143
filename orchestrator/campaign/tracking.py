"""Tracking a campaign: every run of every group in one poll (one batched sacct through the
shared submitit watcher, whatever the number of variants), with counts for a progress display."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from orchestrator.executors.base import Warn
from orchestrator.runs import lifecycle as R
from orchestrator.store import campaigns as db
from orchestrator.store.db import Run, Store

BUCKETS = ("pending", "running", "done", "failed")


def bucket(run: Run) -> str:
    if run.state == "COMPLETED":
        return "done"
    if run.terminal:
        return "failed"
    if run.state in ("RUNNING", "COMPLETING"):
        return "running"
    return "pending"


def counts(runs: list[Run]) -> dict[str, int]:
    c = Counter(bucket(r) for r in runs)
    return {b: c.get(b, 0) for b in BUCKETS}


def poll_once(store: Store, campaign_id: str, warn: Warn | None = None) -> list[Run]:
    runs = list(db.runs_of(store, campaign_id).values())
    return R.refresh(store, runs, warn=warn)


def track(
    store: Store,
    campaign_id: str,
    *,
    on_poll: Callable[[list[Run]], None] | None = None,
    warn: Warn | None = None,
    timeout: float | None = None,
    max_interval: float = 10.0,
) -> list[Run]:
    """Poll until every variant has ended (or timeout); returns the runs."""
    runs = list(db.runs_of(store, campaign_id).values())
    return R.wait(
        store, runs, on_poll=on_poll, warn=warn, timeout=timeout, max_interval=max_interval
    )
