"""Where a campaign's figures come from, and why one is absent.

A run's figures come from three sources: the workload's own `metrics.json` (the contract of
workloads/sft.py: `WORKLOAD_KEYS`), the analysis of the traces it left (the metric catalogue's
campaign view) and the scheduler (`elapsed_s`). A threshold whose figure is absent cannot be
judged; `why_absent` says, in the run's own terms, which source was missing and what it lacked,
so that the sentence of an unjudged threshold names the cause and not only the symptom.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.artifacts import collect as artifacts
from orchestrator.store.db import Run

# metrics.json (written by workloads.sft, or any workload following its contract) → our keys.
WORKLOAD_KEYS = {
    "median_step_time_s": "step_time_s",
    "tokens_per_s": "tokens_per_s",
    "peak_gpu_memory_bytes": "peak_gpu_memory_bytes",
    "peak_host_rss_bytes": "peak_host_rss_bytes",
    "final_loss": "final_loss",
    "median_data_time_s": "data_time_s",
    "median_step_cpu_time_s": "step_cpu_time_s",
    "median_step_cpu_relative": "step_cpu_relative",
    "median_cpu_reference_s": "cpu_reference_s",
}
# metrics.json's per-phase CPU figures (--cpu-reference: each phase's CPU seconds per step, and
# the same in units of the reference work) → one stored key per phase: prefix + name. Not
# watched metrics: what "what changed" compares when a night regressed on CPU time.
PHASE_SOURCES = {
    "median_phase_cpu_s": "phase_cpu_s.",
    "median_phase_cpu_relative": "phase_cpu_relative.",
}
TRACE_SUFFIXES = (".sqlite", ".pt.trace.json", ".pt.trace.json.gz")


def run_files(home: Path, run: Run) -> Path:
    collected = artifacts.store_dir(home, run.run_id) / "artifacts"
    if collected.is_dir() or run.transport:  # a remote run's folder is on the cluster
        return collected
    return Path(run.run_dir) / "artifacts"


def trace_files(folder: Path) -> list[Path]:
    """The run's traces: those here, and those the job analysed and left on the cluster (their
    records, `REPORT.gh-run.json`, stand for them: analysis reads the record)."""
    from orchestrator.artifacts.left_reports import RECORD_SUFFIX

    here = {p for p in folder.glob("*") if p.name.endswith(TRACE_SUFFIXES)}
    left = {
        r.with_name(r.name.removesuffix(RECORD_SUFFIX))
        for r in folder.glob("*" + RECORD_SUFFIX)
        if r.name.removesuffix(RECORD_SUFFIX).endswith(TRACE_SUFFIXES)
    }
    return sorted(here | left)


def why_absent(home: Path, run: Run, key: str, *, named: bool = True) -> str:
    """Why run `run` has no value of figure `key`, in a sentence fragment ("run X wrote no
    metrics.json"), from what its collected folder holds; `named`: with the run's id (else
    "the run", for a sentence many variants share)."""
    folder = run_files(home, run)
    who = f"run {run.run_id}" if named else "the run"
    source = {v: k for k, v in WORKLOAD_KEYS.items()}.get(key)
    if source is not None:
        mfile = folder / "metrics.json"
        if not mfile.is_file():
            its = f": {key} is its {source}" if source != key else ""
            return f"{who} wrote no metrics.json (the workload's own figures{its})"
        try:
            data = json.loads(mfile.read_text())
        except (OSError, ValueError):
            return f"{who}'s metrics.json is not readable JSON"
        if not isinstance(data, dict) or source not in data:
            return f"{who}'s metrics.json has no {source}"
        return f"{who}'s metrics.json gives {source} as {str(data[source])[:40]!r}, not a number"
    if key == "elapsed_s":
        return f"the scheduler recorded no start or end of {who}"
    if not trace_files(folder):
        return (
            f"{who} left no trace to analyse, where {key} comes from (its job profiles with "
            "profile.tool: none, or its reports were not collected)"
        )
    from orchestrator.analysis.catalogue.views import metric

    try:
        need = metric(key).sources.need
    except KeyError:
        need = None
    lacks = f" (it needs {need.says})" if need is not None else ""
    return f"the trace of {who} does not measure {key}{lacks}"
