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

if TYPE_CHECKING:
    from orchestrator.store.db import Store


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
        return AnalysisInput(run.run_id, [collected], run.run_id)
    live = Path(run.run_dir) / "artifacts"
    if not run.transport and live.is_dir():  # a remote run's folder is on the cluster
        return AnalysisInput(run.run_id, [live], run.run_id)
    raise UserError(f"run {run.run_id} has no artifacts yet ({run.state}); `gh-run fetch` it")


def analysis_inputs(store: Store, home: Path, ref: str) -> list[Path]:
    """The folder holding a run's traces (`analysis_input`)."""
    return analysis_input(store, home, ref).paths
