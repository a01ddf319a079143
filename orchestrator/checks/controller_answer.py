"""The SLURM controller's answer to `sbatch --test-only` in plain words, in the terms of the
job spec (`explain_controller`): when it would start the job, or what its refusal means
(a partition without such nodes, a time limit over the partition's, an unknown account...).
`preflight.py` prints these words before the controller's own."""

from __future__ import annotations

import re

# What the controller's refusals mean, in the words of the job spec (sbatch --test-only).
_CONTROLLER_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Requested node configuration is not available", re.IGNORECASE),
        "no node of the partition has what one node of this job asks for "
        "(GPUs, cores, memory or features per node)",
    ),
    (
        re.compile(r"time limit is invalid|time limit exceeds", re.IGNORECASE),
        "the time limit is over what the partition allows",
    ),
    (
        re.compile(r"Node count specification invalid", re.IGNORECASE),
        "the partition cannot give the job that many nodes",
    ),
    (
        re.compile(r"Invalid account", re.IGNORECASE),
        "the account does not exist or may not use this partition",
    ),
    (re.compile(r"Invalid qos", re.IGNORECASE), "the QoS is not allowed here"),
    (
        re.compile(r"Invalid partition name", re.IGNORECASE),
        "the controller has no partition of that name",
    ),
    (
        re.compile(r"Invalid feature specification", re.IGNORECASE),
        "no node offers the requested --constraint features",
    ),
    (
        re.compile(r"Invalid generic resource|Invalid GRES", re.IGNORECASE),
        "the nodes have no such GPU type or count (GRES)",
    ),
    (
        re.compile(r"Memory specification can not be satisfied", re.IGNORECASE),
        "no node has that much memory",
    ),
)
_WOULD_START = re.compile(
    r"Job \d+ to start at (?P<at>\S+) using (?P<cpus>\d+) processors on nodes (?P<nodes>\S+)"
)


_NO_PARTITION = re.compile(r"Invalid partition name", re.IGNORECASE)


def lacks_partition(text: str) -> bool:
    """Whether the controller refused because it has no partition of the job's name (a cluster
    file that names one SLURM does not have: not a request to shrink)."""
    return bool(_NO_PARTITION.search(text))


def explain_controller(ok: bool, text: str) -> str:
    """The controller's `sbatch --test-only` answer in plain words (its own words follow)."""
    if ok:
        m = _WOULD_START.search(text)
        if m:
            cpus = int(m.group("cpus"))
            return (
                f"it would start at {m.group('at')} on {m.group('nodes')} "
                f"with {cpus} CPU core{'' if cpus == 1 else 's'}"
            )
        return "it would accept the job"
    for pattern, words in _CONTROLLER_WORDS:
        if pattern.search(text):
            return words
    return "it refused the job"
