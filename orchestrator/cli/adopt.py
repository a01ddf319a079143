"""`gh-run adopt RUN...`: bind runs recorded elsewhere (a state store that came with a project,
another home, a gh-run from before rows were sealed) to this home and this user, after saying
what each would run: the user's explicit word, which gh-run never takes from a row itself
(orchestrator/store/row_seal.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.state import STATE, note


def adopt_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes, job ids, last).")],
) -> None:
    """Bind runs recorded elsewhere to this home, after showing what each would run.

    \b
    A state store may come with a project (a committed .gh-run) or from a gh-run that did not
    seal its rows: gh-run shows such runs as recorded and never polls, retries, cancels or
    reaches them. Adopting a run says what gh-run would then do with it (its executor, its run
    folder and job script, how its cluster is reached, with every SSH option) and binds it."""
    from orchestrator.core.escape import plain
    from orchestrator.core.paths import mirror_root
    from orchestrator.store.row_seal import file_sha256

    store = STATE.store()
    store.require_writable()
    for ref in runs:
        run = store.find_run(ref)
        if run.unbound is None:
            note(f"{run.run_id}: already bound to this home")
            continue
        script = Path(run.run_dir) / "job.sbatch"
        if run.transport and run.executor != "local":
            # the copy this machine pushed: nothing is reached through the row's settings yet
            script = mirror_root(STATE.home, run.cluster) / Path(run.run_dir).name / "job.sbatch"
        sha = file_sha256(script)
        print(f"{run.run_id}: was {plain(run.unbound)}")
        print(f"  executor   {plain(run.executor)} (job {plain(run.job_id or '-')})")
        print(f"  run folder {plain(run.run_dir)}")
        print(f"  job script {plain(str(script))} (sha256 {sha or 'not readable here'})")
        print(f"  reached    {plain(_transport_words(run.transport))}")
        adopted = store.adopt(
            run.run_id, sha, "adopted: bound to this home and user by `gh-run adopt`"
        )
        print(f"  bound: gh-run now acts on {adopted.run_id} as on your own runs")


def _transport_words(descriptor: str | None) -> str:
    """How the run's cluster would be reached, every SSH setting named (a ProxyCommand is a
    program OpenSSH runs on this machine)."""
    if not descriptor:
        return "this machine"
    import json

    try:
        data = json.loads(descriptor)
    except ValueError:
        return f"an unreadable transport record ({descriptor[:200]})"
    if not isinstance(data, dict):
        return f"an unreadable transport record ({descriptor[:200]})"
    parts = [f"ssh {data.get('user') or ''}@{data.get('host')}:{data.get('port') or 22}"]
    for key in ("identity", "config"):
        if data.get(key):
            parts.append(f"{key} {data[key]}")
    for key, value in (data.get("options") or {}).items():
        parts.append(f"-o {key}={value}")
    if data.get("rsync_options"):
        parts.append(f"rsync {' '.join(map(str, data['rsync_options']))}")
    if data.get("gh_run"):
        parts.append(f"gh-run there: {' '.join(map(str, data['gh_run']))}")
    return "; ".join(parts)


def register(app: typer.Typer) -> None:
    app.command("adopt")(adopt_cmd)
