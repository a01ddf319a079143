"""ContainerSpec → the argv prefix that runs a command inside the container.

`runtime: none` runs on the host (the dev cluster and the local executor use it). For
`singularity` and `apptainer` the prefix is

    <runtime> exec [--nv] [--cleanenv] [--containall] [--pwd DIR] [--bind SRC:DST[:ro]]...
                   [--env K=V]... [--env-file FILE] IMAGE

With `cleanenv` (or `containall`, which implies it) the runtime starts the command with an almost
empty environment: the task's RANK, MASTER_ADDR, SLURM_PROCID (which nsys expands in
`%q{SLURM_PROCID}`), the job's GH_RUN_* and the workload's own variables would not reach it.
`forwarded_env` names what must get in; task.sh exports each under the runtime's prefix, from
the task's own value at run time (values never enter the argv, so secrets stay out of `ps`):
SingularityCE sets NAME inside from `SINGULARITYENV_NAME`; Apptainer from `APPTAINERENV_NAME`
(it reads `SINGULARITYENV_NAME` only when the APPTAINERENV_ one is unset, with a deprecation
warning). Neither lets a prefixed variable set HOME or PATH, so those are not forwarded.

Binds come from the partition (`Partition.container.binds`, admin defaults) first, then the run
folder (so the profiler's reports and the task script are visible at the same path inside), then
the job's own. A local image must exist when the job is submitted (`check_image`), not when it is
rendered: `gh-run render` works on a laptop that has no image.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, field_validator

from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.spec.envvars import env_dict

ImageArch = Literal["aarch64", "x86_64"]
# Images that are pulled, not read from a path: nothing to check on the submit host.
REMOTE_IMAGE_RE = re.compile(r"^(docker|docker-archive|oras|library|shub|https?)://")


def _no_control(value: str, what: str) -> str:
    if any(c in value for c in "\x00\n\r"):
        raise ValueError(f"{what} {value!r} contains a control character; remove it")
    return value


def parse_bind(text: str) -> tuple[str, str, str | None]:
    """`SRC[:DST[:ro|rw]]` → (src, dst, option); raises ValueError with the fix."""
    _no_control(text, "bind")
    parts = text.split(":")
    if len(parts) > 3 or not parts[0]:
        raise ValueError(
            f"bind {text!r} is not SRC[:DST[:ro|rw]]; write e.g. /scratch/data:/data:ro"
        )
    src = parts[0]
    dst = parts[1] if len(parts) > 1 and parts[1] else src
    opt = parts[2] if len(parts) == 3 else None
    if opt not in (None, "ro", "rw"):
        raise ValueError(f"bind {text!r}: option {opt!r} must be ro or rw")
    for path in (src, dst):
        if not PurePosixPath(path).is_absolute():
            raise ValueError(f"bind {text!r}: {path!r} must be an absolute path")
        if ".." in PurePosixPath(path).parts:
            raise ValueError(f"bind {text!r}: {path!r} must not contain '..'")
    return src, dst, opt


def format_bind(src: str, dst: str, opt: str | None) -> str:
    return f"{src}:{dst}:{opt}" if opt else f"{src}:{dst}"


class ContainerSpec(Strict):
    """How the workload's processes are wrapped. `none` runs them directly on the node."""

    runtime: Literal["none", "singularity", "apptainer"] = "none"
    image: str | None = Field(
        None,
        description="A .sif path on the cluster's shared file system, or docker:// etc. URI.",
    )
    arch: ImageArch | None = Field(
        None, description="The image's architecture, checked against the partition's arch."
    )
    nv: bool = Field(True, description="Pass --nv (NVIDIA GPUs and driver into the container).")
    binds: list[str] = Field(
        default_factory=list, description="SRC[:DST[:ro|rw]], absolute paths (--bind)."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables set inside the container (--env K=V)."
    )
    env_file: str | None = Field(None, description="A file of K=V lines (--env-file).")
    cleanenv: bool = Field(False, description="--cleanenv: do not pass the host environment.")
    containall: bool = Field(False, description="--containall: isolate $HOME, /tmp, IPC, PID.")
    pwd: str | None = Field(None, description="Working directory inside the container (--pwd).")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not v.strip():
            raise ValueError("is empty; name a .sif file or a docker:// URI")
        return _no_control(v, "image")

    @field_validator("binds")
    @classmethod
    def _binds(cls, v: list[str]) -> list[str]:
        return [format_bind(*parse_bind(b)) for b in v]

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: object) -> object:
        out = env_dict(v)
        if isinstance(out, dict):
            for key, text in out.items():
                _no_control(text, f"the value of {key}")
        return out

    @field_validator("env_file", "pwd")
    @classmethod
    def _abs_path(cls, v: str | None) -> str | None:
        if v is None:
            return None
        _no_control(v, "path")
        if not PurePosixPath(v).is_absolute():
            raise ValueError(f"{v!r} must be an absolute path")
        return v


