"""The job spec: what a user writes in jobs/*.yaml, validated strictly.

Every value that later reaches a shell is validated here for shape and quoted at render time;
the few values that go into `#SBATCH` lines (which sbatch, not a shell, reads) are restricted
to characters that need no quoting at all.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.core.base import Strict
from orchestrator.core.units import format_mem, format_time, parse_mem_mib, parse_time
from orchestrator.nsys.profile import ProfileSpec
from orchestrator.spec import yamlio
from orchestrator.spec.container import ContainerSpec
from orchestrator.spec.envvars import ProcessEnv
from orchestrator.spec.nemo import NemoWorkload

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# sbatch reads #SBATCH lines itself; keep their values to characters that need no quoting.
SBATCH_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:,@%+=/-]+$")
# --constraint has its own operators (AND &, OR |, counts *N, brackets, !); still no spaces,
# quotes or anything else sbatch's directive parser would split or strip.
CONSTRAINT_RE = re.compile(r"^[A-Za-z0-9_.:,@%+=/&|*!()\[\]-]+$")
SLURM_STATES = Literal["NODE_FAIL", "PREEMPTED", "TIMEOUT", "FAILED", "OUT_OF_MEMORY", "BOOT_FAIL"]


def _check_name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError(
            "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit; "
            "rename it, e.g. sft-lora-1"
        )
    return value


def _sbatch_safe(value: str, what: str) -> str:
    if not SBATCH_VALUE_RE.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} has characters sbatch cannot take in a directive; "
            "use letters, digits and . _ : , @ % + = / -"
        )
    return value


class Resources(Strict):
    """What the job asks SLURM for. `time` and `mem` take SLURM's notations."""

    nodes: int = Field(1, ge=1, le=4096, description="Number of nodes (-N).")
    ntasks_per_node: int | None = Field(
        None, ge=1, le=1024, description="Tasks per node; default: one per GPU, else 1."
    )
    gpus_per_node: int = Field(0, ge=0, le=64, description="GPUs per node (--gpus-per-node).")
    cpus_per_task: int = Field(1, ge=1, le=4096, description="CPU cores per task.")
    mem: str | None = Field(None, description="Memory per node, e.g. 16G; default: partition's.")
    time: str | None = Field(None, description="Wall-clock limit, HH:MM:SS; default: partition's.")
    account: str | None = None
    qos: str | None = None
    constraint: str | None = Field(None, description="Node features (--constraint).")
    exclusive: bool = False

    @field_validator("time", "mem", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        # YAML reads `time: 30` and `mem: 512` as numbers; SLURM reads them as minutes and MiB.
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | None) -> str | None:
        if v is None:
            return None
        seconds = parse_time(v)
        if seconds <= 0:
            raise ValueError("must be longer than zero; give a time such as 00:30:00")
        return format_time(seconds)

    @field_validator("mem")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        return None if v is None else format_mem(parse_mem_mib(v))

    @field_validator("account", "qos")
    @classmethod
    def _sbatch(cls, v: str | None) -> str | None:
        return None if v is None else _sbatch_safe(v, "value")

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        if v is not None and not CONSTRAINT_RE.fullmatch(v):
            raise ValueError(
                f"constraint {v!r} has characters sbatch cannot take in a directive; use "
                "feature names joined by & | , with optional [ ] ( ) * !"
            )
        return v

    @property
    def tasks_per_node(self) -> int:
        return self.ntasks_per_node or max(1, self.gpus_per_node)

    @property
    def time_seconds(self) -> int | None:
        return None if self.time is None else parse_time(self.time)

    @property
    def mem_mib(self) -> int | None:
        return None if self.mem is None else parse_mem_mib(self.mem)


class CommandWorkload(ProcessEnv):
    """A plain command: argv = [command, *args], with extra environment variables."""

    kind: Literal["command"] = "command"
    command: str = Field(..., min_length=1, description="Program to run (found on PATH).")
    args: list[str] = Field(default_factory=list)

    @field_validator("command", "args")
    @classmethod
    def _no_nul(cls, v: str | list[str]) -> str | list[str]:
        for item in [v] if isinstance(v, str) else v:
            if "\x00" in item:
                raise ValueError("contains a NUL byte; remove it")
        return v

    def argv(self) -> list[str]:
        return [self.command, *self.args]


yamlio.register_union_tags("command", "nemo")
Workload = Annotated[CommandWorkload | NemoWorkload, Field(discriminator="kind")]


def _check_glob(pattern: str) -> str:
    p = PurePosixPath(pattern)
    if not pattern.strip() or p.is_absolute() or pattern.startswith("~"):
        raise ValueError(
            f"artifact pattern {pattern!r} must be relative to the run's artifacts/ folder; "
            "write a pattern such as '*.txt' or 'out/*.json'"
        )
    if ".." in p.parts:
        raise ValueError(
            f"artifact pattern {pattern!r} reaches outside the run folder ('..'); "
            "name files inside artifacts/"
        )
    if "\x00" in pattern or "\n" in pattern:
        raise ValueError(f"artifact pattern {pattern!r} has a control character; remove it")
    return pattern


DEFAULT_ARTIFACTS = ["*.nsys-rep", "*.sqlite", "*.csv"]


