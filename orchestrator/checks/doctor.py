"""What this machine has for gh-run (`gh-run doctor`), and what a given job needs that it lacks
(`gh-run doctor SPEC`); also the nsys probe `gh-run check` uses when a site declares no version.

Everything is asked of the real programs (`--version`, `nsys profile --help`, `nsys export
--help`, `nsys stats --help-reports` through `nsys_probe`, `scontrol show config`), with short
timeouts; nothing is installed or changed.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from orchestrator.core import tools
from orchestrator.core.base import Strict
from orchestrator.nsys import versions as nv

if TYPE_CHECKING:
    from orchestrator.nsys.profile import NsysSetup
    from orchestrator.site.cluster import Cluster, Partition
    from orchestrator.spec.job import JobSpec


class Tool(Strict):
    """One program: where it is and what it says its version is (None: not found)."""

    name: str
    path: str | None = None
    version: str | None = None
    detail: str | None = None


class Nsys(Tool):
    family: nv.Family | None = None
    reports: list[str] = Field(default_factory=list, description="nsys stats --help-reports.")
    gpu_metrics_flag: str | None = Field(None, description="As its profile --help spells it.")
    trace_apis: list[str] = Field(default_factory=list, description="Its --trace values.")
    export_types: list[str] = Field(default_factory=list, description="nsys export --type.")
    notes: list[str] = Field(
        default_factory=list, description="Where its answers differ from gh-run's tables."
    )


class Controller(Strict):
    answers: bool
    cluster: str | None = None
    detail: str


class MachineReport(Strict):
    """`gh-run doctor --json`."""

    tools_prefix: str
    slurm_clients: list[Tool]
    controller: Controller
    nsys: list[Nsys]
    apptainer: Tool
    singularity: Tool
    chromium: Tool
    cron: Tool
    export_reading: list[str] = Field(
        default_factory=list, description="What gh-run reads of an nsys SQLite export."
    )


class Need(Strict):
    """One thing a job needs on this machine, and the fix when it is missing."""

    what: str
    ok: bool
    detail: str
    fix: str | None = None
    # found, but it may not work there (the compute nodes decide): said, never a failure
    warn: bool = False


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def tool(name: str, version_args: tuple[str, ...] = ("--version",)) -> Tool:
    path = tools.find(name)
    if path is None:
        return Tool(name=name)
    rc, text = tools.output_of([str(path), *version_args])
    return Tool(name=name, path=str(path), version=_first_line(text) if rc == 0 else None)


def nsys_reports(path: Path) -> list[str]:
    # It exits 1 after listing them (2022.4, 2023.4, 2024.2): the list is the answer.
    _, text = tools.output_of([str(path), "stats", "--help-reports"], timeout=60)
    return nv.parse_reports(text)


def nsys_tool(path: Path, with_reports: bool = True) -> Nsys:
    from orchestrator.nsys import probe as nsys_probe

    if with_reports:
        caps = nsys_probe.probe(str(path))
        version = nv.NsysVersion.parse(caps.version) if caps else None
    else:
        caps = None
        rc, text = tools.output_of([str(path), "--version"])
        try:
            version = nv.NsysVersion.parse(text) if rc == 0 else None
        except ValueError:
            version = None
    if version is None:
        rc, text = tools.output_of([str(path), "--version"])
        return Nsys(name=path.name, path=str(path), detail=_first_line(text) or f"exit {rc}")
    notes = nv.differences(version, caps) if caps else []
    if version.family == "newer" and caps is None:
        notes.append("newer than the versions gh-run has measured: not asked for its flags")
    return Nsys(
        name=path.name,
        path=str(path),
        version=str(version),
        family=version.family,
        reports=caps.reports if caps else [],
        gpu_metrics_flag=nv.gpu_metrics_flag(version, caps),
        trace_apis=caps.trace_apis if caps else [],
        export_types=caps.export_types if caps else [],
        notes=notes,
    )


def controller() -> Controller:
    scontrol = tools.find("scontrol")
    if scontrol is None:
        return Controller(answers=False, detail="no scontrol: the SLURM clients are not installed")
    try:
        res = subprocess.run(
            [str(scontrol), "show", "config"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Controller(answers=False, detail=f"scontrol show config: {exc}")
    if res.returncode != 0:
        return Controller(
            answers=False, detail=_first_line(res.stderr or res.stdout) or "no answer"
        )
    m = re.search(r"^ClusterName\s*=\s*(\S+)", res.stdout, re.MULTILINE)
    host = re.search(r"^SlurmctldHost\[0\]\s*=\s*(\S+)", res.stdout, re.MULTILINE)
    return Controller(
        answers=True,
        cluster=m.group(1) if m else None,
        detail=f"slurmctld {host.group(1) if host else ''}".strip() + " answers",
    )


def machine() -> MachineReport:
    # here, not at the top: `check` imports this module and never the analysis
    from orchestrator.analysis.readers import export_schema

    return MachineReport(
        tools_prefix=str(tools.tools_prefix()),
        slurm_clients=[tool(n) for n in ("sbatch", "squeue", "sacct", "scontrol", "srun")],
        controller=controller(),
        nsys=[nsys_tool(p) for p in tools.nsys_programs()],
        apptainer=tool("apptainer"),
        singularity=tool("singularity"),
        chromium=tool("chromium"),
        # cron has no version option: where it is says enough
        cron=Tool(name="cron", path=str(p)) if (p := tools.find("cron")) else Tool(name="cron"),
        export_reading=export_schema.reading(),
    )


# ---------------------------------------------------------------- what a job needs

Where = Literal["host", "container"]


# What `check` and `doctor SPEC` say before they run a program to ask it (issue 42, class 1).
Say = Callable[[str], None]


def configured_nsys(cluster: Cluster, part: Partition) -> list[str]:
    """The nsys path the site's or the user's own configuration names for this partition (its
    cluster file's `nsys.path` when that file is the site's, the user's or $GH_RUN_CLUSTERS'):
    a program gh-run may run here besides those on the PATH and in the tools prefix. A
    project's cluster file, or one given as a path, names none: it came with the project."""
    origin = cluster.origin.origin if cluster.origin is not None else None
    if origin in ("site", "user", "env") and part.nsys is not None and part.nsys.path:
        return [part.nsys.path]
    return []


