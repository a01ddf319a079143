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

import functools
import hashlib
import re
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import jinja2
from pydantic import Field

from orchestrator import __version__
from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.core.paths import user_cache_dir
from orchestrator.core.shipped import templates_dir
from orchestrator.core.units import parse_time
from orchestrator.nsys import node_wide
from orchestrator.nsys.memory_collect import MemoryHook, hook_for, hook_sources
from orchestrator.nsys.profile import (
    nsys_output,
    nsys_setup,
    post_reports,
    profiler_prefix,
    report_files,
)
from orchestrator.render.binding import Binding, bind
from orchestrator.render.node_gh_run import candidates
from orchestrator.render.node_post import NodePost, node_post, rank_ranges
from orchestrator.render.own_workloads import with_interpreter
from orchestrator.site.cluster import Cluster, Partition
from orchestrator.spec.container import exec_prefix, forwarded_env
from orchestrator.spec.job import CONSTRAINT_RE, SBATCH_VALUE_RE, JobSpec
from orchestrator.spec.nemo import UM_BOOTSTRAP, UM_BOOTSTRAP_NAME, NemoWorkload
from orchestrator.spec.yamlio import display_path

LauncherKind = Literal["srun", "direct"]
# A setup line that calls environment modules (`module load x`, `ml x`, possibly after `&&`)
_MODULE_RE = re.compile(r"(^|.*[;&|]\s*)\s*(module|ml)(\s|$)")
# The post-processing script of nsys jobs (templates/sbatch/nsys_post.sh.j2), in the run folder.
NSYS_POST_NAME = "nsys_post.sh"
# A job with secrets: the file the batch script moves their values into (base.sbatch.j2 names it
# too: "$GH_RUN_DIR/.secrets"), the step that checks the run folder, and the program it runs
SECRETS_NAME = ".secrets"
SECRETS_POST_NAME = "secrets_post.sh"
# The in-job analysis of the exports (templates/sbatch/analysis_post.sh.j2), in the run folder.
ANALYSIS_POST_NAME = "analysis_post.sh"
SECRET_SCRUB_NAME = "secret_scrub.py"


def secret_launcher(secrets_file: str) -> list[str]:
    """The argv before the workload's own in a job with secrets: a POSIX sh that reads the values
    from the job's private file into its environment and execs the workload (inside the
    container where there is one: the run folder is bound there). So no process before it, nsys
    and the container runtime included, holds them in its environment."""
    return ["sh", "-c", '. "$1" && shift && exec "$@"', "gh-run-secrets", secrets_file]


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
    def parent(self) -> str | None:
        """The folder of the run folder the file goes in (made first), None for the top."""
        folder = Path(self.name).parent
        return None if folder == Path(".") else folder.as_posix()

    @property
    def delimiter(self) -> str:
        # Derived from the content, so no line of the content can ever equal it.
        return "GHRUN_EOF_" + hashlib.sha256(self.content.encode()).hexdigest()[:16].upper()


