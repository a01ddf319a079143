"""Rows by group, without a Python step per row: which rows are among the first few of their
group (in row order), for evidence that names only the first few rows of each interval while a
million rows may fall inside the intervals."""

from __future__ import annotations

from typing import Any

import numpy as np


def first_per_group(groups: Any, k: int) -> Any:
    """A mask over the rows: True where the row is one of the first `k` rows (in row order) of
    its group (`groups`: each row's group, any integers)."""
    n = int(groups.size)
    out = np.zeros(n, dtype=bool)
    if n == 0 or k <= 0:
        return out
    order = np.argsort(groups, kind="stable")  # each group's rows together, in row order
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    out[order[rank < k]] = True
    return out
