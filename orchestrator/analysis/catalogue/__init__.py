"""The metric catalogue: every metric declared once (`entries.CATALOGUE`, `entries.FAMILIES`:
name, group, label, unit, better direction, per-rank getter, cross-rank aggregation, sources,
definition; `model.Metric`), and where each table shows it (`views`). compare, the CLI's
`analyze` table, the headline numbers, campaigns, the verdict, the report's tables and
docs/metrics.md all read it.

Adding a metric: its family's function (a `RankMetrics` field, or `Metric.compute` from the
entry's timeline) plus one entry in `entries.CATALOGUE`; every open view shows it.
"""

from __future__ import annotations

from orchestrator.analysis.catalogue.entries import CATALOGUE, FAMILIES
from orchestrator.analysis.catalogue.model import Entry, Family, Metric, Sources
from orchestrator.analysis.catalogue.views import metric, metrics, value

__all__ = [
    "CATALOGUE",
    "FAMILIES",
    "Entry",
    "Family",
    "Metric",
    "Sources",
    "metric",
    "metrics",
    "value",
]