class ArrayEntry(Strict):
    """One variant of a job array: its index and what differs from its siblings."""

    index: int
    run_id: str
    run_dir: str
    env: dict[str, str] = Field(description="Variables whose value is this variant's own.")
    files: list[EmbeddedFile] = Field(default_factory=list)
    post: list[list[str]] = Field(default_factory=list)


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
    setup_modules: bool = Field(
        False, description="A setup line runs `module`/`ml`: the script defines it if missing."
    )
    task_env: dict[str, str] = Field(description="The workload's own environment.")
    workdir: str | None
    argv: list[str] = Field(
        description="The full per-task command: container, profiler, app "
        "(nsys placement host: profiler, container, app)."
    )
    plain_argv: list[str] = Field(
        default_factory=list,
        description="The per-task command without the profiler (ranks not in profile_ranks).",
    )
    sampler_argv: list[str] | None = Field(
        None,
        description="The profiled command of the rank of each node that runs the node-wide "
        "collectors (local rank `sampler_local_rank`); None: `argv` runs them, or none is asked.",
    )
    sampler_local_rank: int = Field(0, description="The local rank that runs `sampler_argv`.")
    node_wide: list[str] = Field(
        default_factory=list,
        description="The node-wide collectors `sampler_argv` runs (field=value).",
    )
    profile_ranks: str | None = Field(
        None,
        description="Only these ranks (ranges: 0-3,8) run `argv` (profiled); None: every rank.",
    )
    srun_options: list[str] = Field(
        description="Flags of the tasks' srun: the partition's launcher.options, then its "
        "binding's (render/binding.py)."
    )
    binding: list[str] = Field(
        default_factory=list,
        description="Why the tasks are bound as they are (or not): comment lines of the script.",
    )
    distributed_env: bool = Field(
        True,
        description="Export the rendezvous and rank variables (the workload's distributed_env; "
        "default: the job runs more than one task).",
    )
    nodes: int
    tasks_per_node: int
    post: list[list[str]] = Field(default_factory=list, description="Commands after launch.")
    files: list[EmbeddedFile] = Field(default_factory=list)
    secret_env: list[str] = Field(
        default_factory=list,
        description="Names of variables the job needs from the submit environment (never values).",
    )
    secrets_file: str | None = Field(
        None,
        description="With secret_env: the file the batch script moves their values into "
        "(`<run_dir>/.secrets`, 0600, removed when the job ends).",
    )
    forward_usr1: bool = Field(
        False, description="Trap USR1 in the batch shell and forward it to the tasks."
    )
    container_env: dict[str, str] = Field(
        default_factory=dict,
        description="With container.cleanenv/containall: PREFIXED_NAME -> NAME, exported by "
        "task.sh from the task's own NAME so that the runtime sets NAME inside.",
    )
    array: list[ArrayEntry] = Field(
        default_factory=list,
        description="Job array: one entry per variant, selected by SLURM_ARRAY_TASK_ID.",
    )
    nsys_version: str | None = Field(
        None, description="profile tool nsys: the version the flags and report names are for."
    )
    nsys_placement: str | None = Field(
        None, description="profile tool nsys: container (inside the image) or host (around it)."
    )
    node_post: NodePost | None = Field(
        None,
        description="profile tool nsys: what nsys_post.sh runs for each report, on each node.",
    )
    analysis_gh_run: list[str] = Field(
        default_factory=list,
        description="The command running gh-run on the nodes when nothing before it answers: "
        "the cluster's analysis.gh_run, else the default (node_gh_run.py).",
    )
    analysis_gh_runs: list[list[str]] = Field(
        default_factory=list,
        description="Every command that may run gh-run on the nodes, first choice first: the "
        "job's image's gh-run, then analysis_gh_run (node_gh_run.candidates); the first that "
        "answers --version with this gh-run's version analyses the reports.",
    )
    memory_hook: MemoryHook | None = Field(
        None,
        description="profile.memory: the hook's folder (first on PYTHONPATH) and variables "
        "task.sh exports; None: off.",
    )


class RenderedJob(Strict):
    context: RenderContext
    template: str
    script: str
    search_path: list[str] = Field(default_factory=list)


def make_environment(search_path: Iterable[Path]) -> jinja2.Environment:
    """One Jinja environment per template search path, reused (it caches compiled templates;
    a campaign renders thousands of scripts)."""
    return _environment(tuple(str(p) for p in search_path))


# A template is a few kilobytes of shell layout; anything near this is not one.
MAX_TEMPLATE_BYTES = 4 << 20


