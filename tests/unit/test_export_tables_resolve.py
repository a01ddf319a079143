"""`export_tables.resolve` parses each table name once for every key; the reference is the
pairwise rule it replaced: `_version(name, key)` for each name and key, an older name at
version 0, the highest version chosen, and names only like a key listed as look-alikes. Any set
of table names resolves alike both ways."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import export_tables as et
from tests.budget import examples

# few, so that drawn sets of names often hold a key beside its versions and its older name
KEYS = ["OSRT_API", "META_DATA_EXPORT", "TARGET_INFO_GPU", "TARGET_INFO_GPU_METRICS"]


def reference(physical: set[str], keys: list[str]) -> et.Schema:
    have = frozenset(physical)
    out = et.Schema(have)
    known = {k.upper() for k in keys}
    for key in keys:
        ranked: list[tuple[int, str]] = []
        for name in have:
            v = et._version(name, key)
            if v is not None:
                ranked.append((v, name))
            elif name.upper() in (o.upper() for o in et.OLDER_NAMES.get(key, ())):
                ranked.append((0, name))
        if ranked:
            ranked.sort(key=lambda x: (-x[0], x[1]))
            out.chosen[key] = et.Choice(ranked[0][1], tuple(n for _, n in ranked))
            continue
        like = sorted(
            n for n in have if n.upper().startswith(key.upper()) and n.upper() not in known
        )
        if like:
            out.lookalikes[key] = tuple(like)
    return out


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
