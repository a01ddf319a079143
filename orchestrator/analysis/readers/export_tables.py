"""Which table of an export is the one gh-run means: every table gh-run reads, by every name it
has had, and each column by its spellings, resolved against the tables an export holds.

gh-run names a table by its key (`NVTX_EVENTS`); an export may hold it under another name:
- **versioned names** (`NVTX_EVENTS_V2`, `CUPTI_ACTIVITY_KIND_RUNTIME_V3`: the key, `_V`, a
  number), sometimes beside the plain one: the highest version wins (the plain name counts as
  version 1) and a note says which was read. Inferred, not documented: no NVIDIA page gh-run
  could read names such a table and no real export met holds one; another analyser of nsys
  exports (GindaChen/nsys-ai, `resolve_activity_tables`) reads them, and a reader that finds
  the plain name absent must not report "no NVTX" when the data is there;
- **older names** (`EXPORT_META_DATA`: nsys 2022.x's metadata table, measured) rank below the
  key and any versioned name;
- **another case**: SQLite matches table and column names without regard to case, and so does
  this resolution.

A key with none of these but a table named like it (`NVTX_EVENTS_NEW`, `NVTX_EVENTS_v2`: a
rename beyond what gh-run knows) gets a note naming both, never a silent "no data"; a key with
no table at all is what nsys does with a table that holds no rows (2022.4 and later, measured)
and stays a plain absence (`SourceInfo.missing`).

Columns: `SPELLINGS` lists every spelling gh-run knows of a column (the kernel's name:
`demangledName`, `shortName`, or a plain `name`; measured in the exports met); a column of
`export_schema.READ_COLUMNS` that a present table holds under no known spelling gets a note.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# key -> older whole names of the same table (measured)
OLDER_NAMES: dict[str, tuple[str, ...]] = {"META_DATA_EXPORT": ("EXPORT_META_DATA",)}
# table key -> column as gh-run names it -> the spellings it reads, preferred first
SPELLINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {"name": ("demangledName", "shortName", "name")},
}
_VERSIONED = re.compile(r"^(?P<key>.+)_V(?P<n>[0-9]+)$")


@dataclass(frozen=True)
class Choice:
    """The table read for a key: its name in the export, and every name that could have been
    (several: the highest version was read)."""

    name: str
    candidates: tuple[str, ...]


@dataclass
class Schema:
    """The tables of one export, resolved: `name(key)` is the table to read for a key gh-run
    knows (or the key itself when the export has no such table); `key in schema` says whether
    it has one. Names not resolved to any key stay as the export spells them."""

    physical: frozenset[str]
    chosen: dict[str, Choice] = field(default_factory=dict)
    # key -> tables named like it that no rule resolves (a rename gh-run does not know)
    lookalikes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key.upper() in self._upper() or key in self.physical)

    def _upper(self) -> dict[str, str]:
        return {k.upper(): c.name for k, c in self.chosen.items()}

    def name(self, key: str) -> str:
        """The export's table for `key` (the key itself when it has none)."""
        c = self.chosen.get(key) or self.chosen.get(key.upper())
        if c is not None:
            return c.name
        for p in self.physical:  # a table no rule knows, asked by its own name in any case
            if p.upper() == key.upper():
                return p
        return key

    def keys(self) -> set[str]:
        """The keys the export holds a table for, and the names of its other tables."""
        resolved = {c.name for c in self.chosen.values()}
        return set(self.chosen) | {p for p in self.physical if p not in resolved}

    def read_as(self) -> dict[str, str]:
        """key -> table, for the keys read under another name than their own."""
        return {k: c.name for k, c in sorted(self.chosen.items()) if c.name != k}

    def notes(self, wanted: Iterable[str]) -> list[str]:
        """What a reader of the keys `wanted` should be told: a versioned table read in the
        place of another, and tables named like a wanted key that nothing resolves."""
        out = []
        for key in sorted(set(wanted)):
            c = self.chosen.get(key)
            older = {o.upper() for o in OLDER_NAMES.get(key, ())}
            renamed = c is not None and c.name.upper() not in older | {key.upper()}
            if c is not None and renamed and len(c.candidates) == 1:
                out.append(f"{key}: read as {c.name} (a versioned name of it)")
            if c is not None and len(c.candidates) > 1:
                others = ", ".join(x for x in c.candidates if x != c.name)
                out.append(
                    f"{key}: the export holds {c.name} and {others}; read {c.name} (the highest"
                    " version), the others left out"
                )
            seen = self.lookalikes.get(key)
            if seen and c is None:
                out.append(
                    f"{key}: not in this export, but {', '.join(seen)} is: a name gh-run does"
                    f" not know (a table renamed?), not read; what {key} feeds is left empty"
                )
        return out


