"""Schedules of campaigns whose cluster is reached over SSH.

A nightly campaign cannot wait for this machine (a laptop sleeps at night), so it runs on the
cluster side: from the login node's crontab, or as a self-resubmitting SLURM job there, with
gh-run started as the cluster file's `ssh.gh_run` says and a gh-run home of its own beside the
runs (`<runs root>/_home`, where the nights' reports are). What it needs is copied there first
as one bundle, `<runs root>/_schedules/<name>/`: the campaign file, its base job with
`extends:` merged, and the cluster file as the login node sees it (the local transport, the
resolved runs root, the admin template folders). `campaign list` and `unschedule` here read
and edit the login node's crontab and queue through the same transport.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import yaml

from orchestrator.campaign import schedule as S
from orchestrator.campaign.cron import CronExpr
from orchestrator.campaign.model import Campaign, job_path
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.core.paths import mirror_root
from orchestrator.executors.cluster_identity import clusters_option
from orchestrator.executors.slurm import SlurmExecutor
from orchestrator.runs import lifecycle as R
from orchestrator.site.cluster import Cluster
from orchestrator.spec.job import load_spec
from orchestrator.transport import registry
from orchestrator.transport.ssh import SshTransport, script

REMOTE_HOME = "_home"


def bundle_name(name: str) -> str:
    return f"_schedules/{name}"


@dataclass
class LoginFacts:
    path: str
    slurm_conf: str
    utc_offset: timedelta


def login_facts(transport: SshTransport) -> LoginFacts:
    res = transport.run(["sh", "-c", script("facts.sh"), "sh"])
    lines = [*res.stdout.splitlines(), "", "", ""]
    offset = lines[2].strip()
    if res.returncode != 0 or len(offset) != 5 or not offset[1:].isdigit():
        raise RuntimeFailure(
            f"the login shell of {transport.where} did not say its PATH and time zone "
            f"({' '.join(res.stderr.split()) or res.stdout.strip()!r})"
        )
    sign = -1 if offset[0] == "-" else 1
    minutes = int(offset[1:3]) * 60 + int(offset[3:5])
    return LoginFacts(lines[0], lines[1], timedelta(minutes=sign * minutes))


def write_bundle(here: Path, campaign: Campaign, file: Path, cluster: Cluster, root: str) -> None:
    """The campaign as the login node runs it: self-contained, with local paths on that side."""
    here.mkdir(parents=True, exist_ok=True, mode=0o700)
    job = load_spec(job_path(file, campaign))
    job.cluster = "cluster.yaml"
    (here / "job.yaml").write_text(yaml.safe_dump(job.model_dump(mode="json"), sort_keys=False))
    camp = campaign.model_dump(mode="json")
    camp["job"] = "job.yaml"
    (here / "campaign.yaml").write_text(yaml.safe_dump(camp, sort_keys=False))
    there = cluster.model_dump(mode="json")
    there.update(transport="local", ssh=None, paths={"runs": root})
    dirs = []
    for i, folder in enumerate(cluster.template_search_path()):
        if folder.is_dir():
            shutil.copytree(folder, here / "templates" / str(i), dirs_exist_ok=True)
            dirs.append(f"templates/{i}")
    there["template_dirs"] = dirs
    (here / "cluster.yaml").write_text(yaml.safe_dump(there, sort_keys=False))


def _check_tz(campaign: Campaign, src: str, facts: LoginFacts, where: str) -> None:
    assert campaign.schedule
    offset = datetime.now(ZoneInfo(campaign.schedule.tz)).utcoffset()
    if offset != facts.utc_offset:
        raise UserError(
            f"{src}: schedule.tz: cron on {where} fires in its own time zone (UTC offset "
            f"{facts.utc_offset}), not {campaign.schedule.tz}; set tz to the login node's zone "
            "or schedule with --mode slurm (which converts)"
        )


def _begin(campaign: Campaign, facts: LoginFacts) -> str:
    """The next fire time as the login node's sbatch --begin reads it (its local time)."""
    assert campaign.schedule
    sched = campaign.schedule
    nxt = CronExpr.parse(sched.cron).next_after(datetime.now(ZoneInfo(sched.tz)), sched.tz)
    return nxt.astimezone(timezone(facts.utc_offset)).strftime("%Y-%m-%dT%H:%M:%S")


def install(
    campaign: Campaign,
    file: Path,
    home: Path,
    src: str,
    mode: str,
    cluster: Cluster,
    first_begin: str | None = None,
) -> tuple[S.Installed, str | None]:
    """Copy the bundle, then install the crontab line (or queue the launcher) on the login
    node; returns the registry record and the launcher's job id (slurm mode)."""
    assert campaign.schedule
    transport = registry.for_cluster(cluster)
    assert isinstance(transport, SshTransport)
    root = R.cluster_runs_root(cluster, home, transport)
    mirror = mirror_root(home, cluster.name)
    rel = bundle_name(campaign.name)
    here, there = mirror / rel, f"{root}/{rel}"
    facts = login_facts(transport)
    if mode == "cron":
        _check_tz(campaign, src, facts, transport.where)
    write_bundle(here, campaign, file, cluster, root)
    env = {"PATH": facts.path, **({"SLURM_CONF": facts.slurm_conf} if facts.slurm_conf else {})}
    argv = [*transport.login.gh_run, "--home", f"{root}/{REMOTE_HOME}", "campaign", "fire"]
    if mode == "cron":
        transport.push(mirror, [rel], root)
        command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *argv, "campaign.yaml"])
        log = shlex.quote(f"{there}/cron.log")
        # In a crontab line an unescaped % is a newline: escape every one.
        cmd = f"cd {shlex.quote(there)} && {command} >> {log} 2>&1".replace("%", "\\%")
        line = f"{campaign.schedule.cron} {cmd} {S.MARK}{campaign.name}"
        lines = [x for x in S._crontab(transport) if not x.endswith(f"{S.MARK}{campaign.name}")]
        S._write_crontab([*lines, line], transport)
        return S._register(home, campaign, file, "cron", line, transport), None
    launcher = f"{there}/launcher.sbatch"
    partition = campaign.schedule.partition or (
        load_spec(job_path(file, campaign)).partition or cluster.default_partition
    )
    text = S.launcher_text(
        campaign,
        file,
        partition,
        log_dir=there,
        cwd=there,
        env={"GH_RUN_HOME": f"{root}/{REMOTE_HOME}", **env},
        argv=[*argv, "campaign.yaml", "--slurm-script", launcher],
    )
    (here / "launcher.sbatch").write_text(text)
    (here / "launcher.sbatch").chmod(0o700)
    transport.push(mirror, [rel], root)
    clusters = clusters_option(cluster)
    S.remove_slurm(campaign.name, transport, clusters)
    begin = first_begin or _begin(campaign, facts)
    job_id = SlurmExecutor(transport=transport, clusters=clusters).sbatch(
        launcher, [f"--begin={begin}"]
    )
    rec = S._register(home, campaign, file, "slurm", launcher, transport, clusters)
    return rec, job_id


def cluster_of(campaign: Campaign, file: Path) -> Cluster:
    """The cluster the campaign's base job names (where its schedule is installed)."""
    from orchestrator.site.cluster import load_cluster

    return load_cluster(load_spec(job_path(file, campaign)).cluster)
