"""The phases a held-out nsys workload times outside its capture, in rounds (each run as a script
from this folder): each round runs every phase in turn, one step to settle after the switch,
then `steps` timed steps; a host whose speed drifts moves the phases of one round alike."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

Step = Callable[[int], float]  # the step of index i, its wall in seconds


def timed(
    phases: Sequence[tuple[str, Step]], rounds: int, steps: int, n: int
) -> tuple[dict[str, list[float]], list[dict[str, float]], int]:
    """(every timed wall of each phase in s, each round's mean of each phase in ms, the next step
    index) of `rounds` rounds (at least one) from step index `n`."""
    walls: dict[str, list[float]] = {name: [] for name, _ in phases}
    means: list[dict[str, float]] = []
    for _ in range(max(rounds, 1)):
        this: dict[str, float] = {}
        for name, step in phases:
            step(n)  # one step to settle after the switch, not timed
            n += 1
            got = []
            for _ in range(steps):
                got.append(step(n))
                n += 1
            walls[name] += got
            this[name] = 1e3 * statistics.fmean(got)
        means.append(this)
    return walls, means, n
