"""`gh-run campaign ...`: run, resume, status, schedule, unschedule, list, history."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator import campaign as C
from orchestrator.campaign import schedule as S
from orchestrator.campaign import tracking
from orchestrator.campaign.finish import verdict
from orchestrator.campaign.model import METRICS, load_campaign
from orchestrator.campaign.results import check_pinned_baseline, history
from orchestrator.campaign.submission import (
    PreparedVariants,
    confirm_clusters,
    prepare_variants,
    resolve_executor,
)
from orchestrator.cli import run_view
from orchestrator.cli.state import STATE, err_console, note_once, out, warn
from orchestrator.cli.table import Cell, Column, print_table
from orchestrator.core.errors import UserError
from orchestrator.core.escape import markup
from orchestrator.executors.cluster_identity import clusters_option
from orchestrator.executors.slurm import slurm_reachable
from orchestrator.site.cluster import Cluster
from orchestrator.spec.yamlio import display_path
from orchestrator.store import campaigns as db
from orchestrator.store.db import Run, iso

FileArg = Annotated[Path, typer.Argument(help="Campaign file, e.g. campaigns/canary.yaml.")]
IdArg = Annotated[str, typer.Argument(help="Campaign id (or unique prefix, or 'last').")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", metavar="KEY=VALUE", help="Override every variant's job spec."),
]


def _progress_loop(cid: str, total: int, timeout: float | None) -> list[Run]:
    store = STATE.store()
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=err_console(),
        transient=False,
    )
    task = progress.add_task(cid, total=total, counts="")

    def show(runs: list[Run]) -> None:
        c = tracking.counts(runs)
        progress.update(
            task,
            completed=c["done"] + c["failed"],
            counts=" ".join(f"{k} {v}" for k, v in c.items()),
        )

    with Live(progress, console=err_console(), refresh_per_second=4, transient=False):
        return tracking.track(store, cid, on_poll=show, warn=warn, timeout=timeout)


def _finish_and_report(cid: str, timeout: float | None) -> None:
    store = STATE.store()
    runs = _progress_loop(cid, len(db.variants_of(store, cid)), timeout)
    if not all(r.terminal for r in runs):
        out.print(
            f"campaign {cid}: still running after {timeout:.0f} s; "
            f"`gh-run campaign resume {cid}` keeps waiting and reports"
        )
        raise typer.Exit(1)
    outcome = C.finish(store, cid, STATE.home, warn=warn)
    r = outcome.result
    style = "green" if r.state == "PASSED" else "red"
    out.print(
        f"campaign {cid}: [{style}]{verdict(r)}[/] — {len(r.variants)} variants, "
        f"{len(r.failed)} failed, {len(r.regressions)} regressions, "
        f"{len(r.unjudged)} not judged; baseline: {r.baseline_note}; exit {outcome.exit_code}"
    )
    for f in r.regressions:
        by = f" (judged by {f.figure})" if f.figure and f.figure != f.metric else ""
        out.print(f"  [red]regression[/] {f.variant} {f.metric}: {markup(f.change or '')}{by}")
    for f in r.unjudged:
        out.print(f"  [red]not judged[/] {f.variant} {f.metric}: {markup(f.unjudged or '')}")
    for v in r.failed:
        run = store.get_run(v.run_id)
        why = f", {markup(run.reason)}" if run.reason else ""
        out.print(f"  [red]failed[/] {v.variant}: {v.state} (run {v.run_id}{why})")
        # What `submit --wait` shows of a failed run: its stderr's last lines.
        run_view.print_stderr_tail(store.get_run(v.run_id), lines=5, indent="    ")
    out.print(f"  report: {outcome.paths['html']}")
    for line in outcome.tries:
        out.print(f"  advice: {markup(line)}")
    if outcome.notified:
        out.print(f"  notified: {outcome.notified}")
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def _origin_notes(prepared: PreparedVariants) -> None:
    """Once per cluster file that is not the site's: say so (its runs' records say it too)."""
    from orchestrator.site.config import origin_note

    seen: set[str] = set()
    for _, _, prep in prepared:
        cl = prep.cluster
        text = origin_note(cl.origin, cl.name)
        if text and str(cl.source) not in seen:
            seen.add(str(cl.source))
            note_once(text)


def run_cmd(
    file: FileArg,
    set_: SetOpt = None,
    wait: Annotated[
        bool, typer.Option("--wait", "-w", help="Track to the end, then collect, compare, report.")
    ] = False,
    executor: Annotated[
        str, typer.Option("--executor", "-x", help="slurm, local or auto (the file's default).")
    ] = "",
    hold: Annotated[
        bool,
        typer.Option("--hold", help="Submit held (sbatch --hold): for dry runs and benchmarks."),
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
    max_variants: Annotated[
        int | None,
        typer.Option(
            "--max-variants",
            min=1,
            help="Refuse a campaign with more variants than this (default 10000, or "
            "$GH_RUN_MAX_VARIANTS); counted from the matrix axes before anything is expanded.",
        ),
    ] = None,
) -> None:
    """Expand, plan (in the store first), submit as job arrays; with --wait, run to a report.

    Exit codes with --wait: 3 a threshold crossed (even if a variant also failed), else 1 a
    variant failed, 2 bad input, 0 passed.
    """
    campaign = load_campaign(file)
    kind = executor or campaign.executor
    if kind not in ("slurm", "local", "auto"):
        raise UserError(f"--executor {kind!r}: use slurm, local or auto")
    # Bad input changes nothing: expand and check every variant before the store is opened.
    t0 = time.perf_counter()
    prepared = prepare_variants(campaign, file, set_ or [], STATE.home, max_variants)
    _origin_notes(prepared)
    kind = resolve_executor(kind, prepared)
    # The controller of every variant's cluster is the one its file names: checked before the
    # store records anything.
    slurm_clusters = confirm_clusters(prepared, kind)
    store = STATE.store()
    cid = C.plan(
        store, campaign, file, STATE.home, kind, prepared=prepared, slurm_clusters=slurm_clusters
    )
    groups = db.groups_of(store, cid)
    failures = C.send(store, cid, hold=hold, warn=warn)
    took = time.perf_counter() - t0
    arrays = sum(1 for g in groups if g.is_array)
    n = sum(g.size for g in groups)
    out.print(
        f"campaign [bold]{cid}[/]: {n} variants in {len(groups)} submissions "
        f"({arrays} job arrays) on {kind}, sent in {took:.2f} s"
    )
    for f in failures:
        warn(f)
    if failures and len(failures) == len(groups):
        raise typer.Exit(1)
    if not wait:
        out.print(f"  follow it: gh-run campaign status {cid}")
        return
    _finish_and_report(cid, timeout)


def resume_cmd(
    cid: IdArg,
    timeout: Annotated[
        float | None, typer.Option(help="Stop waiting after this many seconds.")
    ] = None,
) -> None:
    """Finish a campaign after a crash or kill: find what was sent, send the rest (retrying
    failed submissions), wait, report."""
    store = STATE.store()
    rec = db.get_campaign(store, cid)
    report = Path(rec.report_dir) / "campaign.html" if rec.report_dir else None
    if rec.state in db.ENDED and report is not None and report.is_file():
        out.print(f"campaign {rec.campaign_id} already ended: {rec.state}; report: {report}")
        return
    if rec.state in db.ENDED:
        # Marked ended by an older gh-run that died before writing the report: write it.
        out.print(f"campaign {rec.campaign_id} ended ({rec.state}) without a report: writing it")
    r = C.resume(store, rec.campaign_id, warn=warn)
    for name in r.found:
        out.print(f"  found {name} in SLURM (sent before the crash): not sent again")
    for name in r.retried:
        out.print(f"  {name}: its submission had failed and SLURM does not have it: sent again")
    for name in r.reclaimed:
        out.print(f"  {name}: claimed by a gh-run that died before sbatch: sent now")
    for name in r.busy:
        out.print(f"  {name}: another gh-run is sending it right now: left to it")
    for f in r.failures:
        warn(f)
    _finish_and_report(rec.campaign_id, timeout)


def status_cmd(cid: IdArg) -> None:
    """Where a campaign stands: counts, and each variant's state (one batched poll)."""
    store = STATE.store()
    rec = db.get_campaign(store, cid)
    runs = tracking.poll_once(store, rec.campaign_id, warn=warn)
    c = tracking.counts(runs)
    out.print(
        f"campaign [bold]{rec.campaign_id}[/] ({rec.name}): {rec.state}; "
        + ", ".join(f"{k} {v}" for k, v in c.items())
    )
    groups = db.groups_of(store, rec.campaign_id)
    out.print(
        "  submissions: "
        + ", ".join(f"{g.job_name}={g.job_id or g.state} ({g.size})" for g in groups[:8])
        + (" …" if len(groups) > 8 else "")
    )
    columns = [
        Column("variant", keep=True),
        Column("state", keep=True),
        Column("job", drop=2),
        Column("exit", right=True, drop=1),
        Column("run", keep=True),
    ]
    rows: list[list[Cell]] = [
        [
            r.variant or "-",
            (run_view.state_label(r), run_view.state_style(r.state)),
            r.job_id or "-",
            run_view.exit_text(r),
            r.run_id,
        ]
        for r in runs
    ]
    print_table(columns, rows)
    if rec.report_dir:
        out.print(f"report: {rec.report_dir}/campaign.html")


