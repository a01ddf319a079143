"""Labels for runs named by paths: the last path part without trace suffixes, made unique by
parent folders (`short_labels`), and column headers for compared runs (`column_labels`: the
names when they fit, else A, B, C… with a legend)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis.record_files import record_path


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
