"""`gh-run init [FOLDER]`: a project of one's own, outside gh-run's repository.

Writes starter job specs for the site's default cluster (jobs/smoke.yaml, jobs/sft.yaml, each
with the `yaml-language-server` line editors validate against), the JSON Schemas they name
(docs/schema/, from the installed models), and the project's `.gh-run` (its home, its
settings, a .gitignore keeping runs out of git). Every gh-run command then works in that folder
and below it. Nothing is overwritten: if any of these files exists, nothing is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.state import note, warn
from orchestrator.core.errors import UserError

if TYPE_CHECKING:
    from orchestrator.cli.schema import Kind
    from orchestrator.site.cluster import Cluster

SCHEMA_KINDS: tuple[Kind, ...] = (
    "job",
    "job-overlay",
    "cluster",
    "campaign",
    "campaign-overlay",
    "settings",
)
# The seed's SFT asks for a whole GH200 node's Grace CPU and 2 hours (`salloc -t 2:00:00`);
# the starter asks for that, or what the partition has when it has less.
SFT_CPUS = 72
SFT_TIME = "02:00:00"


@dataclass(frozen=True)
class Planned:
    path: Path
    text: str


def init_cmd(
    folder: Annotated[
        Path, typer.Argument(help="The project's folder (default: this one); made if missing.")
    ] = Path("."),
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            help="Cluster name or file the starter jobs are for (default: the site's default "
            "cluster, or the only one found; `gh-run doctor` lists them).",
        ),
    ] = None,
    partition: Annotated[
        str | None,
        typer.Option("--partition", "-p", help="Partition (default: the cluster's default)."),
    ] = None,
) -> None:
    """Start a project here: starter jobs, their schemas and a .gh-run home.

    \b
    Writes, refusing to overwrite any of them:
      jobs/smoke.yaml         a one-task job: gh-run submit jobs/smoke.yaml --wait
      jobs/sft.yaml           NeMo LoRA fine-tuning under Nsight Systems (adapt its paths)
      docs/schema/*.json      the JSON Schemas the jobs' first lines name, for editors
      .gh-run/config.yaml     the project's settings (default cluster, its own folders)
      .gh-run/.gitignore      keeps runs and state out of git
    Every gh-run command then finds this project's home from this folder and below it."""
    from orchestrator.site.cluster import load_cluster
    from orchestrator.site.config import default_cluster, is_path

    target = folder.expanduser().absolute()
    name = cluster
    if name is None:
        name, why = default_cluster(target if target.is_dir() else None)
        note(f"starter jobs for cluster {name} ({why})")
    cl = load_cluster(name)
    part_name, _ = cl.partition(partition)
    # By name when the name finds the same file from the new project (the site's, the user's,
    # $GH_RUN_CLUSTERS); by absolute path when only a path or the current project found it.
    by_name = not is_path(name) and cl.origin is not None and cl.origin.origin != "project"
    ref = cl.name if by_name else str(Path(cl.source or name).absolute())
    plan = _plan(target, cl, ref, part_name)
    _refuse_what_is_in_the_way(target, plan)
    _write_all(target, plan)
    for p in plan:
        print(f"wrote {_rel(p.path, target)}")
    _check_jobs(target, [p.path for p in plan if p.path.parent.name == "jobs"])
    where = "" if target == Path.cwd().absolute() else f"cd {target} && "
    print(
        f"next: {where}gh-run render jobs/smoke.yaml; gh-run submit jobs/smoke.yaml --wait; "
        "then adapt the paths in jobs/sft.yaml"
    )


def _refuse_what_is_in_the_way(target: Path, plan: list[Planned]) -> None:
    """Nothing is written when a planned file exists, or a file stands where a folder is needed
    (`.gh-run` a file: half the files were written before)."""
    existing = [p.path for p in plan if p.path.exists() or p.path.is_symlink()]
    if existing:
        shown = ", ".join(str(_rel(p, target)) for p in existing)
        raise UserError(
            f"{target}: {shown} already exist; gh-run init overwrites nothing: move them "
            "aside, or init another folder"
        )
    folders = {target, *(q for p in plan for q in p.path.parents if q.is_relative_to(target))}
    blocked = sorted(f for f in folders if (f.exists() or f.is_symlink()) and not f.is_dir())
    if blocked:
        shown = ", ".join(str(_rel(f, target)) or str(f) for f in blocked)
        raise UserError(
            f"{target}: {shown} is a file where gh-run init needs a folder; nothing was "
            "written: move it aside, or init another folder"
        )


def _write_all(target: Path, plan: list[Planned]) -> None:
    """Every planned file, or none: each is written to a private file beside its place and
    linked into it (never over an existing name); on any failure what was made is removed."""
    import contextlib
    import os
    import tempfile

    from orchestrator.core.errors import RuntimeFailure

    made_dirs: list[Path] = []
    made_files: list[Path] = []
    try:
        for p in plan:
            for folder in reversed([p.path.parent, *p.path.parent.parents]):
                if folder.is_relative_to(target) and not folder.is_dir():
                    folder.mkdir(mode=0o700 if folder.name == ".gh-run" else 0o777)
                    made_dirs.append(folder)
            fd, tmp = tempfile.mkstemp(dir=p.path.parent, prefix=f".{p.path.name}.")
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(p.text)
                os.chmod(tmp, 0o644)
                os.link(tmp, p.path)  # fails when the name appeared meanwhile
            finally:
                os.unlink(tmp)
            made_files.append(p.path)
        (target / ".gh-run").chmod(0o700)
    except OSError as exc:
        for made in reversed(made_files):
            made.unlink(missing_ok=True)
        for folder in reversed(made_dirs):
            with contextlib.suppress(OSError):
                folder.rmdir()
        what = exc.filename or target
        raise RuntimeFailure(
            f"cannot write {what}: {exc.strerror}; nothing was left written: pick a folder you "
            "own, or move what is in the way aside"
        ) from None


def _rel(path: Path, base: Path) -> Path:
    return path.relative_to(base) if path.is_relative_to(base) else path


def _plan(target: Path, cl: Cluster, ref: str, part_name: str) -> list[Planned]:
    import jinja2

    from orchestrator.cli.schema import schema_text
    from orchestrator.core.shipped import templates_dir
    from orchestrator.core.units import format_time, parse_time

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir() / "init")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # A JSON string is a YAML scalar that means exactly this string, whatever it holds.
    env.filters["yaml"] = json.dumps
    part = cl.partitions[part_name]
    cpus = min(SFT_CPUS, part.cpus_per_node)
    values = {
        "cluster": ref,
        "cluster_label": f"cluster {cl.name}",
        "partition": part_name,
        "gpus": min(1, part.gpus_per_node),
        "cpus": cpus,
        "cpus_comment": "          # the node's CPU cores: data-loader workers, offloading"
        if cpus == part.cpus_per_node
        else "",
        "time": format_time(min(parse_time(SFT_TIME), part.max_time_seconds)),
        "runtime": part.container.runtime
        if part.container.runtime not in (None, "none")
        else "singularity",
        "arch": part.arch,
    }
    home = target / ".gh-run"
    plan = [
        Planned(target / "jobs" / "smoke.yaml", env.get_template("smoke.yaml.j2").render(values)),
        Planned(target / "jobs" / "sft.yaml", env.get_template("sft.yaml.j2").render(values)),
        *(
            Planned(target / "docs" / "schema" / f"{kind}.schema.json", schema_text(kind))
            for kind in SCHEMA_KINDS
        ),
        Planned(
            home / "config.yaml",
            env.get_template("config.yaml.j2").render(cluster=cl.name if ref == cl.name else None),
        ),
        Planned(home / ".gitignore", env.get_template("gitignore.j2").render()),
    ]
    return plan


def _check_jobs(target: Path, jobs: list[Path]) -> None:
    """Each starter job checked against its partition, as `gh-run check` would before asking
    the controller: one that does not fit says why (the site's limits are the admin's)."""
    from orchestrator.runs import lifecycle as R

    for job in jobs:
        try:
            R.prepare(job)
        except UserError as exc:
            warn(f"{_rel(job, target)} needs editing before it runs: {exc}")


def register(app: typer.Typer) -> None:
    app.command("init")(init_cmd)
