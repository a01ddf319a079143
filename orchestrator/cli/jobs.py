"""Commands for one run at a time: render, check, submit, status, logs, cancel, fetch, wait."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from orchestrator import runs as R
from orchestrator.cli.state import STATE, err, out, warn
from orchestrator.errors import RuntimeFailure, UserError
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.store import Run, iso

SpecArg = Annotated[
    Path, typer.Argument(help="Job spec (YAML), e.g. jobs/smoke.yaml.", show_default=False)
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        metavar="KEY=VALUE",
        help="Override a spec field, e.g. --set resources.nodes=2 (repeatable).",
    ),
]
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", help="Cluster name or file, instead of the spec's.")
]
ExecutorOpt = Annotated[
    R.ExecutorKind,
    typer.Option(
        "--executor",
        "-x",
        help="slurm, local, or auto (slurm when a controller answers, else local).",
    ),
]
RunArg = Annotated[str, typer.Argument(help="Run id (or unique prefix, job id, or 'last').")]

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


def _styled(state: str) -> str:
    return f"[{STATE_STYLE.get(state, 'white')}]{state}[/]"


def _elapsed(run: Run) -> str:
    if run.submitted_at is None:
        return "-"
    end = run.ended_at or time.time()
    secs = int(end - run.submitted_at)
    return f"{secs // 3600:d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def _tail(path: Path, lines: int) -> list[str]:
    if not path.is_file():
        return []
    with path.open("rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        text = f.read().decode("utf-8", "replace")
    return text.splitlines()[-lines:]


RunIdOpt = Annotated[
    str | None,
    typer.Option(
        "--run-id",
        help="Run id (default: a new one, <name>-<date>-<time>-<hex>); render and submit with "
        "the same id give the same script, byte for byte.",
    ),
]
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,150}$")


def _run_id(value: str | None) -> str | None:
    if value is not None and (not RUN_ID_RE.match(value) or ".." in value):
        raise UserError(
            f"--run-id: {value!r} is not a run id; use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, no '..'), e.g. smoke-try1"
        )
    return value


def render_cmd(
    spec: SpecArg,
    set_: SetOpt = None,
    cluster: ClusterOpt = None,
    executor: ExecutorOpt = "auto",
    run_id: RunIdOpt = None,
) -> None:
    """Print the job script exactly as `submit` with the same options would submit it."""
    prep = R.prepare(spec, set_ or [], cluster)
    rid = _run_id(run_id) or R.new_run_id(prep.spec.name)
    run_dir = R.run_dir_for(prep.cluster, STATE.home, rid)
    # The executor is chosen exactly as submit chooses it (same default, same `auto` rule):
    # its launcher (srun, or direct for local) is part of the script.
    ex = R.choose_executor(executor, warn=warn)
    rendered = R.render(prep, rid, run_dir, ex.launcher)
    typer.echo(rendered.script, nl=False)


def check_cmd(spec: SpecArg, set_: SetOpt = None, cluster: ClusterOpt = None) -> None:
    """Validate against the partition, then ask the real controller (sbatch --test-only)."""
    prep = R.prepare(spec, set_ or [], cluster)
    _check(prep)


def _check(prep: R.Prepared) -> None:
    import tempfile

    from orchestrator.container import check_image
    from orchestrator.yamlio import display_path as _where

    check_image(prep.spec.container, _where(prep.spec_path) if prep.spec_path else prep.spec.name)
    rid = R.new_run_id(prep.spec.name)
    run_dir = R.run_dir_for(prep.cluster, STATE.home, rid)
    rendered = R.render(prep, rid, run_dir, "srun")
    with tempfile.TemporaryDirectory(prefix="gh-run-check-") as tmp:
        script = Path(tmp) / "job.sbatch"
        script.write_text(rendered.script)
        ok, text = SlurmExecutor().test_only(script)
    from rich.markup import escape

    from orchestrator.cluster import explain_controller
    from orchestrator.yamlio import display_path

    words = explain_controller(ok, text)
    if ok:
        out.print(
            f"[green]ok:[/] the SLURM controller accepts {escape(prep.spec.name)} on partition "
            f"{escape(prep.partition_name)}: {escape(words)} (controller: {escape(text)})"
        )
    else:
        src = display_path(Path(prep.cluster.source)) if prep.cluster.source else "the cluster"
        raise UserError(
            f"{display_path(prep.spec_path) if prep.spec_path else prep.spec.name}: the SLURM "
            f"controller of cluster "
            f"{prep.cluster.name} refuses this job on partition {prep.partition_name}: {words} "
            f'(controller: "{text}"); gh-run\'s own check against {src} passed, so ask for less '
            f"in resources, or correct {src} if it promises more than the partition has"
        )


def submit_cmd(
    spec: SpecArg,
    set_: SetOpt = None,
    cluster: ClusterOpt = None,
    executor: ExecutorOpt = "auto",
    wait: Annotated[
        bool, typer.Option("--wait", "-w", help="Track until the job ends, then collect.")
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Only ask the controller (sbatch --test-only).")
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
    run_id: RunIdOpt = None,
) -> None:
    """Validate, render and submit a job; with --wait, track it and collect its artifacts."""
    prep = R.prepare(spec, set_ or [], cluster)
    if check:
        _check(prep)
        return
    rid = _run_id(run_id)
    store = STATE.store()
    ex = R.choose_executor(executor, warn=warn)
    run = R.submit(store, prep, ex, STATE.home, run_id=rid)
    out.print(
        f"submitted [bold]{run.run_id}[/] as {ex.name} job {run.job_id} "
        f"on {prep.cluster.name}/{prep.partition_name}"
    )
    out.print(f"  run folder: {run.run_dir}")
    if not wait:
        out.print(f"  follow it:  gh-run status {run.run_id}   gh-run logs {run.run_id} -f")
        return
    _wait_and_collect([run], timeout)


def _wait_and_collect(runs: list[Run], timeout: float | None) -> None:
    store = STATE.store()
    start = time.time()

    def table(current: list[Run]) -> Table:
        t = Table(box=None, show_header=False)
        for r in current:
            t.add_row(r.run_id, r.job_id or "-", _styled(r.state), f"{int(time.time() - start)} s")
        return t

    with Live(table(runs), console=err, refresh_per_second=4, transient=True) as live:
        final = R.wait(
            store, runs, on_poll=lambda c: live.update(table(c)), warn=warn, timeout=timeout
        )
    failed = False
    for run in final:
        if not run.terminal:
            out.print(
                f"{run.run_id}: still {run.state} after {timeout:.0f} s; "
                f"`gh-run wait {run.run_id}` to keep waiting"
            )
            failed = True
            continue
        manifest = R.collect(store, run, STATE.home) if run.state != "SUBMIT_FAILED" else None
        _print_end(run)
        if manifest is not None:
            total = sum(f.size for f in manifest.files)
            out.print(
                f"  collected {len(manifest.files)} files ({total} bytes, sha256 verified)"
                f" into {STATE.home / 'artifacts' / run.run_id}"
            )
            for name in manifest.refused:
                warn(f"refused {name}: a link or a path outside the run's artifacts folder")
        failed |= run.state != "COMPLETED"
    if failed:
        raise typer.Exit(1)


def _print_end(run: Run) -> None:
    code = f", exit code {run.exit_code}" if run.exit_code is not None else ""
    why = f" ({run.reason})" if run.reason else ""
    out.print(f"{run.run_id}: {_styled(run.state)}{code}{why} after {_elapsed(run)}")
    if run.state not in ("COMPLETED", "PENDING", "RUNNING"):
        ex = R.executor_for(run)
        _, err_path = ex.log_paths(run)
        lines = _tail(err_path, 10)
        if lines:
            out.print(f"  last lines of {err_path}:")
            for line in lines:
                out.print(f"    {line}", markup=False)


def status_cmd(
    run: Annotated[str | None, typer.Argument(help="A run (default: the latest runs).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many runs to list.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show runs and their states (refreshed from SLURM in one batched query)."""
    store = STATE.store()
    R.repair_intents(store, warn=warn)
    runs = [store.find_run(run)] if run else store.list_runs(limit=limit)
    runs = R.refresh(store, runs, warn=warn)
    if as_json:
        typer.echo(json.dumps([store.dump_run(r.run_id) for r in runs], indent=2))
        return
    if run:
        r = runs[0]
        t = Table(show_header=False, box=None)
        for k, v in (
            ("run", r.run_id),
            ("name", r.name),
            ("state", _styled(r.state)),
            ("exit code", str(r.exit_code) if r.exit_code is not None else "-"),
            ("reason", r.reason or "-"),
            ("job", f"{r.executor} {r.job_id or '-'}"),
            ("attempt", str(r.attempt + 1)),
            ("where", f"{r.cluster}/{r.partition}"),
            ("run folder", r.run_dir),
            ("submitted", iso(r.submitted_at)),
            ("ended", iso(r.ended_at)),
            ("elapsed", _elapsed(r)),
            ("collected", iso(r.collected_at)),
        ):
            t.add_row(f"[bold]{k}[/]", v)
        out.print(t)
        ev = Table(title="events", box=None)
        ev.add_column("time")
        ev.add_column("state")
        ev.add_column("detail")
        for e in store.events(r.run_id):
            ev.add_row(iso(e.ts), _styled(e.state), e.detail or "")
        out.print(ev)
        if r.terminal and r.state != "COMPLETED":
            _print_end(r)
        return
    if not runs:
        out.print(f"no runs yet in {store.path}; try `gh-run submit jobs/smoke.yaml --wait`")
        return
    t = Table()
    for col in ("run", "state", "exit", "job", "where", "submitted", "elapsed", "collected"):
        t.add_column(col)
    for r in runs:
        t.add_row(
            r.run_id,
            _styled(r.state),
            str(r.exit_code) if r.exit_code is not None else "-",
            f"{r.executor}:{r.job_id or '-'}",
            f"{r.cluster}/{r.partition}",
            iso(r.submitted_at),
            _elapsed(r),
            "yes" if r.collected_at else "-",
        )
    out.print(t)


