"""Installing a campaign's schedule: a crontab entry on the login node, or a self-resubmitting
SLURM job (`sbatch --begin=...`) that queues its next night and then runs the campaign.

Both run `gh-run campaign fire FILE`; a registry in the gh-run home (schedules/NAME.json)
remembers what was installed, for `list` and `unschedule`. The crontab and the SLURM commands
go through the cluster's transport: for a cluster reached over SSH they are the login node's
(remote_schedule.py installs such schedules).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from orchestrator.campaign.cron import CronExpr
from orchestrator.campaign.model import Campaign
from orchestrator.core.base import Strict
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.core.shipped import templates_dir
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.executors.slurm_cli import run_slurm
from orchestrator.render.scripts import make_environment
from orchestrator.site.cluster import load_cluster
from orchestrator.spec.job import SBATCH_VALUE_RE
from orchestrator.transport import registry
from orchestrator.transport.base import Transport
from orchestrator.transport.local import LOCAL

MARK = "# gh-run-campaign:"
# What `crontab -l` says, alone, when the user has no table (Debian's cron, cronie, vixie).
NO_CRONTAB = re.compile(r"no crontab for [^\s]+")
Mode = Literal["cron", "slurm"]


class Installed(Strict):
    name: str
    mode: Mode
    file: str
    cron: str
    tz: str
    installed_at: float
    entry: str = ""  # the crontab line, or the launcher script path
    # Where it was installed (transport/registry.py): None is this machine.
    transport: str | None = None
    # --clusters of the launcher's SLURM commands (the cluster file's multi_cluster).
    clusters_option: str | None = None
    # row_seal.py: the record's transport is used only while this is the user's seal for the
    # home (a schedules/ folder may come with a project)
    seal: str | None = None

    def unbound(self, home: Path) -> str | None:
        """Why this record must not be acted on (None: installed by this user here)."""
        from orchestrator.store import row_seal

        return row_seal.problem("schedule", row_seal.home_key(home), _SEALED, self.model_dump())


_SEALED = tuple(sorted(set(Installed.model_fields) - {"seal"}))


def registry_dir(home: Path) -> Path:
    return home / "schedules"


def launcher_job_name(name: str) -> str:
    return f"ghr-schedule-{name}"


def fire_argv(file: Path, home: Path, slurm_script: Path | None = None) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "orchestrator",
        "--home",
        str(home),
        "campaign",
        "fire",
        str(file),
    ]
    if slurm_script:
        argv += ["--slurm-script", str(slurm_script)]
    return argv


def _job_env() -> dict[str, str]:
    """What the fired campaign needs from this environment (cron starts with almost nothing)."""
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    for key in ("SLURM_CONF", "GH_RUN_CLUSTERS", "SCRATCH", "GH_RUN_MAX_VARIANTS"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def next_begin(schedule_cron: str, tz: str, after: datetime | None = None) -> str:
    """The next fire time as sbatch --begin wants it (this machine's local time)."""
    nxt = CronExpr.parse(schedule_cron).next_after(after or datetime.now(ZoneInfo(tz)), tz)
    return nxt.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


# -- cron ---------------------------------------------------------------------------------------
def _crontab(transport: Transport = LOCAL) -> list[str]:
    if not transport.remote and shutil.which("crontab") is None:
        raise RuntimeFailure(
            "crontab is not installed on this machine; install cron (Debian: apt-get install "
            "cron) or schedule with --mode slurm"
        )
    res = transport.run(["crontab", "-l"])
    if res.returncode == 0:
        return res.stdout.splitlines()
    # its last line: over SSH the client may put a warning of its own before crontab's words
    last = next((x.strip() for x in reversed(res.stderr.splitlines()) if x.strip()), "")
    if NO_CRONTAB.fullmatch(last):
        return []
    # Anything else (an unreadable spool, a cron that is not allowed here, ...) is not "empty":
    # writing a table now would delete the user's entries.
    why = res.stderr.strip().replace("\n", " ") or f"exit status {res.returncode}"
    raise RuntimeFailure(
        f"`crontab -l` failed ({why}), so your crontab cannot be read and was left as it was; "
        "fix what crontab says (or schedule with --mode slurm) and run the command again"
    )


def _write_crontab(lines: list[str], transport: Transport = LOCAL) -> None:
    text = "\n".join(lines) + "\n" if lines else ""
    res = transport.run(["crontab", "-"], stdin=text)
    if res.returncode != 0:
        raise RuntimeFailure(f"crontab refused the new table: {res.stderr.strip()}")


def cron_line(campaign: Campaign, file: Path, home: Path, log: Path) -> str:
    assert campaign.schedule
    env = [f"{k}={v}" for k, v in _job_env().items()]
    argv = ["env", *env, *fire_argv(file, home)]
    cmd = f"cd {shlex.quote(str(Path.cwd()))} && {shlex.join(argv)} >> {shlex.quote(str(log))} 2>&1"
    # In a crontab line an unescaped % is a newline: escape every one.
    cmd = cmd.replace("%", "\\%")
    return f"{campaign.schedule.cron} {cmd} {MARK}{campaign.name}"


def _check_tz(campaign: Campaign, src: str) -> None:
    assert campaign.schedule
    now = datetime.now(ZoneInfo(campaign.schedule.tz))
    local = datetime.now().astimezone()
    if now.utcoffset() != local.utcoffset():
        raise UserError(
            f"{src}: schedule.tz: cron on this machine fires in its own time zone "
            f"({local.tzname()}), not {campaign.schedule.tz}; set tz to the machine's zone or "
            "schedule with --mode slurm (which converts)"
        )


def install_cron(campaign: Campaign, file: Path, home: Path, src: str) -> Installed:
    _check_tz(campaign, src)
    assert campaign.schedule
    reg = registry_dir(home)
    reg.mkdir(parents=True, exist_ok=True)
    line = cron_line(campaign, file, home, reg / f"{campaign.name}.cron.log")
    lines = [x for x in _crontab() if not x.endswith(f"{MARK}{campaign.name}")]
    _write_crontab([*lines, line])
    return _register(home, campaign, file, "cron", line)


def remove_cron(name: str, transport: Transport = LOCAL) -> bool:
    lines = _crontab(transport)
    kept = [x for x in lines if not x.endswith(f"{MARK}{name}")]
    if len(kept) != len(lines):
        _write_crontab(kept, transport)
        return True
    return False


# -- SLURM --------------------------------------------------------------------------------------
def render_launcher(campaign: Campaign, file: Path, home: Path, script: Path) -> str:
    assert campaign.schedule
    sched = campaign.schedule
    partition = sched.partition
    if partition is None:
        from orchestrator.campaign.model import job_path
        from orchestrator.spec.job import load_spec

        spec = load_spec(job_path(file, campaign))
        cl = load_cluster(spec.cluster)
        partition = spec.partition or cl.default_partition
    return launcher_text(
        campaign,
        file,
        partition,
        log_dir=str(registry_dir(home)),
        cwd=str(Path.cwd()),
        env={"GH_RUN_HOME": str(home), **_job_env()},
        argv=fire_argv(file, home, script),
    )


def launcher_text(
    campaign: Campaign,
    file: Path,
    partition: str,
    *,
    log_dir: str,
    cwd: str,
    env: dict[str, str],
    argv: list[str],
) -> str:
    """The launcher script: where it runs, with what, and its log (paths on the cluster)."""
    assert campaign.schedule
    for value in (partition, campaign.schedule.launcher_time, log_dir):
        if not SBATCH_VALUE_RE.fullmatch(value):
            raise UserError(
                f"{file}: schedule: {value!r} cannot go into an #SBATCH line; use letters, "
                "digits and . _ : , @ % + = / -"
            )
    jinja = make_environment([templates_dir()])
    return jinja.get_template("campaign/launcher.sbatch.j2").render(
        name=campaign.name,
        job_name=launcher_job_name(campaign.name),
        partition=partition,
        time=campaign.schedule.launcher_time,
        log=f"{log_dir}/{campaign.name}-%j.log",
        cwd=cwd,
        env=env,
        argv=argv,
    )


def install_slurm(
    campaign: Campaign,
    file: Path,
    home: Path,
    first_begin: str | None = None,
    clusters: str | None = None,
) -> tuple[Installed, str]:
    assert campaign.schedule
    reg = registry_dir(home)
    reg.mkdir(parents=True, exist_ok=True)
    remove_slurm(campaign.name, clusters=clusters)
    script = reg / f"{campaign.name}.sbatch"
    script.write_text(render_launcher(campaign, file, home, script))
    script.chmod(0o700)
    begin = first_begin or next_begin(campaign.schedule.cron, campaign.schedule.tz)
    job_id = SlurmExecutor(clusters=clusters).sbatch(script, [f"--begin={begin}"])
    rec = _register(home, campaign, file, "slurm", str(script), clusters=clusters)
    return rec, job_id


def queued_launchers(
    name: str, transport: Transport = LOCAL, clusters: str | None = None
) -> list[tuple[str, str, str]]:
    """(job id, state, start/begin time) of the launcher jobs of `name` in the queue."""
    res = run_slurm(
        ["squeue", "-h", "-o", "%i|%T|%S", "--name", launcher_job_name(name)],
        transport=transport,
        clusters=clusters,
    )
    out = []
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def remove_slurm(name: str, transport: Transport = LOCAL, clusters: str | None = None) -> list[str]:
    """Cancel the queued (not the running) launcher jobs of `name`."""
    queued = queued_launchers(name, transport, clusters)
    pending = [j for j, state, _ in queued if state == "PENDING"]
    if pending:
        run_slurm(["scancel", *pending], transport=transport, clusters=clusters)
    return pending


def queue_next(script: Path, campaign: Campaign, clusters: str | None = None) -> str:
    """From inside a firing launcher: queue the next night before running tonight's campaign."""
    assert campaign.schedule
    begin = next_begin(campaign.schedule.cron, campaign.schedule.tz)
    return SlurmExecutor(clusters=clusters).sbatch(script, [f"--begin={begin}"])


# -- registry -----------------------------------------------------------------------------------
def _register(
    home: Path,
    campaign: Campaign,
    file: Path,
    mode: Mode,
    entry: str,
    transport: Transport = LOCAL,
    clusters: str | None = None,
) -> Installed:
    assert campaign.schedule
    rec = Installed(
        transport=registry.descriptor(transport),
        clusters_option=clusters,
        name=campaign.name,
        mode=mode,
        file=str(file.resolve()),
        cron=campaign.schedule.cron,
        tz=campaign.schedule.tz,
        installed_at=time.time(),
        entry=entry,
    )
    from orchestrator.store import row_seal

    rec.seal = row_seal.seal("schedule", row_seal.home_key(home), _SEALED, rec.model_dump())
    registry_dir(home).mkdir(parents=True, exist_ok=True)
    (registry_dir(home) / f"{campaign.name}.json").write_text(rec.model_dump_json(indent=2))
    return rec


def installed(home: Path) -> list[Installed]:
    reg = registry_dir(home)
    if not reg.is_dir():
        return []
    return [_read_installed(p) for p in sorted(reg.glob("*.json"))]


def _read_installed(path: Path) -> Installed:
    from pydantic import ValidationError

    try:
        return Installed.model_validate_json(path.read_bytes()[: 1 << 20])
    except (OSError, ValidationError) as exc:
        why = " ".join(str(exc).split())[:200]
        raise UserError(
            f"{path}: not a schedule record gh-run wrote ({why}); move it out of {path.parent}"
        ) from None


def unschedule(home: Path, name: str) -> str:
    path = registry_dir(home) / f"{name}.json"
    if not path.is_file():
        known = ", ".join(i.name for i in installed(home)) or "none"
        raise UserError(
            f"no schedule named {name!r} (installed: {known}); see `gh-run campaign list`"
        )
    rec = _read_installed(path)
    why = rec.unbound(home)
    if why is not None:
        raise UserError(
            f"{path}: schedule {name!r} was not installed by you in this home: {why}; nothing "
            f"was removed (remove the crontab line or launcher job yourself, then rm {path})"
        )
    transport = registry.for_descriptor(rec.transport)
    if rec.mode == "cron":
        removed = remove_cron(name, transport)
        what = "crontab entry removed" if removed else "no crontab entry was left"
    else:
        cancelled = remove_slurm(name, transport, rec.clusters_option)
        what = f"cancelled queued launcher job(s) {', '.join(cancelled) or '(none queued)'}"
    path.unlink()
    return what


def status_of(rec: Installed, home: Path) -> str:
    why = rec.unbound(home)
    if why is not None:
        return f"not checked: not installed by you in this home ({why})"
    transport = registry.for_descriptor(rec.transport)
    where = f" on {transport.where}" if transport.remote else ""
    if rec.mode == "cron":
        present = any(x.endswith(f"{MARK}{rec.name}") for x in _crontab(transport))
        return f"crontab entry present{where}" if present else f"crontab entry MISSING{where}"
    queued = queued_launchers(rec.name, transport, rec.clusters_option)
    if not queued:
        return "no launcher job queued"
    return "; ".join(f"job {j} {s} (begin {b})" for j, s, b in queued)