def _job_nsys(
    path: str,
    placement: Where,
    runtime: str,
    image: str | None,
    binds: list[str],
    configured: Sequence[str] = (),
) -> tuple[list[str], str, str] | str:
    """(argv prefix, program, how it is asked) of the job's nsys as this machine runs it: on
    the host, or inside the image (`<runtime> exec --bind ... IMAGE`); or why it cannot be. A
    program on the host is run only from the places `tools.runnable` allows."""
    if placement == "container" and runtime != "none":
        prog = tools.find(runtime)
        if prog is None:
            return f"no {runtime} here to look inside the image"
        if not image or not Path(image).is_file():
            return f"the image {image} is not on this machine"
        prefix = [str(prog), "exec"]
        for b in binds:
            prefix += ["--bind", b]
        return [*prefix, image], path, f"{runtime} exec {Path(image).name} {path}"
    found, how = tools.runnable(path, configured)
    if found is None:
        return how
    return [], str(found), str(found)


def _announce(say: Say | None, prefix: list[str], program: str, args: str) -> None:
    if say is not None:
        from orchestrator.core.escape import plain

        shown = " ".join(plain(a) for a in [*prefix, program])
        say(f"nsys: running `{shown} {args}` to ask it")


def probe_nsys_version(
    path: str,
    placement: Where,
    runtime: str,
    image: str | None,
    binds: list[str],
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> tuple[nv.NsysVersion | None, str]:
    """The version of the job's nsys as this machine runs it (`--version` only: `check` and
    `submit` ask this). (None, why) when it cannot be asked."""
    where = _job_nsys(path, placement, runtime, image, binds, configured)
    if isinstance(where, str):
        return None, where
    prefix, program, how = where
    _announce(say, prefix, program, "--version")
    rc, text = tools.output_of([*prefix, program, "--version"], timeout=60)
    if rc != 0:
        return None, f"{how} --version failed: {_first_line(text) or f'exit {rc}'}"
    try:
        return nv.NsysVersion.parse(text), how
    except ValueError:
        return None, f"{how} --version said {_first_line(text)!r}"


def probe_nsys_caps(
    path: str,
    placement: Where,
    runtime: str,
    image: str | None,
    binds: list[str],
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> tuple[nv.Capabilities | None, str]:
    """What the job's nsys answers about itself as this machine runs it (`nsys_probe`, cached
    per binary or image): on the host, or inside the image. (None, why) when it cannot be
    asked."""
    from orchestrator.nsys import probe as nsys_probe

    where = _job_nsys(path, placement, runtime, image, binds, configured)
    if isinstance(where, str):
        return None, where
    prefix, program, how = where
    _announce(say, prefix, program, "--version, profile --help, export --help, stats")
    caps = nsys_probe.probe(program, prefix)
    if caps is None:
        rc, text = tools.output_of([*prefix, program, "--version"], timeout=60)
        return None, f"{how} --version failed: {_first_line(text) or f'exit {rc}'}"
    return caps, how


def nsys_probe(
    spec: JobSpec,
    part: Partition,
    part_name: str,
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> tuple[NsysSetup, nv.NsysVersion | None, str]:
    """The setup the job is rendered for, the version its nsys answers here (None: cannot be
    asked), and how it was asked (or why not)."""
    from orchestrator.nsys.profile import nsys_setup

    setup = nsys_setup(spec.profile, part.nsys, part_name)
    binds = [*part.container.binds, *spec.container.binds]
    found, how = probe_nsys_version(
        setup.path,
        setup.placement,
        spec.container.runtime,
        spec.container.image,
        binds,
        configured,
        say,
    )
    return setup, found, how


def nsys_probe_caps(
    spec: JobSpec,
    part: Partition,
    part_name: str,
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> tuple[NsysSetup, nv.Capabilities | None, str]:
    """`nsys_probe` with everything the job's nsys answered about itself."""
    from orchestrator.nsys.profile import nsys_setup

    setup = nsys_setup(spec.profile, part.nsys, part_name)
    binds = [*part.container.binds, *spec.container.binds]
    caps, how = probe_nsys_caps(
        setup.path,
        setup.placement,
        spec.container.runtime,
        spec.container.image,
        binds,
        configured,
        say,
    )
    return setup, caps, how


def rendered_but_absent(spec: JobSpec, setup: NsysSetup, caps: nv.Capabilities) -> list[str]:
    """What the job is rendered with that the binary does not list (its GPU-metrics flag, trace
    APIs, report names), one phrase each."""
    from orchestrator.nsys.profile import version_problems

    out = []
    flag = nv.gpu_metrics_flag(setup.version, setup.caps)
    if spec.profile.gpu_metrics_devices is not None and caps.options and flag not in caps.options:
        out.append(f"{flag} (it takes {nv.gpu_metrics_flag(setup.version, caps)})")
    asked = replace(setup, caps=caps)
    out += [p.split("; ")[0] for p in version_problems(spec.profile, asked)]
    return out


def nsys_check(
    spec: JobSpec,
    part: Partition,
    part_name: str,
    setup_lines: list[str] | None = None,
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> Need | None:
    """Is the nsys this job is rendered for the one this machine runs, and does it take what
    the job is rendered with? (None: not an nsys job.) Where the nodes load nsys as an
    environment module (`setup_lines`: the cluster's and the partition's), this machine's
    nsys is not theirs and is not asked (nsys_where.py)."""
    from orchestrator.checks.nsys_where import nodes_nsys
    from orchestrator.nsys.profile import nsys_setup

    if spec.profile.tool != "nsys":
        return None
    lines = part.setup if setup_lines is None else setup_lines
    where = nodes_nsys(spec, nsys_setup(spec.profile, part.nsys, part_name), lines)
    if where.kind == "module":
        setup = nsys_setup(spec.profile, part.nsys, part_name)
        rendered = f"rendered for nsys {setup.version} ({setup.version_from})"
        m = where.module_version
        ok = m is None or m.family == setup.version.family
        return Need(
            what="nsys",
            ok=ok,
            detail=f"{rendered}; {where.stated()} ({where.judged})",
            fix=None if ok or m is None else mismatch_fix(m),
        )
    setup, caps, how = nsys_probe_caps(spec, part, part_name, configured, say)
    rendered = f"rendered for nsys {setup.version} ({setup.version_from})"
    if caps is None:
        image = spec.container.image
        if setup.placement == "container" and image and not Path(image).is_file():
            fix = "bring the image here first (image, above): its nsys is asked inside it"
        else:
            fix = (
                "install it (bash scripts/install-nsys.sh), bind it into the image, or set "
                "profile.nsys_path"
            )
        return Need(what="nsys", ok=False, detail=f"{rendered}; {how}", fix=fix)
    found = nv.NsysVersion.parse(caps.version)
    if found.family != setup.version.family:
        return Need(
            what="nsys", ok=False, detail=f"{rendered}; {how} is {found}", fix=mismatch_fix(found)
        )
    absent = rendered_but_absent(spec, setup, caps)
    if absent:
        return Need(
            what="nsys",
            ok=False,
            detail=f"{rendered}; {how} is {found}, which does not list {'; '.join(absent)}",
            fix="change those fields of profile, or point profile.nsys_path at another nsys",
        )
    note = f" ({setup.note})" if setup.note else ""
    return Need(what="nsys", ok=True, detail=f"{rendered}; {how} is {found}{note}")


def mismatch_fix(found: nv.NsysVersion) -> str:
    return (
        f"set profile.nsys_version: {found.year}.{found.minor} (or the partition's "
        "nsys.version), or point profile.nsys_path at the nsys it was rendered for"
    )


def job_needs(
    spec: JobSpec,
    part: Partition,
    part_name: str,
    image_where: str,
    setup_lines: list[str] | None = None,
    configured: Sequence[str] = (),
    say: Say | None = None,
) -> list[Need]:
    """What running this job from this machine needs, each found or not, with the fix
    (`setup_lines`: the cluster's and the partition's, which say where the nodes' nsys is;
    `configured`: the nsys paths the site's or user's configuration names; `say`: told before
    a program is run here to ask it)."""
    from orchestrator.core.errors import UserError
    from orchestrator.spec.container import REMOTE_IMAGE_RE, check_image

    needs: list[Need] = []
    sbatch = tools.find("sbatch")
    ctl = controller() if sbatch else None
    needs.append(
        Need(
            what="SLURM",
            ok=bool(ctl and ctl.answers),
            detail=f"sbatch {sbatch}; {ctl.detail}" if sbatch and ctl else "no sbatch here",
            fix=None
            if ctl and ctl.answers
            else "install the SLURM clients and reach the controller, or --executor local",
        )
    )
    c = spec.container
    if c.runtime != "none":
        prog = tools.find(c.runtime)
        needs.append(
            Need(
                what=c.runtime,
                ok=prog is not None,
                detail=str(prog) if prog else f"no {c.runtime} on PATH or in the tools prefix",
                fix=None
                if prog
                else "install Apptainer (bash scripts/install-apptainer.sh, which also provides "
                "singularity) or load the site's module",
            )
        )
        if c.image and not REMOTE_IMAGE_RE.match(c.image):
            try:
                check_image(c, image_where)
                needs.append(Need(what="image", ok=True, detail=c.image))
            except UserError as exc:
                # the refusal names its fix already (build or pull it, or fix the path)
                needs.append(Need(what="image", ok=False, detail=exc.message))
    found = nsys_check(spec, part, part_name, setup_lines, configured, say)
    if found is not None:
        needs.append(found)
    from orchestrator.checks import gpu_counters

    # may the counters be closed? warnings: the compute nodes decide, not this machine
    for line in gpu_counters.warnings(spec, [*part.setup]):
        what, _, detail = line.partition(": ")
        needs.append(Need(what=what, ok=True, warn=True, detail=f"may be unavailable: {detail}"))
    return needs