def _version(name: str, key: str) -> int | None:
    """The version a table name gives `key` (1: the key itself), or None: not the key's."""
    if name.upper() == key.upper():
        return 1
    m = _VERSIONED.match(name)
    if m and m.group("key").upper() == key.upper():
        return int(m.group("n"))
    return None


def _versions(names: Iterable[str]) -> dict[str, list[tuple[int, str]]]:
    """`_version` of every name for every key at once: upper-cased key -> (version, name) for
    each name that gives it a version. An export has hundreds of tables and gh-run reads dozens
    of keys: each name is parsed once, not once per key."""
    out: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        out.setdefault(name.upper(), []).append((1, name))
        m = _VERSIONED.match(name)
        if m:
            out.setdefault(m.group("key").upper(), []).append((int(m.group("n")), name))
    return out


def resolve(physical: Iterable[str], keys: Iterable[str]) -> Schema:
    """The `Schema` of an export holding the tables `physical`, for the table keys gh-run
    reads (`keys`)."""
    have = frozenset(physical)
    by_key = _versions(have)
    by_upper: dict[str, list[str]] = {}
    for name in have:
        by_upper.setdefault(name.upper(), []).append(name)

    def candidates(key: str) -> list[tuple[int, str]]:
        # a name is the key's at its version (`_version`), else at 0 when it is an older name
        versioned = {name: v for v, name in by_key.get(key.upper(), [])}
        for up in {o.upper() for o in OLDER_NAMES.get(key, ())}:
            for name in by_upper.get(up, []):
                versioned.setdefault(name, 0)
        return [(v, n) for n, v in versioned.items()]

    return schema_of(have, keys, candidates)


def schema_of(
    have: frozenset[str], keys: Iterable[str], candidates: Callable[[str], list[tuple[int, str]]]
) -> Schema:
    """The `Schema` for `keys` given each key's `candidates` (version, table name): the highest
    version chosen (ties by name), the others named; a key with none gets its look-alikes."""
    keys = list(keys)
    out = Schema(have)
    # a table gh-run knows by its own key is nobody's look-alike (TARGET_INFO_GPU_METRICS is
    # no renamed TARGET_INFO_GPU)
    known = {k.upper() for k in keys}
    for key in keys:
        ranked = sorted(candidates(key), key=lambda x: (-x[0], x[1]))
        if ranked:
            out.chosen[key] = Choice(ranked[0][1], tuple(n for _, n in ranked))
            continue
        like = sorted(
            n for n in have if n.upper().startswith(key.upper()) and n.upper() not in known
        )
        if like:
            out.lookalikes[key] = tuple(like)
    return out


def read_schema(conn: sqlite3.Connection, keys: Iterable[str]) -> Schema:
    """`resolve` for the tables of an open export."""
    names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return resolve(names, keys)


def column(have: Iterable[str], table: str, col: str) -> str | None:
    """The export's spelling of column `col` of table key `table`, among its columns `have`
    (None: under no spelling gh-run knows). Case is ignored, as SQLite ignores it."""
    by_upper = {c.upper(): c for c in have}
    for spelled in SPELLINGS.get(table, {}).get(col, (col,)):
        found = by_upper.get(spelled.upper())
        if found is not None:
            return found
    return None
