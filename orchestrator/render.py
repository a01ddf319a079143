"""Rendering: JobSpec + Cluster/Partition → the sbatch script, through Jinja templates.

Python decides (directives, argv, environment); templates only lay the shell out. Every value
reaches the shell through the one `q` filter (POSIX single-quoting via shlex.quote). The
`#SBATCH` lines are read by sbatch, not a shell: their values are restricted in Python to
characters that need no quoting (spec.SBATCH_VALUE_RE).

The per-task part of the job (what each rank runs) is written by the batch script into the run
folder through a quoted heredoc, so the submitted file is the whole job: what `gh-run render`
prints is what `sbatch` gets, byte for byte, and a user can submit it by hand.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import jinja2
from pydantic import Field

from orchestrator import __version__
from orchestrator.base import Strict
from orchestrator.cluster import Cluster, Partition
from orchestrator.container import exec_prefix
from orchestrator.errors import UserError
from orchestrator.paths import TEMPLATES_DIR
from orchestrator.profile import profiler_prefix
from orchestrator.spec import SBATCH_VALUE_RE, JobSpec
from orchestrator.yamlio import display_path

LauncherKind = Literal["srun", "direct"]


def shell_quote(value: object) -> str:
    """The one quoting filter: a string is single-quoted; a list becomes quoted words."""
    if isinstance(value, list | tuple):
        return " ".join(shlex.quote(str(v)) for v in value)
    if isinstance(value, bool):
        return shlex.quote("true" if value else "false")
    return shlex.quote(str(value))


class EmbeddedFile(Strict):
    """A file the batch script writes into the run folder before launching (quoted heredoc)."""

    name: str
    content: str
    mode: str = "0700"

    @property
    def delimiter(self) -> str:
        # Derived from the content, so no line of the content can ever equal it.
        return "GHRUN_EOF_" + hashlib.sha256(self.content.encode()).hexdigest()[:16].upper()


class RenderContext(Strict):
    """Everything the templates see. Documented in docs/templates.md."""

    version: str
    run_id: str
    job_name: str
    spec_name: str
    cluster: str
    partition: str
    run_dir: str
    launcher: LauncherKind
    directives: list[str]
    env: dict[str, str] = Field(description="Exported in the batch script (all tasks see it).")
    setup: list[str] = Field(description="Admin shell lines from the partition, verbatim.")
    task_env: dict[str, str] = Field(description="The workload's own environment.")
    workdir: str | None
    argv: list[str] = Field(description="The full per-task command: container, profiler, app.")
    srun_options: list[str]
    nodes: int
    tasks_per_node: int
    post: list[list[str]] = Field(default_factory=list, description="Commands after launch.")
    files: list[EmbeddedFile] = Field(default_factory=list)
    secret_env: list[str] = Field(
        default_factory=list,
        description="Names of variables the job needs from the submit environment (never values).",
    )
    forward_usr1: bool = Field(
        False, description="Trap USR1 in the batch shell and forward it to the tasks."
    )


class RenderedJob(Strict):
    context: RenderContext
    template: str
    script: str


def make_environment(search_path: Iterable[Path]) -> jinja2.Environment:
    loader = jinja2.FileSystemLoader([str(p) for p in search_path])
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = shell_quote
    return env


def _directive(option: str, value: object | None = None) -> str:
    if value is None:
        return option
    text = str(value)
    if not SBATCH_VALUE_RE.match(text):
        raise UserError(
            f"sbatch option {option}: value {text!r} has characters sbatch cannot take in a "
            "directive; use letters, digits and . _ : , @ % + = / -"
        )
    return f"{option}={text}"


def directives_for(
    spec: JobSpec, part_name: str, part: Partition, job_name: str, run_dir: str
) -> list[str]:
    res = spec.resources
    out = [
        _directive("--job-name", job_name),
        _directive("--partition", part_name),
        _directive("--nodes", res.nodes),
        _directive("--ntasks-per-node", res.tasks_per_node),
        _directive("--cpus-per-task", res.cpus_per_task),
    ]
    if res.gpus_per_node:
        if part.gpu_directive == "gres":
            gres = (
                f"gpu:{part.gpu_type}:{res.gpus_per_node}"
                if part.gpu_type
                else (f"gpu:{res.gpus_per_node}")
            )
            out.append(_directive("--gres", gres))
        else:
            out.append(_directive("--gpus-per-node", res.gpus_per_node))
    out.append(_directive("--time", res.time or part.default_time))
    if res.mem:
        out.append(_directive("--mem", res.mem))
    for opt, val in (
        ("--account", res.account),
        ("--qos", res.qos),
        ("--constraint", res.constraint),
    ):
        if val:
            out.append(_directive(opt, val))
    if res.exclusive:
        out.append("--exclusive")
    # submitit's log convention, so submitit.SlurmJob(...).stdout() finds the logs.
    out.append(_directive("--output", f"{run_dir}/%j_0_log.out"))
    out.append(_directive("--error", f"{run_dir}/%j_0_log.err"))
    out.append("--open-mode=append")
    if spec.retries.max > 0:
        # Sites default to JobRequeue=1: say explicitly whether SLURM may requeue this job.
        out.append("--requeue" if spec.retries.requeue else "--no-requeue")
    if spec.retries.signal_seconds:
        # B: the batch shell gets USR1; its trap forwards it to the tasks (base.sbatch.j2).
        out.append(_directive("--signal", f"B:USR1@{spec.retries.signal_seconds}"))
    for extra in part.sbatch_options:
        opt, sep, val = extra.partition("=")
        out.append(_directive(opt, val) if sep else _directive(opt))
    return out


def template_name_for(part_name: str, part: Partition, search_path: list[Path]) -> str:
    wanted = f"partitions/{part.template or part_name}.sbatch.j2"
    if any((d / wanted).is_file() for d in search_path):
        return wanted
    if part.template:
        raise UserError(
            f"partition {part_name!r}: template {wanted} not found in "
            f"{', '.join(str(d) for d in search_path)}; add it or remove `template:`"
        )
    return "sbatch/base.sbatch.j2"


def build_context(
    spec: JobSpec,
    cluster: Cluster,
    part_name: str,
    part: Partition,
    run_id: str,
    run_dir: str,
    launcher: LauncherKind,
) -> RenderContext:
    job_name = f"ghr-{run_id}"
    workload = spec.workload
    argv = [
        *exec_prefix(spec.container),
        *profiler_prefix(spec.profile, f"{run_dir}/artifacts/{spec.name}"),
        *workload.argv(),
    ]
    env = {
        "GH_RUN_ID": run_id,
        "GH_RUN_NAME": spec.name,
        "GH_RUN_DIR": run_dir,
        "GH_RUN_ARTIFACTS": f"{run_dir}/artifacts",
        "GH_RUN_CLUSTER": cluster.name,
        "GH_RUN_PARTITION": part_name,
        **part.env,
    }
    if spec.profile.tool == "torch":
        # The contract with torch-profiled workloads (workloads.sft reads it as the default of
        # --torch-profile): write the Kineto trace among the artifacts.
        env["GH_RUN_TORCH_PROFILE"] = f"{run_dir}/artifacts"
    return RenderContext(
        version=__version__,
        run_id=run_id,
        job_name=job_name,
        spec_name=spec.name,
        cluster=cluster.name,
        partition=part_name,
        run_dir=run_dir,
        launcher=launcher,
        directives=directives_for(spec, part_name, part, job_name, run_dir),
        env=env,
        setup=list(part.setup),
        task_env=dict(workload.env),
        workdir=workload.workdir,
        argv=argv,
        srun_options=list(part.launcher.options),
        nodes=spec.resources.nodes,
        tasks_per_node=spec.resources.tasks_per_node,
        secret_env=list(workload.secret_env),
        forward_usr1=spec.retries.signal_seconds is not None,
    )


def render_context(ctx: RenderContext, template: str, search_path: list[Path]) -> str:
    env = make_environment(search_path)
    try:
        values = ctx.model_dump()
        values["files"] = ctx.files  # objects, so templates can use f.delimiter
        return env.get_template(template).render(**values)
    except jinja2.TemplateNotFound as exc:
        raise UserError(
            f"template {exc.name} not found in {', '.join(map(str, search_path))}; "
            "check the cluster's template_dirs"
        ) from None
    except jinja2.TemplateError as exc:
        where = getattr(exc, "filename", None) or template
        line = getattr(exc, "lineno", None)
        raise UserError(
            f"{where}{':' + str(line) if line else ''}: template error: {exc.message}; "
            "fix the template (admin-owned)"
        ) from None


def render_job(
    spec: JobSpec,
    cluster: Cluster,
    part_name: str,
    part: Partition,
    run_id: str,
    run_dir: str,
    launcher: LauncherKind = "srun",
) -> RenderedJob:
    if launcher == "direct" and spec.resources.nodes * spec.resources.tasks_per_node > 1:
        raise UserError(
            f"{spec.name}: resources: {spec.resources.nodes} nodes x "
            f"{spec.resources.tasks_per_node} tasks need srun; use --executor slurm, or ask "
            "for nodes: 1 and ntasks_per_node: 1 to run locally"
        )
    search_path = [*cluster.template_search_path(), TEMPLATES_DIR]
    ctx = build_context(spec, cluster, part_name, part, run_id, run_dir, launcher)
    task = render_context(ctx, "sbatch/task.sh.j2", search_path)
    ctx.files.insert(
        0, EmbeddedFile(name="task.sh", content=task if task.endswith("\n") else task + "\n")
    )
    try:
        template = template_name_for(part_name, part, search_path)
    except UserError as exc:
        src = display_path(Path(cluster.source)) if cluster.source else cluster.name
        raise UserError(f"{src}: partitions.{part_name}.template: {exc}") from None
    return RenderedJob(
        context=ctx, template=template, script=render_context(ctx, template, search_path)
    )
