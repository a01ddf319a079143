"""Commands for one run at a time: render, check, submit, status, logs, cancel, fetch, wait."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.checks import prepare as P
from orchestrator.cli.state import STATE, err_console, note, note_once, warn
from orchestrator.cli.table import Cell, Column, paint, print_fields, print_table
from orchestrator.core.errors import GhRunError, RuntimeFailure, UserError
from orchestrator.executors.choose import ExecutorKind, choose_executor, transport_for, transport_of

if TYPE_CHECKING:  # Rich, the store and the transports are imported when a command needs them
    from rich.table import Table

    from orchestrator.artifacts.collect import Manifest, SizeLimits
    from orchestrator.store.db import Run, Store
    from orchestrator.transport.base import Transport

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
    ExecutorKind,
    typer.Option(
        "--executor",
        "-x",
        help="slurm, local, or auto (slurm when a controller answers, else local).",
    ),
]
RunArg = Annotated[str, typer.Argument(help="Run id (or unique prefix, job id, or 'last').")]


def _styled(state: str) -> str:
    """A state in Rich markup (for the live display of submit --wait)."""
    from orchestrator.cli import run_view

    return f"[{run_view.state_style(state) or 'white'}]{state}[/]"


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
    if value is not None and (not RUN_ID_RE.fullmatch(value) or ".." in value):
        raise UserError(
            f"--run-id: {value!r} is not a run id; use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, no '..'), e.g. smoke-try1"
        )
    return value


def _prepare(
    spec: Path,
    overrides: list[str] | None,
    cluster: str | None,
    problems: list[GhRunError] | None = None,
    ask_controller: bool = False,
) -> P.Prepared:
    """The checked job (`prepare.prepare`), and a note on stderr when its cluster file is not
    the site's."""
    from orchestrator.site.config import origin_note

    prep = P.prepare(
        spec, overrides or [], cluster, problems=problems, ask_controller=ask_controller
    )
    text = origin_note(prep.cluster.origin, prep.cluster.name)
    if text:
        note_once(text)
    return prep


def render_cmd(
    spec: SpecArg,
    set_: SetOpt = None,
    cluster: ClusterOpt = None,
    executor: ExecutorOpt = "auto",
    run_id: RunIdOpt = None,
) -> None:
    """Print the job script exactly as `submit` would submit it.

    With the same options (and --run-id), `submit` writes this very script, byte for byte."""
    # `auto` asks a controller whether it answers: the question goes out at once.
    prep = _prepare(spec, set_, cluster, ask_controller=executor == "auto")
    rid = _run_id(run_id) or P.new_run_id(prep.spec.name)
    # The executor is chosen exactly as submit chooses it (same default, same `auto` rule):
    # its launcher (srun, or direct for local) is part of the script; so is the run folder,
    # on the cluster side (a remote paths.runs is resolved on the login node).
    ex = choose_executor(executor, warn=warn, cluster=prep.cluster, render_only=True)
    run_dir = P.run_dir_for(prep.cluster, STATE.home, rid, transport_of(ex))
    rendered = P.render(prep, rid, run_dir, ex.launcher)
    typer.echo(rendered.script, nl=False)


def check_cmd(spec: SpecArg, set_: SetOpt = None, cluster: ClusterOpt = None) -> None:
    """Check a job against its partition and the SLURM controller.

    Everything gh-run can tell before submitting, every problem at once: the partition's
    limits (at their lines in the job file), the run folder (paths.runs), the image and nsys
    on this machine, and that the controller reached is the cluster the cluster file names.
    Then the real controller's verdict (sbatch --test-only) on the script `submit` would
    send. Exit 2 for a problem in the input, 1 when only the world failed (no controller)."""
    limits: list[GhRunError] = []
    prep = _prepare(spec, set_, cluster, problems=limits, ask_controller=True)
    _check(prep, limits)


