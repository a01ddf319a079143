"""Analysis: nsys SQLite exports and PyTorch-profiler (Kineto) traces → one timeline per rank
(`timeline.RankTimeline`) → Metrics (per rank, aggregate, across ranks) → comparisons, advice
and reports (docs/metrics.md). May import: core, nsys (a report exported here); its own
folders are layers (pyproject.toml's import-linter contracts).

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

import importlib
from typing import TYPE_CHECKING, Any

# Each public name and the module that holds it, imported on first use (PEP 562): a command
# that analyses one trace does not pay for the report's Jinja, compare, or the nsys reader
# (bench/bench_cli.py's `analyze` row; tests/unit/test_cli_imports.py).
_HOME = {
    "Advice": "presentation.advice",
    "advise": "presentation.advise",
    "Comparison": "presentation.compare",
    "ComparisonRow": "presentation.compare",
    "compare": "presentation.compare",
    "RunSet": "loader",
    "analyze_paths": "loader",
    "analyze_runs": "loader",
    "Metrics": "metrics",
    "RankMetrics": "metrics",
    "Temporal": "metrics",
    "headline": "catalogue.views",
    "write_report": "presentation.report",
}

__all__ = [  # _HOME's names
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

if TYPE_CHECKING:
    from orchestrator.analysis.catalogue.views import headline
    from orchestrator.analysis.loader import RunSet, analyze_paths, analyze_runs
    from orchestrator.analysis.metrics import Metrics, RankMetrics, Temporal
    from orchestrator.analysis.presentation.advice import Advice
    from orchestrator.analysis.presentation.advise import advise
    from orchestrator.analysis.presentation.compare import Comparison, ComparisonRow, compare
    from orchestrator.analysis.presentation.report import write_report


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:  # a submodule not imported yet: the import system imports it next
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
