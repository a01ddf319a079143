"""`timeline.sort_keys.lexsort`: the order `np.lexsort` gives, on keys whose primary key ties
never, sometimes or always."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis.timeline import sort_keys


@pytest.mark.parametrize("spread", [1, 3, 50, 10**12])
def test_same_order_as_numpy_lexsort(spread: int) -> None:
    rng = np.random.default_rng(spread)
    for n in (0, 1, 2, 7, 1000):
        keys = (
            rng.integers(0, 4, n),
            rng.integers(-(10**15), 10**15, n) % 3,
            -rng.integers(0, spread, n),
            rng.integers(0, spread, n),
        )
        got = sort_keys.lexsort(keys)
        assert got.tolist() == np.lexsort(keys).tolist()
        assert sort_keys.lexsort(keys[-2:]).tolist() == np.lexsort(keys[-2:]).tolist()


def test_one_key_is_a_stable_sort() -> None:
    key = np.array([3, 1, 3, 1, 2], dtype=np.int64)
    assert sort_keys.lexsort((key,)).tolist() == [1, 3, 4, 0, 2]


def test_ties_broken_by_the_other_keys_then_by_index() -> None:
    start = np.array([5, 5, 1, 5, 1], dtype=np.int64)
    end = np.array([9, 7, 3, 7, 3], dtype=np.int64)
    assert sort_keys.lexsort((end, start)).tolist() == [2, 4, 1, 3, 0]