class TrustedLoader(jinja2.FileSystemLoader):
    """Jinja's file loader that refuses a template another user owns or can change (its file
    or its folder): a template is shell in the user's jobs. The check is made on the very
    descriptor the template is read from (`trust.read_checked`), never on a second lookup of
    its path. gh-run's own templates are the installed package's and need no check."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        import os
        import posixpath

        from jinja2.loaders import split_template_path

        pieces = split_template_path(template)
        for folder in self.searchpath:
            filename = posixpath.join(folder, *pieces)
            if os.path.isfile(filename):
                break
        else:
            raise jinja2.TemplateNotFound(template)
        if Path(filename).is_relative_to(templates_dir()):
            return super().get_source(environment, template)
        from orchestrator.core import trust

        data = trust.read_checked(
            Path(filename),
            "template",
            "keep admin templates in the site's folder (/etc/gh-run/templates, root's) or "
            "in a folder you own",
            MAX_TEMPLATE_BYTES,
        )
        if len(data) > MAX_TEMPLATE_BYTES:
            raise UserError(
                f"{filename}: larger than {MAX_TEMPLATE_BYTES >> 20} MiB, not a template; "
                "check the cluster's template_dirs"
            )
        try:
            source = data.decode(self.encoding)
        except UnicodeDecodeError:
            raise UserError(f"{filename}: not UTF-8 text; save the template as UTF-8") from None
        try:
            mtime = os.path.getmtime(filename)
        except OSError:
            mtime = -1.0

        def uptodate() -> bool:
            try:
                return os.path.getmtime(filename) == mtime
            except OSError:
                return False

        return source, os.path.normpath(filename), uptodate


def bytecode_cache_dir() -> Path:
    """Where compiled templates are kept between processes: a folder of the user's own cache
    ($XDG_CACHE_HOME/gh-run/jinja-sandboxed, ~/.cache/gh-run/jinja-sandboxed), never Jinja's
    default /tmp/_jinja2-cache-<uid>, a name another user can take first and so break every
    render. Its own name: code compiled for the sandbox calls through the environment (where
    the sandbox checks each call), code compiled by a plain environment (a gh-run before the
    sandbox) does not, and the cache's key is only the template's name and source."""
    return user_cache_dir() / "jinja-sandboxed"


@functools.cache
def bytecode_cache() -> jinja2.BytecodeCache | None:
    """The compiled-template cache, in a folder created 0700 and checked to be this user's
    alone; None (no cache: each process compiles again, nothing else changes) when it cannot
    be, with one warning naming the folder."""
    from orchestrator.core import trust

    folder = bytecode_cache_dir()
    why = trust.private_dir(folder)
    if why is None:
        return jinja2.FileSystemBytecodeCache(str(folder))
    if "cannot be created" not in why:  # a folder someone else made, or opened: say so
        import sys

        print(
            f"warning: {folder} {why}; templates are compiled afresh each time until it is "
            f"removed (rm -r {folder})",
            file=sys.stderr,
        )
    return None


@functools.lru_cache(maxsize=16)
def _environment(search_path: tuple[str, ...]) -> jinja2.Environment:
    from jinja2.sandbox import SandboxedEnvironment

    loader = TrustedLoader(list(search_path))
    # Sandboxed: a template is the admin's or a project's text, never Python. Jinja's sandbox
    # refuses attributes that reach Python's internals (`__class__`, `__globals__`, a function's
    # code, ...), so `{{ cycler.__init__.__globals__.os.popen(...) }}` in a project's template
    # folder is a template error, not a program run at `render` (issue 42, class 1). Templates
    # only lay out values Python decided; the sandbox changes none of their output (goldens).
    env = SandboxedEnvironment(
        loader=loader,
        # Compiling the templates costs more than the rest of `gh-run render`: keep the compiled
        # code between processes (keyed by the template's source), in the user's own cache.
        bytecode_cache=bytecode_cache(),
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
    pattern = CONSTRAINT_RE if option == "--constraint" else SBATCH_VALUE_RE
    if not pattern.fullmatch(text):
        raise UserError(
            f"sbatch option {option}: value {text!r} has characters sbatch cannot take in a "
            "directive; use letters, digits and . _ : , @ % + = / -"
        )
    return f"{option}={text}"


def directives_for(
    spec: JobSpec,
    part_name: str,
    part: Partition,
    job_name: str,
    run_dir: str,
    binding: Binding | None = None,
) -> list[str]:
    res = spec.resources
    binding = binding or bind(spec, part)
    out = [
        _directive("--job-name", job_name),
        _directive("--partition", part_name),
        _directive("--nodes", res.nodes),
        _directive("--ntasks-per-node", res.tasks_per_node),
        _directive("--cpus-per-task", res.cpus_per_task),
    ]
    if res.gpus_per_node:
        if binding.gpu_request:  # as many GPUs, one to each task (render/binding.py)
            out.append(binding.gpu_request)
        elif part.gpu_directive == "gres":
            gres = (
                f"gpu:{part.gpu_type}:{res.gpus_per_node}"
                if part.gpu_type
                else (f"gpu:{res.gpus_per_node}")
            )
            out.append(_directive("--gres", gres))
        else:
            out.append(_directive("--gpus-per-node", res.gpus_per_node))
    out += binding.directives
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


def search_path(cluster: Cluster) -> list[Path]:
    """Where templates are looked up: the cluster's own template dirs first, then the admin
    override folders (site_config.template_places: $GH_RUN_TEMPLATES, the user's, the
    site's, the project's), then gh-run's."""
    from orchestrator.site import config as site_config

    overrides = [p.path for p in site_config.template_places()]
    return [*cluster.template_search_path(), *overrides, templates_dir()]


