"""Retry policy decisions: what to do when a run's job has ended, per the spec's `retries`.

The policy (docs/reliability.md):

* One run id for every attempt. `Run.attempt` counts the attempts after the first (0 = first
  try), every attempt is an event in the store, and the job id of the latest attempt is the
  run's job id (the earlier ones are named in the events).
* SLURM may requeue a job itself (the script carries `--requeue` when `retries.requeue` is on):
  after a node failure or a preemption the *same job id* goes back to PENDING. gh-run sees the
  job in the queue again and records that as the next attempt (`requeued`).
* When a job has ended for good in a state listed in `retries.on` and attempts are left, gh-run
  submits the run's job.sbatch again (`resubmit`): a new job id, attempt + 1.
* Otherwise the run keeps the state it ended in (`exhausted` says why in an event).

This module only decides; runs.py acts (claims the retry in the store, calls the executor).
"""

from __future__ import annotations

from typing import Literal

from orchestrator.core.base import Strict
from orchestrator.spec.job import Retries
from orchestrator.store.db import is_terminal

Action = Literal["none", "requeued", "resubmit", "exhausted"]


class Decision(Strict):
    action: Action
    detail: str


def wants_retry(policy: Retries, state: str) -> bool:
    """True when the policy covers this end state at all (regardless of attempts left)."""
    return policy.max > 0 and state.split()[0] in policy.on


def decide(policy: Retries, state: str, attempt: int, *, back_in_queue: bool) -> Decision:
    """What to do now that the job of attempt `attempt` reported `state`.

    `back_in_queue` is whether SLURM holds the same job id again (it requeued the job).
    """
    base = state.split()[0] if state else state
    if not wants_retry(policy, base):
        return Decision(action="none", detail=f"{base} is not retried by this spec")
    nxt = attempt + 1
    if back_in_queue:
        return Decision(
            action="requeued",
            detail=f"attempt {nxt + 1}: SLURM requeued the job after {base} (--requeue)",
        )
    if attempt >= policy.max:
        return Decision(
            action="exhausted",
            detail=f"{base}: retry limit reached ({policy.max} retries used); not resubmitted",
        )
    return Decision(
        action="resubmit",
        detail=f"attempt {nxt + 1} of {policy.max + 1}: resubmitting after {base}",
    )


class Requeue(Strict):
    """What the controller says of a job that accounting shows ended or back to PENDING."""

    new: bool  # SLURM requeued it since gh-run last recorded a requeue of it
    state: str  # the state the controller holds it in now


def requeue_of(held: tuple[str, int] | None, recorded: int) -> Requeue | None:
    """Whether SLURM requeued the job, from the controller's (state, restart count) of it
    (`held`, None when it no longer holds the job) and how many requeues of this job id gh-run
    has recorded.

    Only the controller's restart count is proof. Accounting (slurmdbd) can answer for an older
    moment: PENDING for a job the controller already runs, or the NODE_FAIL of the attempt
    before a requeue already recorded. A job that ended on a failed node stays COMPLETING in
    the queue a while, and is not requeued for that. None: not requeued, the end stands.
    """
    if held is None:
        return None
    state, restarts = held
    if restarts == 0 or is_terminal(state) or state.startswith("COMPLETING"):
        return None
    return Requeue(
        new=restarts > recorded, state="PENDING" if state.startswith("REQUEUE") else state
    )