def _check(prep: P.Prepared, limits: list[GhRunError] | None = None) -> None:
    from orchestrator.checks import preflight

    transport = transport_for(prep.cluster, warn)
    found = preflight.check_job(prep, STATE.home, transport, limits or [], say=note)
    for f in found:
        if f.warning:
            warn(f.detail)
        elif f.ok and f.shown:
            print(f"{paint('ok:', 'green')} {f.detail}")
    preflight.raise_problems(prep, found)


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
    """Submit a job; --wait tracks it to the end and collects it.

    The spec is validated and rendered as `render` shows it. Without --wait gh-run returns
    once SLURM (or the local executor) has the job; with it, gh-run shows the job's state
    until it ends, then collects its artifacts. Ctrl-C stops waiting, not the job:
    `gh-run wait RUN` picks it up again."""
    from orchestrator.runs import lifecycle as R

    limits: list[GhRunError] = []
    prep = _prepare(
        spec,
        set_,
        cluster,
        problems=limits if check else None,
        ask_controller=check or executor != "local",
    )
    if check:
        _check(prep, limits)
        return
    rid = _run_id(run_id)
    ex = choose_executor(executor, warn=warn, cluster=prep.cluster)
    store = STATE.store()
    run = R.submit(store, prep, ex, STATE.home, run_id=rid)
    print(
        f"submitted {paint(run.run_id, 'bold')} as {ex.name} job {run.job_id} "
        f"on {prep.cluster.name}/{prep.partition_name}"
    )
    where = f" on {transport_of(ex).where}" if transport_of(ex).remote else ""
    print(f"  run folder: {run.run_dir}{where}")
    if not wait:
        print(f"  follow it:  gh-run status {run.run_id}   gh-run logs {run.run_id} -f")
        return
    _wait_and_collect([run], timeout)


def _wait_and_collect(runs: list[Run], timeout: float | None) -> None:
    from rich.live import Live
    from rich.table import Table

    from orchestrator.cli import run_view
    from orchestrator.runs import lifecycle as R

    store = STATE.store()
    start = time.time()

    def table(current: list[Run]) -> Table:
        t = Table(box=None, show_header=False)
        for r in current:
            t.add_row(r.run_id, r.job_id or "-", _styled(r.state), f"{int(time.time() - start)} s")
        return t

    try:
        with Live(table(runs), console=err_console(), refresh_per_second=4, transient=True) as live:
            final = R.wait(
                store, runs, on_poll=lambda c: live.update(table(c)), warn=warn, timeout=timeout
            )
    except KeyboardInterrupt:
        ids = " ".join(r.run_id for r in runs)
        jobs = ", ".join(f"{r.run_id} (job {r.job_id or '-'})" for r in runs)
        verb = "keeps" if len(runs) == 1 else "keep"
        print(
            f"interrupted: stopped waiting; {jobs} {verb} running. `gh-run wait {ids}` waits "
            "again and collects the artifacts; `gh-run cancel RUN` stops a run",
            file=sys.stderr,
        )
        raise typer.Exit(130) from None
    failed = False
    ended = [r for r in final if r.terminal and r.state != "SUBMIT_FAILED"]
    collected = R.collect_many(store, ended, STATE.home, warn)
    for run in final:
        if not run.terminal:
            print(
                f"{run.run_id}: still {run.state} after {timeout:.0f} s; "
                f"`gh-run wait {run.run_id}` to keep waiting"
            )
            failed = True
            continue
        run_view.print_end(run)
        manifest = collected.get(run.run_id)
        if isinstance(manifest, GhRunError):
            print(f"{paint('error:', 'bold red', sys.stderr)} {manifest}", file=sys.stderr)
            failed = True
        elif manifest is not None:
            total = sum(f.size for f in manifest.files)
            print(
                f"  collected {len(manifest.files)} files ({total} bytes, sha256 verified)"
                f" into {STATE.home / 'artifacts' / run.run_id}"
            )
            if manifest.left:
                size = sum(x.size for x in manifest.left)
                print(
                    f"  left {len(manifest.left)} reports ({size} bytes) on the cluster, analysed"
                    f" there; `gh-run fetch {run.run_id} --reports` brings them"
                )
            _warn_refused(manifest)
        failed |= run.state != "COMPLETED"
    if failed:
        raise typer.Exit(1)


