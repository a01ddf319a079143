"""Numbers as people read them, in the terminal and in reports: durations and sizes in human
units. The bottom layer (orchestrator/core/): the analysis (its catalogue, captures, the
cross-rank view), compare, verdict, advice, reports and campaigns all format through here.

The rules, in one place:
- a value alone reads in the unit that suits its size (`dur`, `size`, `human`);
- a row of values (one metric over several runs) reads in one unit, the one that suits its
  largest value (`row_unit`, `in_unit`): never µs beside ms. A non-zero value that would read
  as 0.00 there (8 bytes in a GiB row) carries its own unit instead ("8 B");
- a change against a baseline reads as a percentage, or as a factor beyond ×10 and below
  ×0.1 ("×85", "×0.007"), never as a fraction ("×1/142") nor as a percentage of a near-zero
  baseline (`change_text`);
- what a source did not measure reads `NOT_MEASURED` (JSON: null), never as a real 0.
"""

from __future__ import annotations

import math


def dur(ns: float | None) -> str:
    """A duration in ns as s / ms / µs / ns with 3 significant-ish digits."""
    if ns is None:
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def elapsed(ns: float) -> str:
    """A time between two events, up to days: `dur` below a minute, then min / h / days."""
    s_ = abs(ns) / 1e9
    if s_ < 60:
        return dur(ns)
    for unit, f in (("days", 86400), ("h", 3600), ("min", 60)):
        if round(s_ / f, 1) >= 1:  # 59.99 min reads 1.0 h
            return f"{ns / 1e9 / f:.1f} {unit}"
    return dur(ns)


def size(b: float | None) -> str:
    """Bytes as GiB / MiB / KiB / B."""
    if b is None:
        return "-"
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= f:
            return f"{b / f:.2f} {unit}"
    return f"{b:.0f} B"


def num(v: float | None) -> str:
    """A plain number with a precision that suits its size (never an exponent)."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a == 0:
        return "0"
    if a < 0.001:  # three significant digits, never an exponent (8 bytes in GiB: 0.00000000745)
        return f"{v:.{min(15, 2 - math.floor(math.log10(a)))}f}"
    return f"{v:.3f}"


# a value in a unit of the comparison rows, as the base unit the formatters above take
_TO_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}
_TO_BYTES = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1.0, "bytes": 1.0}


def convert(v: float, unit: str, to: str) -> float:
    """`v` (in `unit`) in `to`: durations (ns, µs, ms, s) and sizes (B, KiB, MiB, GiB) within
    their family; any other pair (a percentage shown as "% of span") is the same number."""
    for table in (_TO_NS, _TO_BYTES):
        if unit in table and to in table and unit != to:
            factor = table[unit]
            # ns -> s is v / 1e9 exactly as written elsewhere (no multiplication by 1)
            return (v if factor == 1 else v * factor) / table[to]
    return v


def human(v: float | None, unit: str) -> str:
    """`v` (in `unit`) as it reads best: durations and sizes in the unit that suits their size,
    percentages with one decimal, counts with thousands separators."""
    if v is None:
        return "-"
    if unit in _TO_NS:
        return dur(v * _TO_NS[unit])
    if unit in _TO_BYTES:
        return size(v * _TO_BYTES[unit])
    if unit == "%":
        return f"{v:.1f} %"
    if unit == "count":
        return f"{v:,.0f}"
    return f"{num(v)} {unit}".strip()


NOT_MEASURED = "not measured"
NEAR_ZERO = 1000.0  # a value this many times its baseline: the baseline counts as ~0

# the units a row of values can be shown in, by family, largest first
_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
_SIZE_UNITS = (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0))


def _family(unit: str) -> tuple[tuple[tuple[str, float], ...], float] | None:
    """The unit family of `unit` and its size in the family's base unit (ns, bytes)."""
    if unit in _TO_NS:
        return _TIME_UNITS, _TO_NS[unit]
    if unit in _TO_BYTES:
        return _SIZE_UNITS, _TO_BYTES[unit]
    return None


def row_unit(values: list[float | None], unit: str) -> str:
    """The one unit a row of values (given in `unit`) is shown in: for durations and sizes the
    unit that suits the largest of them (0.37 s and 0.17 s: "ms"; 17.9 GiB: "GiB"), else `unit`
    itself ("%", "count", "tok/s")."""
    fam = _family(unit)
    if fam is None:
        return unit
    units, scale = fam
    top = max((abs(v) * scale for v in values if v is not None), default=0.0)
    if top == 0:  # nothing to size it by: the row's own unit, as a reader spells it
        return "µs" if unit == "us" else "B" if unit == "bytes" else unit
    for name, size_ in units:
        if top >= size_:
            return name
    return units[-1][0]


def in_unit(v: float | None, unit: str, shown: str) -> str:
    """`v` (in `unit`) as a number in the row's unit `shown` (`row_unit`); a non-zero value
    that would read as 0.00 there (below 0.01 of it) keeps its own unit ("8 B" in a GiB row);
    None → "-"."""
    if v is None:
        return "-"
    if unit == "%":
        return f"{v:.1f}" if v == 0 or abs(v) >= 0.1 else f"{v:.2g}"
    if unit == "count":
        return f"{v:,.0f}"
    fam = _family(unit)
    if fam is None:
        return num(v)
    units, scale = fam
    factor = dict(units).get(shown)
    if factor is None:
        return num(v)
    x = v * scale / factor
    if x != 0 and abs(x) < 0.01:
        return human(v, unit)
    if factor == 1.0 and x == int(x):  # whole bytes or nanoseconds
        return f"{x:,.0f}"
    return num(x)


def change_text(v: float | None, base: float | None, unit: str) -> str:
    """The change of `v` against `base` for a reader: a percentage; a factor beyond ×10 or
    below ×0.1 ("×85", "×0.007"); "new" from a zero baseline; "from ~0" / "to ~0" plus the
    absolute change beyond a factor of `NEAR_ZERO` either way (8 bytes to 22.5 GiB is not
    "+3,019,458,594 %")."""
    if v is None or base is None:
        return "-"
    if v == base:
        return "="
    if base == 0:
        return "new"
    ratio = v / base
    if abs(ratio) >= NEAR_ZERO:
        return f"from ~0 ({'+' if v > base else '-'}{human(abs(v - base), unit)})"
    if ratio >= 10:
        return f"×{ratio:,.0f}"
    if 0 < ratio <= 0.1:
        if ratio * NEAR_ZERO < 1:
            return f"to ~0 (-{human(abs(v - base), unit)})"
        return f"×{ratio:.2g}"
    return f"{100 * (ratio - 1):+.1f} %"
