"""What an argument of `analyze`, `compare` and `report` names when it is not a file: a run of
the state store, resolved as every command resolves a run reference (`Store.find_run`), and
the traces it holds.

Its own module so that `analyze` of a trace file imports neither the store nor the executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.errors import UserError
from orchestrator.core.memory_files import MEMORY_DIR, dump_rank

if TYPE_CHECKING:
    from orchestrator.store.db import Run, Store


@dataclass(frozen=True)
class AnalysisInput:
    """What an argument of analyze/compare/report names: its traces, the label that heads it
    (a run's id, never the `last` or prefix that was typed) and the run, if it is one."""

    label: str
    paths: list[Path]
    run_id: str | None = None


def analysis_input(store: Store, home: Path, ref: str) -> AnalysisInput:
    """The traces of a run, resolved as every command resolves a run reference
    (`Store.find_run`: id, unique prefix, job id, `last`): its collected copy, else its run
    folder."""
    from orchestrator.artifacts import collect as artifacts
    from orchestrator.store.db import NoSuchRun

    try:
        run = store.find_run(ref)
    except NoSuchRun as exc:
        raise UserError(
            f"{ref}: not a file or folder here, and {exc.message[:1].lower()}{exc.message[1:]}; "
            "give a trace (.sqlite, .pt.trace.json[.gz]), a folder of them, or a run id"
        ) from None
    collected = artifacts.store_dir(home, run.run_id) / "artifacts"
    if run.collected_at and collected.is_dir():
        return AnalysisInput(run.run_id, [_with_traces(run, collected)], run.run_id)
    live = Path(run.run_dir) / "artifacts"
    if not run.transport and live.is_dir():  # a remote run's folder is on the cluster
        return AnalysisInput(run.run_id, [_with_traces(run, live)], run.run_id)
    raise UserError(f"run {run.run_id} has no artifacts yet ({run.state}); `gh-run fetch` it")


# What analysis reads (loader.expand has the last word); a record (`.gh-run.json`) stands for
# a report the job analysed and left on the cluster.
REPORT_NAMES = (".nsys-rep", ".sqlite", ".gh-run.json", ".json.gz")


def _readable(p: Path) -> bool:
    """Whether analysis would read `p`: a report, an export, a record, a compressed trace, a
    memory snapshot gh-run's hook dumped (`memory/memory[-oom].rank<R>.pickle`: a job with
    `profile.memory` and no profiler, say one that ran out of GPU memory), or a JSON file whose
    head names `traceEvents` (a metrics.json is none)."""
    if not p.is_file():
        return False
    if p.name.endswith(REPORT_NAMES):
        return True
    if p.parent.name == MEMORY_DIR and dump_rank(p.name) is not None:
        return True  # as loader.expand reads a folder's snapshots (memory_inputs.hook_dump)
    if not p.name.endswith(".json"):
        return False
    try:
        with p.open("rb") as fh:
            return b'"traceEvents"' in fh.read(1 << 20)  # as loader._looks_like_trace
    except OSError:
        return False


def _with_traces(run: Run, folder: Path) -> Path:
    """`folder`, when it holds anything analysis reads; else why the run left no trace, in the
    run's own terms (what its job profiled with, what it brought back), never "pass a run
    folder", which the user did."""
    if any(_readable(p) for p in folder.rglob("*")):
        return folder
    import json

    try:
        spec = json.loads(run.spec_json)
        tool = spec.get("profile", {}).get("tool", "none")
        include = spec.get("artifacts", {}).get("include", [])
    except (ValueError, AttributeError):
        tool, include = "?", []
    where = run.spec_path or "its job spec"
    if tool == "none":
        why = (
            f"its job profiles nothing (profile.tool: none); set profile.tool to nsys or torch "
            f"in {where} (or write a trace into $GH_RUN_ARTIFACTS) and submit it again"
        )
    else:
        why = (
            f"its job profiled with {tool} but brought back no trace (artifacts.include: "
            f"{', '.join(include) or '-'}); `gh-run logs {run.run_id} --err` says what the "
            "profiler did"
        )
    raise UserError(f"run {run.run_id} left no trace to analyse ({run.state}): {why}")


def analysis_inputs(store: Store, home: Path, ref: str) -> list[Path]:
    """The folder holding a run's traces (`analysis_input`)."""
    return analysis_input(store, home, ref).paths