def exec_prefix(
    spec: ContainerSpec, default_binds: list[str] | None = None, run_dir: str | None = None
) -> list[str]:
    """The argv that comes before the workload's own argv (empty for `none`).

    `default_binds` are the partition's; `run_dir` is bound at the same path so that what the
    tasks write (profiles, logs) lands in the run folder on the shared file system.
    """
    if spec.runtime == "none":
        return []
    if not spec.image:
        raise UserError(
            "container.image: required when container.runtime is "
            f"{spec.runtime}; set container.image or runtime: none"
        )
    argv = [spec.runtime, "exec"]
    if spec.nv:
        argv.append("--nv")
    if spec.cleanenv:
        argv.append("--cleanenv")
    if spec.containall:
        argv.append("--containall")
    if spec.pwd:
        argv += ["--pwd", spec.pwd]
    seen: set[str] = set()
    binds: list[str] = []
    for text in [*(default_binds or []), *([run_dir] if run_dir else []), *spec.binds]:
        try:
            src, dst, opt = parse_bind(text)
        except ValueError as exc:
            raise UserError(f"container.binds: {exc}") from None
        if dst in seen:
            # A later bind of the same destination (the job's) replaces an earlier one.
            binds = [b for b in binds if parse_bind(b)[1] != dst]
        seen.add(dst)
        binds.append(format_bind(src, dst, opt))
    for b in binds:
        argv += ["--bind", b]
    for key, value in spec.env.items():
        argv += ["--env", f"{key}={value}"]
    if spec.env_file:
        argv += ["--env-file", spec.env_file]
    argv.append(spec.image)
    return argv


# What the runtime reads NAME from when it cleans the environment (see the module docstring).
ENV_PREFIX = {"singularity": "SINGULARITYENV_", "apptainer": "APPTAINERENV_"}
# Set for each task on the host (task.sh, srun, base.sbatch.j2's rendezvous), needed inside.
TASK_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MASTER_NODE",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURMD_NODENAME",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "CUDA_VISIBLE_DEVICES",
)
# The runtime refuses to take these from a prefixed variable; its own settings are not data.
_NOT_FORWARDED = ("HOME", "PATH")
_RUNTIME_OWN = ("SINGULARITY", "APPTAINER")


def forwarded_env(spec: ContainerSpec, names: Iterable[str]) -> dict[str, str]:
    """`{PREFIXED_NAME: NAME}` for what task.sh must pass into a container whose environment is
    cleaned (`cleanenv` or `containall`): the task's own variables (TASK_VARIABLES) and `names`
    (the job's exported variables, the workload's env and secrets). A name set by
    `container.env` (`--env`) is left to it. Empty when the environment is not cleaned."""
    if spec.runtime == "none" or not (spec.cleanenv or spec.containall):
        return {}
    prefix = ENV_PREFIX[spec.runtime]
    out: dict[str, str] = {}
    for name in (*TASK_VARIABLES, *names):
        if name in spec.env or name in _NOT_FORWARDED or name.startswith(_RUNTIME_OWN):
            continue
        out[prefix + name] = name
    return out


def check_image(spec: ContainerSpec, where: str) -> None:
    """At submit time: a local image must be an absolute path to an existing file."""
    if spec.runtime == "none" or not spec.image or REMOTE_IMAGE_RE.match(spec.image):
        return
    path = Path(spec.image)
    if not path.is_absolute():
        raise UserError(
            f"{where}: container.image: {spec.image!r} is a relative path, which the job would "
            "resolve in its run folder; give the absolute path of the image on the cluster's "
            "shared file system, or a docker:// URI"
        )
    if not path.is_file():
        raise UserError(
            f"{where}: container.image: {spec.image} does not exist on this machine; build or "
            f"pull it there first (e.g. `{spec.runtime} pull {spec.image} docker://...`), or "
            "fix the path"
        )