def partition_template(cluster: Cluster, part_name: str, part: Partition) -> str:
    """The template a partition's jobs render from, found in the cluster's template dirs
    first; a missing one is the cluster file's error, refused before anything is written."""
    try:
        return template_name_for(part_name, part, search_path(cluster))
    except UserError as exc:
        src = display_path(Path(cluster.source)) if cluster.source else cluster.name
        raise UserError(f"{src}: partitions.{part_name}.template: {exc}") from None


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
    res, prof = spec.resources, spec.profile
    binding = bind(spec, part)
    world = res.nodes * res.tasks_per_node
    artifacts_dir = f"{run_dir}/artifacts"
    container = exec_prefix(spec.container, part.container.binds, run_dir)
    files: list[EmbeddedFile] = []
    if isinstance(workload, NemoWorkload):
        bootstrap = None
        if workload.unified_memory:
            bootstrap = f"{run_dir}/{UM_BOOTSTRAP_NAME}"
            files.append(EmbeddedFile(name=UM_BOOTSTRAP_NAME, content=UM_BOOTSTRAP, mode="0600"))
        app = workload.argv(res.nodes, res.tasks_per_node, bootstrap)
    else:
        # gh-run's own workloads run with gh-run's own Python where the nodes see it
        app = with_interpreter(workload.argv(), spec, cluster)
    if prof.tool == "torch" and prof.torch_profile_flag:
        app = [*app, prof.torch_profile_flag, artifacts_dir]
    report_base = prof.report_base(spec.name)
    setup = nsys_setup(prof, part.nsys, part_name)
    output = nsys_output(artifacts_dir, report_base, world > 1)
    # node-wide collectors (GPU metrics, system-wide sampling): one rank per node runs them; the
    # others' nsys keep what is their own (node_wide.py). A node of one task runs them itself.
    split = world > 1 and res.tasks_per_node > 1 and bool(node_wide.collectors(prof))
    profiler = profiler_prefix(node_wide.others(prof) if split else prof, output, setup)
    sampling = profiler_prefix(prof, output, setup) if split else None
    # nsys inside the image (`runtime exec IMAGE nsys profile APP`) or on the host around the
    # runtime (`nsys profile runtime exec IMAGE APP`); the same without a container.
    on_host = setup.placement == "host"
    secrets_file = f"{run_dir}/{SECRETS_NAME}" if workload.secret_env else None
    if secrets_file is not None:  # the values reach the workload alone (`secret_launcher`)
        app = [*secret_launcher(secrets_file), *app]
    argv = [*profiler, *container, *app] if on_host else [*container, *profiler, *app]
    sampler_argv = None
    if sampling is not None:
        sampler_argv = [*sampling, *container, *app] if on_host else [*container, *sampling, *app]
    # Rank filtering: when only some ranks are profiled, task.sh picks by SLURM_PROCID.
    profiled = prof.ranks if prof.ranks is not None else list(range(world))
    filtered = prof.tool == "nsys" and set(profiled) != set(range(world))
    profile_ranks = rank_ranges(profiled) if filtered else None
    post_plan = None
    if prof.tool == "nsys":
        stem = f"{artifacts_dir}/{report_base}"
        one_base = report_files(artifacts_dir, report_base, profiled[:1] if world > 1 else None)[0]
        one = post_reports(prof, [one_base], setup, [] if on_host else container)[0]
        gpu_checked = prof.gpu_metrics is not None and prof.export_sqlite
        post_plan = node_post(
            one,
            one_base,
            stem,
            profiled,
            per_rank=world > 1,
            nodes=res.nodes,
            tasks_per_node=res.tasks_per_node,
            time_limit_s=parse_time(res.time or part.default_time),
            sampler_local_rank=node_wide.sampler_local_rank(prof) if gpu_checked else None,
            # each export analysed on its node, before the secrets check reads the run folder
            analysis=cluster.analysis.in_job and prof.export_sqlite,
        )
    post = [["bash", f"{run_dir}/{NSYS_POST_NAME}"]] if post_plan else []
    # the gh-runs each node's analysis may use, first choice first (node_gh_run.py)
    gh_runs = candidates(cluster, container) if post_plan and post_plan.analysis else []
    if secrets_file is not None:
        # run by the batch script's EXIT trap (base.sbatch.j2), not as a post step: last, after
        # the reports are exported and summarised, and on every way the job ends
        files.append(EmbeddedFile(name=SECRET_SCRUB_NAME, content=_scrub_source(), mode="0600"))
    setup_lines = [*cluster.defaults.setup, *part.setup]
    memory_hook = hook_for(prof, run_dir, artifacts_dir, part.gpu_mem)
    if memory_hook is not None:  # the allocator's history, recorded from outside the workload
        for name, source in hook_sources().items():
            files.append(EmbeddedFile(name=name, content=source, mode="0600"))
    env = {
        "GH_RUN_ID": run_id,
        "GH_RUN_NAME": spec.name,
        "GH_RUN_DIR": run_dir,
        "GH_RUN_ARTIFACTS": f"{run_dir}/artifacts",
        "GH_RUN_CLUSTER": cluster.name,
        "GH_RUN_PARTITION": part_name,
        **cluster.defaults.env,
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
        directives=directives_for(spec, part_name, part, job_name, run_dir, binding),
        env=env,
        setup=setup_lines,
        setup_modules=any(_MODULE_RE.match(line) for line in setup_lines),
        task_env=dict(workload.env),
        workdir=workload.workdir,
        argv=argv,
        plain_argv=[*container, *app],
        sampler_argv=sampler_argv,
        sampler_local_rank=node_wide.sampler_local_rank(prof),
        node_wide=node_wide.collectors(prof) if split else [],
        profile_ranks=profile_ranks,
        post=post,
        files=files,
        srun_options=[*part.launcher.options, *binding.srun],
        binding=binding.why,
        distributed_env=world > 1 if workload.distributed_env is None else workload.distributed_env,
        nodes=spec.resources.nodes,
        tasks_per_node=spec.resources.tasks_per_node,
        secret_env=list(workload.secret_env),
        secrets_file=secrets_file,
        forward_usr1=spec.retries.signal_seconds is not None,
        # secrets are not forwarded: the launcher sets them where the workload runs
        container_env=forwarded_env(
            spec.container,
            [*env, *workload.env, *(memory_hook.env if memory_hook else ())]
            + (["PYTHONPATH"] if memory_hook else []),
        ),
        nsys_version=str(setup.version) if prof.tool == "nsys" else None,
        nsys_placement=setup.placement if prof.tool == "nsys" else None,
        node_post=post_plan,
        analysis_gh_run=gh_runs[-1] if gh_runs else [],
        analysis_gh_runs=gh_runs,
        memory_hook=memory_hook,
    )


