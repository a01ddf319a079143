"""For the campaign report: each variant's own run report (the analysis of its trace), and
for a regressed variant what changed against the baseline's nearest good run."""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.changes import what_changed
from orchestrator.campaign.cpu_changes import JUDGED, cpu_changes
from orchestrator.campaign.results import Analyses, CampaignResult
from orchestrator.campaign.sources import run_files, trace_files
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.executors.base import Warn
from orchestrator.store.db import Store

# Metrics whose regression is a slower step: the traced steps should show it.
SLOWER_IS_UP = {"step_time_s", "step_cpu_time_s", "step_cpu_relative", "data_time_s", "elapsed_s"}


def analysis(
    store: Store, home: Path, run_id: str, analyses: Analyses, warn: Warn | None = None
) -> Metrics | None:
    """The run's trace analysis (made once per run), or None when it left no trace."""
    if run_id in analyses:
        return analyses[run_id]
    try:
        run = store.get_run(run_id)
    except UserError:
        return None
    traces = trace_files(run_files(home, run))
    if not traces:
        return None
    from orchestrator.analysis import analyze_paths

    try:
        m = analyze_paths(traces, label=run_id)
    except (GhRunError, ValueError, OSError) as exc:
        if warn:
            warn(f"{run_id}: trace analysis failed ({exc}); no run report")
        return None
    analyses[run_id] = m
    return m


def run_reports(
    store: Store,
    home: Path,
    result: CampaignResult,
    out_dir: Path,
    analyses: Analyses,
    warn: Warn | None = None,
) -> None:
    """runs/<variant>/report.html beside the campaign report, linked from its variant."""
    from orchestrator.analysis import write_report
    from orchestrator.store import scores

    records = scores.often_wrong(store)
    for v in result.variants:
        m = analysis(store, home, v.run_id, analyses, warn)
        if m is None:
            continue
        folder = out_dir / "runs" / v.variant
        write_report([m], folder, f"{result.name} {v.variant}: run {v.run_id}", records)
        v.report = f"runs/{v.variant}/report.html"


def explain(
    store: Store,
    home: Path,
    result: CampaignResult,
    analyses: Analyses,
    warn: Warn | None = None,
) -> None:
    """What changed, for every regressed variant that has a baseline run: in CPU time when it
    regressed on a CPU figure and both runs measured their phases that way, else from the two
    runs' traces."""
    for v in result.variants:
        if not v.regressed or not v.baseline_run_id:
            continue
        mine = analysis(store, home, v.run_id, analyses, warn)
        base = analysis(store, home, v.baseline_run_id, analyses, warn)
        judged = JUDGED & {f.metric for f in v.findings if f.regression}
        if judged:
            cpu = cpu_changes(
                judged,
                store.metrics(v.baseline_run_id),
                store.metrics(v.run_id),
                base_label=v.baseline_run_id,
                label=v.run_id,
            )
            if cpu is not None:
                if mine is not None and base is not None:
                    traced = what_changed(base, mine)
                    cpu.kernels, cpu.groups = traced.kernels, traced.groups
                    if traced.kernels or traced.groups:
                        cpu.notes.append("kernels and metric groups: from the traces (wall time)")
                v.what_changed = cpu
                continue
        if mine is None or base is None:
            continue
        w = what_changed(base, mine)
        slower = [f.metric for f in v.findings if f.regression and f.metric in SLOWER_IS_UP]
        if slower and w.step_change_pct is not None and w.step_change_pct <= 0:
            w.notes.append(
                f"the traced steps did not get slower ({w.step_change_pct:+.0f}%) while "
                f"{', '.join(slower)} did: the trace does not show this regression (noise in "
                "the traced steps, or the change lies outside them)"
            )
        v.what_changed = w