def status_cmd(
    run: Annotated[str | None, typer.Argument(help="A run (default: the latest runs).")] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="How many runs to list, newest first.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Also say which gh-run home is shown, and how it was found."
        ),
    ] = False,
) -> None:
    """Show runs and their states (refreshed in one batched query).

    Runs that have not ended are asked about in one batched query per executor (sacct for
    SLURM). Piped output is plain aligned text with every value in full; a narrow terminal
    leaves out the less important columns first, never the run id or the state."""
    from orchestrator.cli import run_view
    from orchestrator.runs import lifecycle as R
    from orchestrator.store.db import iso
    from orchestrator.transport.base import TransportError

    if verbose:
        note(f"{STATE.located_home.describe()}; state store {STATE.home / 'state.db'}")
    store = STATE.store()
    runs = [store.find_run(run)] if run else store.list_runs(limit=limit)
    if store.readonly:
        # Refreshing records what the scheduler says; a home that cannot be written still
        # shows what was recorded.
        warn(f"{store.path} cannot be written: showing the recorded states, not refreshed")
    else:
        try:
            R.repair_intents(store, warn=warn)
            runs = R.refresh(store, [store.get_run(r.run_id) for r in runs], warn=warn)
        except TransportError as exc:
            # A login node that does not answer must not hide what is known of every run.
            warn(f"{exc}; showing the states last recorded")
    if as_json:
        import json

        typer.echo(json.dumps([store.dump_run(r.run_id) for r in runs], indent=2))
        return
    if run:
        _print_run(store, runs[0])
        return
    if not runs:
        print(f"no runs yet in {store.path}; try `gh-run submit jobs/smoke.yaml --wait`")
        return
    columns = [
        Column("run", keep=True),
        Column("state", keep=True),
        Column("exit", right=True, drop=3),
        Column("job", drop=4),
        Column("where", drop=5),
        Column("submitted", drop=6),
        Column("elapsed", right=True, drop=2),
        Column("collected", drop=7),
    ]
    rows = [
        [
            r.run_id,
            (run_view.state_label(r), run_view.state_style(r.state)),
            run_view.exit_text(r),
            f"{r.executor}:{r.job_id or '-'}",
            f"{r.cluster}/{r.partition}",
            iso(r.submitted_at),
            run_view.elapsed(r),
            "yes" if r.collected_at else "-",
        ]
        for r in runs
    ]
    print_table(columns, rows)


def _print_run(store: Store, r: Run) -> None:
    """One run: its fields, its events, and how it ended."""
    from orchestrator.cli import run_view
    from orchestrator.core.escape import plain
    from orchestrator.store.db import iso

    print_fields(
        [
            ("run", r.run_id),
            ("name", r.name),
            ("state", (run_view.state_label(r), run_view.state_style(r.state))),
            ("exit code", run_view.exit_text(r)),
            ("reason", plain(r.reason or "-")),
            ("job", f"{r.executor} {r.job_id or '-'}"),
            ("attempt", str(r.attempt + 1)),
            ("where", f"{r.cluster}/{r.partition}" + _slurm_cluster(r)),
            ("run folder", r.run_dir),
            ("submitted", iso(r.submitted_at)),
            ("ended", iso(r.ended_at)),
            ("elapsed", run_view.elapsed(r)),
            ("collected", iso(r.collected_at)),
            *([("not bound", plain(r.unbound))] if r.unbound else []),
        ]
    )
    print()
    events: list[list[Cell]] = [
        [iso(e.ts), (e.state, run_view.state_style(e.state)), plain(e.detail or "")]
        for e in store.events(r.run_id)
    ]
    columns = [Column("time", keep=True), Column("state", keep=True), Column("detail")]
    print_table(columns, events, title="events")
    if r.terminal and r.state != "COMPLETED":
        print()
        run_view.print_end(r)