def render_context(ctx: RenderContext, template: str, search_path: list[Path]) -> str:
    env = make_environment(search_path)
    try:
        values = ctx.model_dump()
        values["files"] = ctx.files  # objects, so templates can use f.delimiter
        values["array"] = ctx.array
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
    templates = search_path(cluster)
    template = partition_template(cluster, part_name, part)
    ctx = build_context(spec, cluster, part_name, part, run_id, run_dir, launcher)
    task = render_context(ctx, "sbatch/task.sh.j2", templates)
    ctx.files.insert(
        0, EmbeddedFile(name="task.sh", content=task if task.endswith("\n") else task + "\n")
    )
    if ctx.node_post:
        post = render_context(ctx, "sbatch/nsys_post.sh.j2", templates)
        ctx.files.insert(
            1,
            EmbeddedFile(name=NSYS_POST_NAME, content=post if post.endswith("\n") else post + "\n"),
        )
    if ctx.node_post and ctx.node_post.analysis:
        step = render_context(ctx, "sbatch/analysis_post.sh.j2", templates)
        ctx.files.insert(2, EmbeddedFile(name=ANALYSIS_POST_NAME, content=step.rstrip("\n") + "\n"))
    if ctx.secrets_file:
        check = render_context(ctx, "sbatch/secrets_post.sh.j2", templates)
        ctx.files.append(EmbeddedFile(name=SECRETS_POST_NAME, content=check.rstrip("\n") + "\n"))
    return RenderedJob(
        context=ctx,
        template=template,
        script=render_context(ctx, template, templates),
        search_path=[str(p) for p in templates],
    )