def schedule_cmd(
    file: FileArg,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="cron or slurm (default: the file's schedule.mode)."),
    ] = None,
    first_begin: Annotated[
        str | None,
        typer.Option(
            "--first-begin",
            help="slurm mode: begin time of the first launcher (sbatch --begin syntax, e.g. "
            "now+60); default: the next cron time.",
        ),
    ] = None,
) -> None:
    """Install the campaign's schedule: a crontab entry, or a self-resubmitting SLURM job."""
    campaign = load_campaign(file)
    src = display_path(file)
    if campaign.schedule is None:
        raise UserError(f"{src}: schedule: missing; add `schedule: {{cron: '0 2 * * *', tz: UTC}}`")
    chosen = mode or campaign.schedule.mode
    if chosen not in ("cron", "slurm"):
        raise UserError(f"--mode {chosen!r}: use cron or slurm")
    from orchestrator.campaign import remote_schedule

    cluster = remote_schedule.cluster_of(campaign, file)
    _confirm_cluster(campaign.executor, chosen, cluster)
    if cluster.transport != "local":
        # The nights run on the cluster side, in a gh-run home there (see remote_schedule).
        rec, job_id = remote_schedule.install(
            campaign, file.resolve(), STATE.home, src, chosen, cluster, first_begin
        )
        how = "in the login node's crontab" if chosen == "cron" else f"as launcher job {job_id}"
        out.print(
            f"scheduled {campaign.name} on {cluster.login} {how}: {rec.cron} ({rec.tz}); it "
            f"runs there, its reports in {remote_schedule.REMOTE_HOME} beside the run folders"
        )
        return
    # A pinned baseline that does not exist would fail every night: say so now.
    check_pinned_baseline(STATE.home, campaign, src)
    if chosen == "cron":
        rec = S.install_cron(campaign, file.resolve(), STATE.home, src)
        out.print(f"scheduled {campaign.name} in crontab: {rec.cron} ({rec.tz})")
    else:
        rec, job_id = S.install_slurm(
            campaign, file.resolve(), STATE.home, first_begin, clusters_option(cluster)
        )
        out.print(
            f"scheduled {campaign.name} as SLURM launcher job {job_id} "
            f"({S.launcher_job_name(campaign.name)}; cron {rec.cron} {rec.tz}); it re-queues "
            "itself each night"
        )


