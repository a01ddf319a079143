"""How numbers and names read, in the terminal and in reports: durations and sizes in human
units, short labels for runs (with a legend when they are letters), short kernel names (the
full one goes on hover or in --json).

The formatting rules that compare, verdict, advice and reports share live here, in one place:
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
import re
from pathlib import Path


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


def letters(i: int) -> str:
    """0 → A, 25 → Z, 26 → AA (spreadsheet column names)."""
    out = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def _recorded(p: Path) -> bool:
    """A report left where it was analysed: its record stands here for the file."""
    from orchestrator.analysis.records import record_path

    return record_path(p).is_file()


def short_labels(args: list[str]) -> list[str]:
    """Labels for runs: the last path part (file name without trace suffixes), made unique by
    prefixing parent folders where two would be equal."""

    def parts(a: str) -> list[str]:
        p = Path(a)
        ps = [x for x in p.parts if x not in ("/", ".")]
        if ps and (p.is_file() or _recorded(p)):
            stem = ps[-1]
            for suf in (".gz", ".json", ".pt.trace", ".sqlite"):
                stem = stem.removesuffix(suf)
            ps[-1] = stem
        return ps or [a]

    split = [parts(a) for a in args]
    depth = [1] * len(args)
    for _ in range(8):
        labels = ["/".join(s[-d:]) for s, d in zip(split, depth, strict=True)]
        dup = {x for x in labels if labels.count(x) > 1}
        if not dup:
            return labels
        depth = [d + 1 if lab in dup else d for d, lab in zip(depth, labels, strict=True)]
    return args


def column_labels(names: list[str], width: int = 12) -> list[str]:
    """Column headers for compared runs: their short names when two of them fit a column, else
    A, B, C… explained by a legend (a path or a long run id as a header is cut mid-word and
    pushes the numbers off the screen)."""
    if len(names) <= 2 and all(len(n) <= width for n in names):
        return names
    return [letters(i) for i in range(len(names))]


_PARAMS = re.compile(r"(?<=[\w>])\(")
_RETURN = re.compile(r"^(?:void|int|float|double|__global__)\s+")


_GENERIC = re.compile(r"(?i)(?:^|::)(?:device_)?kernel\d*<…>$")


def _strip_templates(text: str) -> str:
    """`a<b<c>, d>::e<f>` → `a<…>::e<…>`."""
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(text):
        # a template opens right after a name (`kernel<`), never a lone `<` (`a < b`, `<img`)
        if ch == "<" and (depth or (i and (text[i - 1].isalnum() or text[i - 1] in "_:>"))):
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_kernel(name: str, limit: int = 60) -> str:
    """A kernel name that fits a table cell: no return type, parameter list or template
    arguments (`void at::native::elementwise_kernel<128, 4, …>(int, …)` →
    `at::native::elementwise_kernel<…>`), cut to `limit` characters with an ellipsis."""
    s = _RETURN.sub("", " ".join(name.split()))
    for anon in ("(anonymous namespace)::", "<unnamed>::"):
        s = s.replace(anon, "")
    short = _strip_templates(s)
    # the parameter list starts at the first `(` right after the name (`kernel<…>(int, …)`);
    # `(anonymous namespace)` after `::` and `Memcpy HtoD (Pageable -> Device)` stay
    cut = _PARAMS.search(short)
    if cut is not None:
        short = short[: cut.start()]
    if _GENERIC.search(short) and "<" in s:
        # cutlass::Kernel2<cutlass_80_simt_sgemm_…>: the argument is the name that matters
        inner = s[s.index("<") + 1 : s.rindex(">")] if ">" in s else ""
        first = _strip_templates(inner.split(",")[0].strip())
        short = short.replace("<…>", f"<{first}>", 1) if first else short
    s = short
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s or name[:limit]


# words of a kernel's signature that tell nothing apart: C++ keywords and index types, lambda
# bookkeeping, PyTorch's iterator plumbing (namespaces and class qualifiers, the words before
# `::`, are left out by position)
_PLAIN_WORDS = frozenset(
    (
        *("void", "int", "unsigned", "signed", "long", "short", "char", "bool", "const"),
        *("auto", "struct", "class", "lambda", "instance", "operator", "array", "anonymous"),
        *("namespace", "unnamed", "TensorIteratorBase", "TrivialOffsetCalculator"),
        *("OffsetCalculator", "LoadWithCast", "StoreWithCast", "LoadWithoutCast"),
        "StoreWithoutCast",
    )
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?!\s*::)(?![A-Za-z0-9_])")
TAG_WORDS = 3  # at most this many words tell two kernels apart


def _telling_words(name: str) -> list[str]:
    """The words of a kernel signature that can tell it from a kernel of the same short name,
    in order, once each: not keywords, index types or plumbing (`_PLAIN_WORDS`), not
    qualifiers (a word before `::`), not template parameter names (T1) nor single letters."""
    out: list[str] = []
    for w in _WORD.findall(name):
        if w in _PLAIN_WORDS or len(w) < 3 or re.fullmatch(r"T\d*", w) or w in out:
            continue
        out.append(w)
    return out


def distinct_kernels(names: list[str], limit: int = 60) -> dict[str, str]:
    """Short names (`short_kernel`) for a set of kernels that tell them apart. Kernels whose
    short names collide (four `at::native::vectorized_elementwise_kernel<…>`) get the words of
    their signature that the group does not share (`… · CUDAFunctor_add`, `… · BinaryFunctor
    BFloat16`): the first one, or as many (up to `TAG_WORDS`) as it takes for the group to
    differ; else their position in the group (`… #2`)."""
    short = {n: short_kernel(n, limit) for n in names}
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(short[n], []).append(n)
    out = dict(short)
    for base, same in groups.items():
        if len(same) < 2:
            continue
        own = set(_telling_words(base))
        words = {n: [w for w in _telling_words(n) if w not in own] for n in same}
        common = set.intersection(*(set(ws) for ws in words.values()))
        rest = {n: [w for w in words[n] if w not in common] for n in same}
        tags: dict[str, str] = {}
        for k in range(1, TAG_WORDS + 1):
            tags = {n: " ".join(rest[n][:k]) for n in same}
            if all(tags.values()) and len(set(tags.values())) == len(same):
                break
        else:
            tags = {n: f"#{i + 1}" for i, n in enumerate(same)}
        for n in same:
            head = base.rstrip("…")
            while len(head) + len(tags[n]) + 3 > limit and "::" in head:
                head = head.split("::", 1)[1]  # namespaces go first, the kernel's name stays
            out[n] = f"{head} · {tags[n]}"
            if len(out[n]) > limit:
                out[n] = out[n][: limit - 1] + "…"
    return out