def _slurm_cluster(r: Run) -> str:
    """The SLURM cluster the run went to, as recorded when it was submitted."""
    if not r.slurm_cluster:
        return ""
    how = f", --clusters={r.clusters_option}" if r.clusters_option else ""
    return f" (SLURM cluster {r.slurm_cluster}{how})"


def logs_cmd(
    run: RunArg,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing, line by line, until the job ends."),
    ] = False,
    stderr: Annotated[bool, typer.Option("--err", help="Show stderr instead of stdout.")] = False,
    rank: Annotated[
        int, typer.Option("--rank", "-r", min=0, help="Show the log of this task (rank).")
    ] = 0,
    tail: Annotated[int, typer.Option("--tail", help="Lines from the end (0 = all).")] = 0,
) -> None:
    """Print a run's log (stdout of rank 0; --err, --rank N).

    Rank 0's log also holds the batch script's own output. Every task of a multi-node or
    multi-task job writes its own pair of logs in the run folder; --rank N shows task N's.
    A progress bar (nsys, pip) that redraws its line with carriage returns is printed as the
    terminal showed it at the end, one line, not every state of the bar."""
    from orchestrator.runs import lifecycle as R
    from orchestrator.transport.base import TransportError

    store = STATE.store()
    r = store.find_run(run)
    ex = R.executor_for(r)
    transport = R.transport_of_run(r)
    path = ex.log_paths(r, rank)[1 if stderr else 0]
    data = transport.read_from(str(path), 0)
    if rank and data is None and (r.terminal or not follow):
        have = ex.ranks_with_logs(r)
        raise UserError(
            f"--rank {rank}: run {r.run_id} has no log of rank {rank} ({path}); "
            + (
                f"it has logs of rank {', '.join(map(str, have))}"
                if have
                else "it has no rank logs yet (try --follow)"
            )
        )
    out = _LogPrinter(transport, path, follow)
    if data is not None:
        out.show(data, tail)
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
        r = R.wait(store, [r], warn=warn, timeout=0)[0]  # one poll; backs off while unreachable
        try:
            out.more()
        except TransportError as exc:
            warn(f"{exc}; reading on once it answers")
            time.sleep(2.0)
            continue
        if r.terminal:
            out.more()
            out.end()
            print(f"-- {r.run_id} ended: {r.state}", file=sys.stderr)
            return
        time.sleep(1.0)


class _LogPrinter:
    """A log printed as a terminal shows it (orchestrator/core/logtext.py: progress bars in their
    final state); with --follow, whole lines as they complete."""

    def __init__(self, transport: Transport, path: Path, follow: bool) -> None:
        import codecs

        from orchestrator.core.logtext import LineFollower

        self.transport, self.path, self.pos = transport, path, 0
        # A read can end inside a UTF-8 character: the decoder keeps it for the next one.
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.follower = LineFollower() if follow else None

    def show(self, data: bytes, tail: int = 0) -> None:
        from orchestrator.core.logtext import final_state

        self.pos += len(data)
        text = self.decoder.decode(data, final=self.follower is None)
        text = self.follower.feed(text) if self.follower else final_state(text)
        if tail:
            text = "".join(text.splitlines(keepends=True)[-tail:])
        typer.echo(text, nl=False)

    def more(self) -> None:
        data = self.transport.read_from(str(self.path), self.pos) or b""
        if data:
            self.show(data)

    def end(self) -> None:
        if self.follower:
            text = self.follower.feed(self.decoder.decode(b"", final=True))
            typer.echo(text + self.follower.rest(), nl=False)