def _confirm_cluster(executor: str, mode: str, cluster: Cluster) -> None:
    """Before a schedule is installed: the controller it will send to is the cluster its file
    names (a launcher job always goes through SLURM; a crontab line's nights do unless the
    campaign runs locally, or `auto` finds no controller here and may run them locally)."""
    from orchestrator.executors import cluster_identity
    from orchestrator.executors.choose import transport_for

    transport = transport_for(cluster, warn)
    if mode == "cron" and executor == "local":
        return
    local_nights = executor == "auto" and not transport.remote
    if mode == "cron" and local_nights and not slurm_reachable(clusters=clusters_option(cluster)):
        return
    transport.connect()
    cluster_identity.confirm(cluster, transport)


def unschedule_cmd(name: Annotated[str, typer.Argument(help="Campaign name.")]) -> None:
    """Remove a campaign's schedule (crontab entry, or the queued SLURM launcher)."""
    what = S.unschedule(STATE.home, name)
    out.print(f"unscheduled {name}: {what}")


def list_cmd(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="How many campaigns, newest first.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Installed schedules and recent campaigns."""
    store = STATE.store()
    scheds = S.installed(STATE.home)
    recs = db.list_campaigns(store, limit=limit)
    if as_json:
        doc = {
            "schedules": [{**s.model_dump(), "status": S.status_of(s, STATE.home)} for s in scheds],
            "campaigns": [
                {
                    **r.model_dump(exclude={"campaign_json"}),
                    "variants": len(db.variants_of(store, r.campaign_id)),
                }
                for r in recs
            ],
        }
        typer.echo(json.dumps(doc, indent=2))
        return
    if scheds:
        print_table(
            [
                Column("name", keep=True),
                Column("mode", drop=2),
                Column("cron", drop=3),
                Column("tz", drop=4),
                Column("status", keep=True),
                Column("file", drop=1),
            ],
            [[s.name, s.mode, s.cron, s.tz, S.status_of(s, STATE.home), s.file] for s in scheds],
            title="schedules",
        )
    else:
        print("no schedules installed")
    if not recs:
        print("no campaigns yet; try `gh-run campaign run campaigns/canary.yaml --wait`")
        return
    print_table(
        [
            Column("campaign", keep=True),
            Column("state", keep=True),
            Column("variants", right=True, drop=3),
            Column("regressions", right=True, drop=4),
            Column("started", drop=2),
            Column("ended", drop=5),
            Column("baseline", drop=1),
        ],
        [
            [
                r.campaign_id,
                (r.state, run_view.state_style(r.state)),
                str(len(db.variants_of(store, r.campaign_id))),
                str(r.regressions) if r.regressions is not None else "-",
                iso(r.created_at),
                iso(r.ended_at),
                r.baseline_id or "-",
            ]
            for r in recs
        ],
        title="campaigns",
    )


def history_cmd(
    name: Annotated[str, typer.Argument(help="Campaign name.")],
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", "-m", help=f"Metric(s) to show; one of {', '.join(METRICS)}."),
    ] = None,
    nights: Annotated[int, typer.Option("--nights", "-n", help="How many campaigns back.")] = 14,
) -> None:
    """The trend of chosen metrics across nights: one table per metric, variants x nights."""
    store = STATE.store()
    metrics = metric or ["step_time_s"]
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise UserError(f"--metric {bad[0]}: unknown; use one of {', '.join(METRICS)}")
    if not db.list_campaigns(store, name, 1):
        raise UserError(f"no campaign named {name!r} in {store.path}; `gh-run campaign list`")
    for m in metrics:
        past = history(store, name, m, nights)
        # One column per night, headed by its date and state; the oldest go first where the
        # terminal is narrow.
        columns = [
            Column("variant", keep=True),
            *(
                Column(f"{iso(rec.created_at)[5:16]} {rec.state}", right=True, drop=len(past) - j)
                for j, (rec, _) in enumerate(past)
            ),
        ]
        variants = list(dict.fromkeys(v for _, vals in past for v in vals))
        rows = [[v, *(_fmt(vals.get(v)) for _, vals in past)] for v in variants]
        print_table(columns, rows, title=f"{name}: {m}")