def logs_cmd(
    run: RunArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")
    ] = False,
    stderr: Annotated[bool, typer.Option("--err", help="Show stderr instead of stdout.")] = False,
    tail: Annotated[int, typer.Option("--tail", help="Lines from the end (0 = all).")] = 0,
) -> None:
    """Print a run's log (stdout of the batch step and rank 0; --err for stderr)."""
    store = STATE.store()
    r = store.find_run(run)
    ex = R.executor_for(r)
    path = ex.log_paths(r)[1 if stderr else 0]
    pos = 0
    if path.is_file():
        if tail:
            lines = _tail(path, tail)
            typer.echo("\n".join(lines))
            pos = path.stat().st_size
        else:
            pos = _print_from(path, 0)
    elif r.state == "SUBMIT_FAILED":
        raise RuntimeFailure(f"run {r.run_id} was never submitted ({r.reason}); it has no log")
    elif not follow:
        raise RuntimeFailure(
            f"no log yet at {path}: the job has not started writing it (state: {r.state}); "
            "try --follow"
        )
    if not follow:
        return
    while True:
        r = R.refresh(store, [r], warn=warn)[0]
        if path.is_file():
            pos = _print_from(path, pos)
        if r.terminal:
            if path.is_file():
                _print_from(path, pos)
            err.print(f"-- {r.run_id} ended: {r.state}")
            return
        time.sleep(1.0)


