"""Sorting rows by several keys when the first key (a start time) rarely ties.

`np.lexsort` sorts every row once per key: on a million NVTX or operator rows it is most of the
cost of ordering them, though their start times almost never tie. `lexsort` gives the same
order (a stable sort of the last key, the primary one, as `np.lexsort` orders) from one stable
sort of that key, then sorts by all the keys only the rows whose primary key ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def lexsort(keys: Sequence[Any]) -> Any:
    """The indices `np.lexsort(keys)` gives (the last key primary; equal keys in index
    order), for 1-D integer keys of one length."""
    primary = keys[-1]
    order = np.argsort(primary, kind="stable")
    if len(keys) == 1 or order.size < 2:
        return order
    ranked = primary[order]
    tie = ranked[1:] == ranked[:-1]
    if not bool(tie.any()):
        return order
    # the rows of each run of equal primary keys: they hold the same places after the full
    # sort, so sorting them alone (in index order: the stable sort kept it) gives its order
    at = np.flatnonzero(np.r_[tie, False] | np.r_[False, tie])
    sub = order[at]
    order[at] = sub[np.lexsort(tuple(k[sub] for k in keys))]
    return order