def cancel_cmd(run: RunArg) -> None:
    """Cancel a run (scancel, or a signal to the local job)."""
    from orchestrator.runs import lifecycle as R

    store = STATE.store()
    r = store.find_run(run)
    R.require_bound(r, "nothing was cancelled")
    if not r.job_id:
        R.repair_intents(store, warn=warn)  # a submission interrupted before its id was kept
    r = R.refresh(store, [store.get_run(r.run_id)], warn=warn)[0]
    if r.terminal:
        print(f"{r.run_id} already ended: {r.state}")
        return
    if not r.job_id:
        raise RuntimeFailure(
            f"run {r.run_id} has no job id yet ({r.state}: its submission was interrupted "
            "and is not confirmed), so nothing was cancelled; run `gh-run status "
            f"{r.run_id}` (it finds the job or marks it never submitted), then cancel again"
        )
    R.executor_for(r, warn=warn).cancel(r)
    store.update_run(r.run_id, event="cancel requested by user")
    print(
        f"cancel sent to {r.run_id} (job {r.job_id}); `gh-run status {r.run_id}` shows "
        "when it has stopped"
    )


def _warn_refused(manifest: Manifest) -> None:
    for line in manifest.notes:
        note(line)
    for refusal in manifest.refused:
        warn(f"not collected: {refusal.path}: {refusal.reason}")


MaxFileOpt = Annotated[
    str | None,
    typer.Option(
        "--max-file-size",
        metavar="SIZE",
        help="Leave files larger than this uncollected, e.g. 10G (default: the cluster file's "
        "artifacts.max_file_size, else 32G).",
    ),
]
MaxRunOpt = Annotated[
    str | None,
    typer.Option(
        "--max-run-size",
        metavar="SIZE",
        help="Collect at most this much of the run, e.g. 100G (default: the cluster file's "
        "artifacts.max_run_size, else 128G).",
    ),
]


def _limits(run: Run, max_file: str | None, max_run: str | None) -> SizeLimits:
    from orchestrator.artifacts.collect import SizeLimits
    from orchestrator.runs import lifecycle as R

    site = R.site_limits(run, warn)
    given = {"max_file_size": max_file, "max_run_size": max_run}
    try:
        return site.model_copy(
            update={
                k: SizeLimits.model_validate({k: v}).model_dump()[k]
                for k, v in given.items()
                if v is not None
            }
        )
    except ValueError:
        flag = "--max-file-size" if max_file is not None else "--max-run-size"
        raise UserError(f"{flag}: not a size; write it like 10G or 512M") from None


def fetch_cmd(
    run: RunArg,
    max_file_size: MaxFileOpt = None,
    max_run_size: MaxRunOpt = None,
    reports: Annotated[
        bool,
        typer.Option(
            "--reports",
            help="also bring the reports the job analysed and left on the cluster"
            " (artifacts.reports: leave), each checked against the size and sha256 listed"
            " when it was left",
        ),
    ] = False,
) -> None:
    """Collect a finished run's artifacts (idempotent, verified).

    The files are copied into the home's artifact store, each read back and checked against
    its size and sha256. Files over --max-file-size, or past --max-run-size for the run, are
    listed and left where they are. With artifacts.reports: leave, the reports the job
    analysed stay on the cluster (listed in manifest.json, with size and sha256) unless
    --reports is given."""
    from orchestrator.runs import lifecycle as R

    store = STATE.store()
    found = store.find_run(run)
    limits = _limits(found, max_file_size, max_run_size)  # a bad flag is refused before any write
    r = R.refresh(store, [found], warn=warn)[0]
    manifest = R.collect(store, r, STATE.home, limits, warn, "fetch" if reports else None)
    total = sum(f.size for f in manifest.files)
    print(
        f"{r.run_id}: {len(manifest.files)} files, {total} bytes, sha256 verified, in "
        f"{STATE.home / 'artifacts' / r.run_id}"
    )
    if manifest.left:
        size = sum(x.size for x in manifest.left)
        print(
            f"{r.run_id}: {len(manifest.left)} reports ({size} bytes) left on the cluster, analysed"
            f" there (manifest.json lists them); `gh-run fetch {r.run_id} --reports` brings them"
        )
    _warn_refused(manifest)


def wait_cmd(
    run: Annotated[list[str], typer.Argument(help="Runs to wait for.")],
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
) -> None:
    """Wait for runs to end, then collect their artifacts.

    Picks up a run that `submit --wait` stopped waiting for (Ctrl-C, --timeout)."""
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
