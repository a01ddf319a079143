"""docs/metrics.md's catalogue section, made from the catalogue: a row per metric (key, group,
label, unit, better direction, how a run's entries add up, which sources measure it, the views
that show it, definition) and per family. `python -m orchestrator.analysis.catalogue
docs/metrics.md` rewrites the section between its markers; a test fails when it is stale."""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis.catalogue import views
from orchestrator.analysis.catalogue.entries import CATALOGUE, FAMILIES
from orchestrator.analysis.catalogue.model import Family, Metric

BEGIN = "<!-- catalogue: begin (python -m orchestrator.analysis.catalogue docs/metrics.md) -->"
END = "<!-- catalogue: end -->"
# what each view is called for a reader
VIEW_NAMES = {
    "analyze": "analyze",
    "compare": "compare",
    "spread": "across ranks",
    "ranks": "report per rank",
    "headline": "store",
    "campaign": "campaigns",
}
ACROSS = {"mean": "mean", "sum": "sum", "max": "max"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def shown_in(met: Metric | Family) -> list[str]:
    """The views that show a metric (by their reader's names)."""
    lists = {
        "headline": views.HEADLINE,
        "campaign": views.CAMPAIGN,
    }
    layouts = {
        "analyze": views.ANALYZE,
        "compare": views.COMPARE,
        "spread": views.SPREAD,
        "ranks": views.RANKS,
    }
    names = {met.key, *getattr(met, "aliases", ())}
    out = []
    for view in views.OPEN_VIEWS:
        if view in layouts:
            placed = {s.key for _, rows in layouts[view] for s in rows}
        else:
            placed = set(lists[view])
        if names & placed or views.in_view(met, view):
            out.append(VIEW_NAMES[view])
    return out


def _across(met: Metric) -> str:
    if met.run is not None:
        return "of the run"
    return ACROSS[met.across]


def markdown() -> str:
    """The section's text, between the markers."""
    lines = [
        BEGIN,
        "",
        "Every metric, as the catalogue (`orchestrator/analysis/catalogue/entries.py`) declares"
        " it. *key*: its name in the state store, campaign files and `compare --json` (the"
        " ending says the unit of the run's value); *better*: the direction that is better;"
        " *across*: how a run's entries (ranks, devices) make the run's value (`mean`, `sum`,"
        " `max`; `of the run`: read from the run, e.g. the cross-rank skews); *measured by*: the"
        " sources that measure it (elsewhere it reads `not measured`, JSON null); *shown in*: the"
        " tables that show it (`store`: `headline`, what `analyze RUN_ID` stores).",
        "",
        "| key | group | label | unit | better | across | measured by | shown in | definition |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in CATALOGUE:
        key = f"`{m.key}`" + "".join(f" (= `{a}`)" for a in m.aliases)
        lines.append(
            f"| {key} | {m.group} | {_cell(m.label)} | {m.unit} | {m.better or '-'}"
            f" | {_across(m)} | {m.sources.says()} | {', '.join(shown_in(m))}"
            f" | {_cell(m.definition)} |"
        )
    lines += [
        "",
        "Families: one metric per name the data holds (shown in `analyze`).",
        "",
        "| key | group | label | unit | measured by | definition |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for f in FAMILIES:
        lines.append(
            f"| `{f.key}` | {f.group} | {_cell(f.label)} | {f.unit} | {f.sources.says()}"
            f" | {_cell(f.definition)} |"
        )
    lines += ["", END]
    return "\n".join(lines)


def rewrite(path: Path) -> bool:
    """Put the current section into `path` between its markers; returns whether it changed."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path}: no catalogue markers ({BEGIN} ... {END}); add them")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + markdown() + tail
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text
