"""Analysis: nsys SQLite exports and PyTorch-profiler (Kineto) traces → Metrics → comparisons,
advice and reports.

Public API:
- `analyze_paths(paths, label=None) -> Metrics`
- `compare(metrics_list, labels=None) -> Comparison`
- `advise(metrics) -> list[Advice]`
- `headline(metrics) -> dict[str, float | None]` (flat numbers for the store / campaigns)
- `write_report(metrics_list, out_dir, title) -> dict[str, Path]` (html, md, json)
"""

from __future__ import annotations

from orchestrator.analysis.advice import Advice, advise
from orchestrator.analysis.compare import Comparison, ComparisonRow, compare
from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.metrics import Metrics, RankMetrics, Temporal, headline
from orchestrator.analysis.report import write_report

__all__ = [
    "Advice",
    "Comparison",
    "ComparisonRow",
    "Metrics",
    "RankMetrics",
    "Temporal",
    "advise",
    "analyze_paths",
    "compare",
    "headline",
    "write_report",
]