# Directives every variant of an array shares; these three are the array's own.
_PER_JOB_DIRECTIVES = ("--job-name=", "--output=", "--error=")


def array_key(ctx: RenderContext, template: str) -> tuple[object, ...]:
    """Variants with equal keys can share one job array: same directives (partition,
    resources) and the same launch; everything else goes into the per-variant table."""
    shared = tuple(d for d in ctx.directives if not d.startswith(_PER_JOB_DIRECTIVES))
    return (
        template,
        shared,
        ctx.launcher,
        tuple(ctx.setup),
        tuple(ctx.srun_options),
        ctx.nodes,
        ctx.tasks_per_node,
        ctx.forward_usr1,
        tuple(ctx.secret_env),
    )


def render_array(
    members: list[RenderedJob], job_name: str, log_dir: str, max_parallel: int | None
) -> RenderedJob:
    """One sbatch script for many rendered variants (same `array_key`): `--array=0-(N-1)%M`.

    Each variant's own rendering (its environment, its task script: the exact quoted argv) sits
    in one arm of a `case "$SLURM_ARRAY_TASK_ID"` table; only what all variants share is outside.
    """
    if not members:
        raise ValueError("an array needs at least one member")
    first = members[0].context
    key = array_key(first, members[0].template)
    for m in members[1:]:
        if array_key(m.context, m.template) != key:
            raise ValueError(f"{m.context.run_id} cannot share an array with {first.run_id}")
    common = {k: v for k, v in first.env.items() if all(m.context.env.get(k) == v for m in members)}
    entries = [
        ArrayEntry(
            index=i,
            run_id=m.context.run_id,
            run_dir=m.context.run_dir,
            env={k: v for k, v in m.context.env.items() if k not in common},
            files=list(m.context.files),
            post=list(m.context.post),
        )
        for i, m in enumerate(members)
    ]
    throttle = f"%{max_parallel}" if max_parallel else ""
    directives = [
        _directive("--job-name", job_name),
        _directive("--array", f"0-{len(members) - 1}{throttle}"),
        *(d for d in first.directives if not d.startswith(_PER_JOB_DIRECTIVES)),
        _directive("--output", f"{log_dir}/%A_%a_0_log.out"),
        _directive("--error", f"{log_dir}/%A_%a_0_log.err"),
    ]
    ctx = first.model_copy(
        update={
            "run_id": job_name,
            "job_name": job_name,
            "run_dir": log_dir,
            "directives": directives,
            "env": common,
            "files": [],
            "post": [],
            "array": entries,
        }
    )
    search_path = [Path(p) for p in _template_path_of(members[0])]
    return RenderedJob(
        context=ctx,
        template=members[0].template,
        script=render_context(ctx, members[0].template, search_path),
    )


def _template_path_of(job: RenderedJob) -> list[str]:
    return list(job.search_path) if job.search_path else [str(templates_dir())]


def _scrub_source() -> str:
    """The source of orchestrator/artifacts/secret_scrub.py, copied into a run folder with
    secrets."""
    return (Path(__file__).parents[1] / "artifacts" / "secret_scrub.py").read_text()
