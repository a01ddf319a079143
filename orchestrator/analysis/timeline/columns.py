"""Grouping rows by an integer column of the timeline (stream, device, string id): its distinct
values and each row's group, linear (a bincount and a lookup table) when the keys are small
non-negative integers, as they are in every reader's columns; `np.unique` (a sort) otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np

# keys below this are counted with a bincount (a table of this many int64 at most: 128 MiB)
SMALL_KEYS = 1 << 24


def _small(keys: Any) -> bool:
    return bool(keys.size) and int(keys.min()) >= 0 and int(keys.max()) < SMALL_KEYS


def small_groups(keys: Any) -> tuple[Any, Any]:
    """(distinct keys, each row's index into them), like `np.unique(..., return_inverse=True)`."""
    if _small(keys):
        present = np.flatnonzero(np.bincount(keys))
        lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        return present, lookup[keys]
    keys_u, inv = np.unique(keys, return_inverse=True)
    return keys_u, inv.reshape(-1)


def distinct(keys: Any) -> list[int]:
    """The distinct values of an integer column, ascending (`np.unique(keys).tolist()`)."""
    if _small(keys):
        return [int(k) for k in np.flatnonzero(np.bincount(keys))]
    return [int(k) for k in np.unique(keys).tolist()]