def _fmt(value: float | None) -> str:
    from orchestrator.campaign.report import fmt

    return fmt(value)


def fire_cmd(
    file: FileArg,
    slurm_script: Annotated[
        Path | None, typer.Option("--slurm-script", help="The launcher to queue for next time.")
    ] = None,
) -> None:
    """(Used by schedules.) Queue the next night (slurm mode), then run the campaign to a report."""
    campaign = load_campaign(file)
    if slurm_script is not None:
        from orchestrator.campaign import remote_schedule

        clusters = clusters_option(remote_schedule.cluster_of(campaign, file))
        job_id = S.queue_next(slurm_script, campaign, clusters)
        out.print(f"queued the next launcher: job {job_id}")
    run_cmd(file, wait=True)


def register(app: typer.Typer) -> None:
    # A sub-app of its own on each call: the CLI registers on every run of `main`, so a
    # module-level one would gather the commands again each time a process calls `main([...])`
    # (tests, other front ends), and each run would turn every copy into a click command.
    campaign_app = typer.Typer(
        help="Nightly profiling campaigns: a matrix of one job, as job arrays, compared with "
        "the last good night.",
        no_args_is_help=True,
    )
    # The listing's lines (`campaign --help`): whole, within 80 columns; each command's own
    # --help says the rest (tests/unit/test_first_week.py).
    for name, cmd, short in (
        ("run", run_cmd, "Plan, submit as job arrays; --wait: run to the report."),
        ("resume", resume_cmd, "Finish a campaign after a crash or kill."),
        ("status", status_cmd, "Where a campaign stands, variant by variant."),
        ("schedule", schedule_cmd, "Install the schedule: crontab or a SLURM job."),
        ("unschedule", unschedule_cmd, "Remove a campaign's schedule."),
        ("list", list_cmd, "Installed schedules and recent campaigns."),
        ("history", history_cmd, "Chosen metrics across nights, variants x nights."),
    ):
        campaign_app.command(name, short_help=short)(cmd)
    campaign_app.command("fire", hidden=True)(fire_cmd)
    app.add_typer(campaign_app, name="campaign")
