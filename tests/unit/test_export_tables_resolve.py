"""`export_tables.resolve` parses each table name once for every key; the reference is the
pairwise rule it replaced: `_version(name, key)` for each name and key, an older name at
version 0. The highest version is chosen and names only like a key are listed as look-alikes
(`schema_of`, both ways). Any set of table names resolves alike both ways."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import export_tables as et
from tests.budget import examples

# few, so that drawn sets of names often hold a key beside its versions and its older name
KEYS = ["OSRT_API", "META_DATA_EXPORT", "TARGET_INFO_GPU", "TARGET_INFO_GPU_METRICS"]


def reference(physical: set[str], keys: list[str]) -> et.Schema:
    """Each key's candidates by `_version` of every name, one pair at a time, an older name at
    version 0; the ranking and the look-alikes are `schema_of`'s, shared with `resolve`."""
    have = frozenset(physical)

    def candidates(key: str) -> list[tuple[int, str]]:
        ranked: list[tuple[int, str]] = []
        for name in have:
            v = et._version(name, key)
            if v is not None:
                ranked.append((v, name))
            elif name.upper() in (o.upper() for o in et.OLDER_NAMES.get(key, ())):
                ranked.append((0, name))
        return ranked

    return et.schema_of(have, keys, candidates)


def _spelled(base: str) -> st.SearchStrategy[str]:
    suffix = st.sampled_from(["", "_V2", "_V10", "_v3", "_V", "_V02", "_X", "S", "_V2_V3"])
    spellings: list[Callable[[str], str]] = [str.strip, str.lower, str.upper, str.swapcase]
    case = st.sampled_from(spellings)
    return st.tuples(case, suffix).map(lambda t: t[0](base) + t[1])


NAMES = st.sets(
    st.one_of(
        st.sampled_from([*KEYS, "EXPORT_META_DATA"]).flatmap(_spelled),
        st.text("AB_V12", max_size=5),
    ),
    max_size=8,
)


@settings(max_examples=examples(300), deadline=None)
@given(NAMES, st.lists(st.sampled_from([*KEYS, "AB", "A"]), unique=True, min_size=1))
def test_resolve_matches_the_pairwise_rule(names: set[str], keys: list[str]) -> None:
    got = et.resolve(names, keys)
    want = reference(names, keys)
    assert got.chosen == want.chosen
    assert got.lookalikes == want.lookalikes


def test_the_highest_version_is_chosen_and_the_others_named() -> None:
    s = et.resolve(["OSRT_API", "OSRT_API_V3", "OSRT_API_V2", "EXPORT_META_DATA"],
                   ["OSRT_API", "META_DATA_EXPORT"])  # fmt: skip
    assert s.chosen["OSRT_API"].candidates == ("OSRT_API_V3", "OSRT_API_V2", "OSRT_API")
    assert s.chosen["OSRT_API"].name == "OSRT_API_V3"
    assert s.chosen["META_DATA_EXPORT"].name == "EXPORT_META_DATA"
    # the key's own name outranks its older name
    s = et.resolve(["EXPORT_META_DATA", "META_DATA_EXPORT"], ["META_DATA_EXPORT"])
    assert s.chosen["META_DATA_EXPORT"].candidates == ("META_DATA_EXPORT", "EXPORT_META_DATA")
