"""The two statistics every family computes the same way: a part as a percentage of a whole
(`pct`, 0 of nothing) and the quantile of sorted values (`quantile`, numpy's default method)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pct(part: float, whole: float) -> float:
    """part/whole in percent, 0 when whole is 0."""
    return 100.0 * part / whole if whole else 0.0


def quantile(sorted_values: Sequence[int] | Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default method)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo]) + (float(sorted_values[hi]) - float(sorted_values[lo])) * frac