def _print_from(path: Path, pos: int) -> int:
    with path.open("rb") as f:
        f.seek(pos)
        data = f.read()
    if data:
        typer.echo(data.decode("utf-8", "replace"), nl=False)
    return pos + len(data)


def cancel_cmd(run: RunArg) -> None:
    """Cancel a run (scancel, or a signal to the local job)."""
    store = STATE.store()
    r = R.refresh(store, [store.find_run(run)], warn=warn)[0]
    if r.terminal:
        out.print(f"{r.run_id} already ended: {r.state}")
        return
    R.executor_for(r, warn=warn).cancel(r)
    store.update_run(r.run_id, event="cancel requested by user")
    out.print(
        f"cancel sent to {r.run_id} (job {r.job_id}); `gh-run status {r.run_id}` shows "
        "when it has stopped"
    )


def fetch_cmd(run: RunArg) -> None:
    """Collect a finished run's artifacts into the artifact store (idempotent, verified)."""
    store = STATE.store()
    r = R.refresh(store, [store.find_run(run)], warn=warn)[0]
    manifest = R.collect(store, r, STATE.home)
    total = sum(f.size for f in manifest.files)
    out.print(
        f"{r.run_id}: {len(manifest.files)} files, {total} bytes, sha256 verified, in "
        f"{STATE.home / 'artifacts' / r.run_id}"
    )
    for name in manifest.refused:
        warn(f"refused {name}: a link or a path outside the run's artifacts folder")


def wait_cmd(
    run: Annotated[list[str], typer.Argument(help="Runs to wait for.")],
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
) -> None:
    """Wait for runs to end, then collect their artifacts."""
    store = STATE.store()
    _wait_and_collect([store.find_run(x) for x in run], timeout)


def register(app: typer.Typer) -> None:
    app.command("render")(render_cmd)
    app.command("check")(check_cmd)
    app.command("submit")(submit_cmd)
    app.command("status")(status_cmd)
    app.command("logs")(logs_cmd)
    app.command("cancel")(cancel_cmd)
    app.command("fetch")(fetch_cmd)
    app.command("wait")(wait_cmd)
