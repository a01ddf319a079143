"""`group_rows.first_per_group`: the rows a loop over the rows in order would take while each
group holds fewer than k (the reference), for any groups and k."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.timeline.group_rows import first_per_group
from tests.budget import examples


def _reference(groups: list[int], k: int) -> list[bool]:
    seen: dict[int, int] = {}
    out = []
    for g in groups:
        take = seen.get(g, 0) < k
        seen[g] = seen.get(g, 0) + take
        out.append(take)
    return out


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.integers(-3, 6), max_size=60), st.integers(-1, 5))
def test_first_rows_of_each_group_as_a_loop_takes_them(groups: list[int], k: int) -> None:
    got = first_per_group(np.array(groups, dtype=np.int64), k)
    assert got.tolist() == _reference(groups, k)


def test_a_million_rows_in_few_groups() -> None:
    g = np.arange(1_000_000) % 7
    got = first_per_group(g, 32)
    assert int(got.sum()) == 7 * 32 and bool(got[: 7 * 32].all())