class Artifacts(Strict):
    """Files the job leaves in `$GH_RUN_ARTIFACTS` that gh-run brings back (globs)."""

    include: list[str] = Field(default_factory=lambda: list(DEFAULT_ARTIFACTS))
    logs: bool = Field(True, description="Also collect the job's stdout/stderr logs.")
    reports: Literal["fetch", "leave"] | None = Field(
        None,
        description="fetch: bring the profiler's reports back; leave: keep on the cluster each "
        "report the job analysed there (listed in the manifest with size and sha256; the "
        "analysis, stats CSVs and logs come back; `gh-run fetch RUN --reports` brings them "
        "later). Default: the cluster file's artifacts.reports; campaigns: leave.",
    )

    @field_validator("include")
    @classmethod
    def _globs(cls, v: list[str]) -> list[str]:
        return [_check_glob(p) for p in v]


DEFAULT_RETRY_ON: tuple[SLURM_STATES, ...] = ("NODE_FAIL", "PREEMPTED")


class Retries(Strict):
    """Resubmit the job when it ends in one of these states, at most `max` times.

    Policy (docs/reliability.md): with `requeue: true` the script carries `--requeue`, so SLURM
    itself may requeue the same job id after a node failure or preemption; gh-run records that
    as the next attempt. When the job ends for good in a state listed in `on`, gh-run submits
    the same job.sbatch again: same run id, `attempt` + 1, a new job id, an event for each.
    `signal_seconds` asks SLURM for `--signal=B:USR1@<s>`: the batch script forwards USR1 to
    the workload that long before the time limit so it can write a checkpoint.
    """

    max: int = Field(0, ge=0, le=20)
    on: list[SLURM_STATES] = Field(default_factory=lambda: list(DEFAULT_RETRY_ON))
    requeue: bool = Field(
        True, description="Let SLURM requeue the same job id (--requeue) when max > 0."
    )
    signal_seconds: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Send USR1 to the workload this many seconds before the time limit.",
    )

    @model_validator(mode="before")
    @classmethod
    def _yaml11_on(cls, v: object) -> object:
        # YAML 1.1 reads the bare key `on` as the boolean true; the user meant the word.
        if isinstance(v, dict) and True in v and "on" not in v:
            return {("on" if k is True else k): val for k, val in v.items()}
        return v


class JobSpec(Strict):
    """One profiled job: what to run, where, with what, and what to bring back."""

    name: str = Field(..., description="Short name; part of the run id and the SLURM job name.")
    description: str | None = None
    cluster: str = Field("dev", description="Cluster file name (clusters/NAME.yaml) or path.")
    partition: str | None = Field(None, description="Partition; default: the cluster's.")
    resources: Resources = Field(default_factory=Resources)
    container: ContainerSpec = Field(default_factory=ContainerSpec)
    profile: ProfileSpec = Field(default_factory=ProfileSpec)
    workload: Workload
    artifacts: Artifacts = Field(default_factory=Artifacts)
    retries: Retries = Field(default_factory=Retries)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v)

    @field_validator("workload", mode="before")
    @classmethod
    def _default_kind(cls, v: object) -> object:
        if isinstance(v, dict) and "kind" not in v:
            return {"kind": "command", **v}
        return v

    @field_validator("partition")
    @classmethod
    def _partition(cls, v: str | None) -> str | None:
        return None if v is None else _sbatch_safe(v, "partition")

    @field_validator("artifacts", mode="before")
    @classmethod
    def _artifact_list(cls, v: object) -> object:
        # `artifacts: ["*.txt"]` is the short form of `artifacts: {include: [...]}`.
        return {"include": v} if isinstance(v, list) else v

    @model_validator(mode="after")
    def _coherent(self) -> JobSpec:
        sig, limit = self.retries.signal_seconds, self.resources.time_seconds
        if sig is not None and limit is not None and sig >= limit:
            raise ValueError(
                f"retries.signal_seconds ({sig}) is not shorter than resources.time "
                f"({self.resources.time}); signal earlier, e.g. {max(1, limit // 10)}"
            )
        world = self.resources.nodes * self.resources.tasks_per_node
        over = [r for r in self.profile.ranks or [] if r >= world]
        if over:
            raise ValueError(
                f"profile.ranks lists rank {over[0]}, but the job has {world} rank"
                f"{'' if world == 1 else 's'} (0-{world - 1}); list ranks below {world}"
            )
        if self.container.runtime != "none" and not self.container.image:
            raise ValueError(
                "container.image is required when container.runtime is "
                f"{self.container.runtime}; set container.image or runtime: none"
            )
        return self


def load_spec(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> JobSpec:
    """Load a job spec file (with `extends:` and `--set` overrides) into a JobSpec."""
    return load_spec_located(path, overrides)[0]


def load_spec_located(
    path: Path, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[JobSpec, yamlio.Located]:
    """The JobSpec and where each of its fields was written (file and line, or `--set`), for
    errors found later (partition limits) that point at the line."""
    doc = yamlio.apply_overrides(yamlio.read_file(path), overrides)
    spec = yamlio.to_model(doc, JobSpec)
    # A relative workdir in a spec is relative to the spec file, as paths in compose files are.
    workdir = getattr(spec.workload, "workdir", None)
    if workdir and not Path(workdir).is_absolute() and "$" not in workdir:
        spec.workload.workdir = str((path.parent / workdir).resolve())
    return spec, doc
