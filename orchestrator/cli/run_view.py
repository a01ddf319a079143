"""How a run's state and end are told: coloured state, elapsed time, the end line with its
exit code and reason, and the tail of the job's stderr (submit --wait, status RUN, campaigns)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from orchestrator.cli.table import paint
from orchestrator.core.errors import GhRunError
from orchestrator.core.escape import plain
from orchestrator.store.db import Run, exit_code_worth_showing

STATE_STYLE = {
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "PENDING": "yellow",
    "INTENT": "yellow",
    "FAILED": "red",
    "TIMEOUT": "red",
    "NODE_FAIL": "red",
    "OUT_OF_MEMORY": "red",
    "CANCELLED": "magenta",
    "SUBMIT_FAILED": "red",
}


def state_style(state: str) -> str | None:
    return STATE_STYLE.get(state)


def state_label(run: Run) -> str:
    """The state as a listing shows it: SLURM's, and why where that is known to matter (a
    job that died of GPU out-of-memory reads `FAILED (GPU OOM)`)."""
    from orchestrator.core.gpu_oom import is_gpu_oom

    if run.state == "FAILED" and is_gpu_oom(run.reason):
        return "FAILED (GPU OOM)"
    return run.state


def elapsed(run: Run) -> str:
    if run.submitted_at is None:
        return "-"
    end = run.ended_at or time.time()
    secs = int(end - run.submitted_at)
    return f"{secs // 3600:d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def exit_text(run: Run) -> str:
    code = exit_code_worth_showing(run.state, run.exit_code)
    return "-" if code is None else str(code)


def tail(run: Run, path: Path, lines: int) -> list[str]:
    """The last `lines` lines of one of the run's text files (read from its last 64 KiB),
    on this machine or on the cluster's login node; [] if absent."""
    from orchestrator.runs.lifecycle import transport_of_run

    data = transport_of_run(run).read_tail(str(path), 64 * 1024)
    return data.decode("utf-8", "replace").splitlines()[-lines:] if data else []


def end_line(run: Run) -> str:
    """`RUN: STATE, exit code N (reason) after H:MM:SS`; no exit code where it says nothing."""
    code = exit_code_worth_showing(run.state, run.exit_code)
    said = f", exit code {code}" if code is not None else ""
    why = f" ({plain(run.reason)})" if run.reason and run.reason != f"exit code {code}" else ""
    state = paint(run.state, state_style(run.state))
    hint = ""
    from orchestrator.core.gpu_oom import is_gpu_oom

    if is_gpu_oom(run.reason):
        hint = f"; `gh-run analyze {run.run_id}` says what held the memory"
    return f"{run.run_id}: {state}{said}{why} after {elapsed(run)}{hint}"


def print_stderr_tail(run: Run, lines: int = 10, indent: str = "  ") -> None:
    """The last lines of a run's stderr (rank 0 / the batch step), if it wrote any."""
    from orchestrator.runs.lifecycle import executor_for

    _, err_path = executor_for(run).log_paths(run)
    try:
        got = tail(run, err_path, lines)
    except GhRunError as exc:  # the login node went away: the state is known anyway
        from orchestrator.cli.state import warn

        warn(f"cannot read {err_path}: {exc}")
        got = []
    if got:
        print(f"{indent}last lines of {err_path}:")
        for line in got:
            print(f"{indent}  {line}")
    sys.stdout.flush()


def print_end(run: Run, lines: int = 10) -> None:
    """The end line, and for a run that did not complete the tail of its stderr."""
    print(end_line(run))
    if run.state not in ("COMPLETED", "PENDING", "RUNNING"):
        print_stderr_tail(run, lines)
