"""How numbers and names read, in the terminal and in reports: durations and sizes in human
units, short labels for runs (with a legend when they are letters), short kernel names (the
full one goes on hover or in --json)."""

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


def letters(i: int) -> str:
    """0 → A, 25 → Z, 26 → AA (spreadsheet column names)."""
    out = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def short_labels(args: list[str]) -> list[str]:
    """Labels for runs: the last path part (file name without trace suffixes), made unique by
    prefixing parent folders where two would be equal."""

    def parts(a: str) -> list[str]:
        p = Path(a)
        ps = [x for x in p.parts if x not in ("/", ".")]
        if ps and p.is_file():
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
