"""Analysis: nsys SQLite exports and PyTorch-profiler (Kineto) traces → one timeline per rank
(`timeline.RankTimeline`) → Metrics (per rank, aggregate, across ranks) → comparisons, advice
and reports (docs/metrics.md).

Public API:
- `analyze_paths(paths, label=None, *, max_trace_bytes=None, jobs=None) -> Metrics` (one run)
- `analyze_runs(paths, label=None, ...) -> RunSet` (the runs among the inputs: ranks of one job
  together, separate captures apart; `captures`)
- `kineto.read_timeline(path)`, `nsys_sqlite.read_timelines(path)` -> timelines;
  `rank_metrics.compute(timeline)` -> the metrics of one
- `compare(metrics_list, labels=None) -> Comparison`
- `advise(metrics) -> list[Advice]`
- `headline(metrics) -> dict[str, float | None]` (flat numbers for the store / campaigns)
- `write_report(metrics_list, out_dir, title) -> dict[str, Path]` (html, md, json)
"""

from __future__ import annotations

from orchestrator.analysis.advice import Advice, advise
from orchestrator.analysis.compare import Comparison, ComparisonRow, compare
from orchestrator.analysis.loader import RunSet, analyze_paths, analyze_runs
from orchestrator.analysis.metrics import Metrics, RankMetrics, Temporal, headline
from orchestrator.analysis.report import write_report

__all__ = [
    "Advice",
    "Comparison",
    "ComparisonRow",
    "Metrics",
    "RankMetrics",
    "RunSet",
    "Temporal",
    "advise",
    "analyze_paths",
    "analyze_runs",
    "compare",
    "headline",
    "write_report",
]
