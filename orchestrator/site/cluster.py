"""Clusters and partitions: what the admins describe once, and the check of a job against it.

Modelled on ReFrame's site configuration (system → partitions, each with scheduler options,
resources, environment and container platforms). Admins own these files; users only name a
cluster and a partition.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from orchestrator.core.base import Strict
from orchestrator.core.errors import GhRunError, UserError, combine
from orchestrator.core.units import format_mem, format_time, parse_mem_mib, parse_time
from orchestrator.nsys.profile import NsysSetup, NsysSite, check_for_version, nsys_setup
from orchestrator.site.binding import BINDING_FLAGS, TaskBinding
from orchestrator.site.config import FIX_FILE, FoundCluster, find_cluster
from orchestrator.site.limits import SizeLimits
from orchestrator.spec import yamlio
from orchestrator.spec.container import parse_bind
from orchestrator.spec.envvars import env_dict
from orchestrator.spec.job import JobSpec

Arch = Literal["aarch64", "x86_64"]


class Launcher(Strict):
    """How tasks are started inside the allocation."""

    kind: Literal["srun", "direct"] = "srun"
    options: list[str] = Field(
        default_factory=list, description="Extra srun options, e.g. --mpi=pmix, --cpu-bind=cores."
    )


class PartitionContainer(Strict):
    """The container platform a partition offers, and binds every job gets."""

    runtime: Literal["none", "singularity", "apptainer"] | None = Field(
        None,
        description="The runtime its nodes have (none: no container); jobs asking for another "
        "are refused. Unset: not checked.",
    )
    binds: list[str] = Field(default_factory=list)


class Partition(Strict):
    """One SLURM partition and the limits users may request within it."""

    description: str | None = None
    arch: Arch = "x86_64"
    os: str | None = None
    nodes: list[str] = Field(default_factory=list, description="Node names (informational).")
    max_nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    gpu_type: str | None = None
    gpu_mem: str | None = None
    cpus_per_node: int = Field(1, ge=1)
    mem_per_node: str = "1G"
    cpu_mem: str | None = Field(None, description="CPU (LPDDR5X) memory per node, if separate.")
    max_time: str = "01:00:00"
    default_time: str = "00:10:00"
    accounts: list[str] = Field(default_factory=list)
    qos: list[str] = Field(default_factory=list)
    features: list[str] = Field(default_factory=list, description="Constraints nodes offer.")
    gpu_directive: Literal["gpus-per-node", "gres"] = "gpus-per-node"
    sbatch_options: list[str] = Field(
        default_factory=list, description="Directives every job here carries, e.g. --exclusive."
    )
    setup: list[str] = Field(
        default_factory=list, description="Shell lines run before launch (module loads)."
    )
    env: dict[str, str] = Field(default_factory=dict)
    container: PartitionContainer = Field(default_factory=PartitionContainer)
    nsys: NsysSite = Field(
        default_factory=NsysSite,
        description="The Nsight Systems the nodes have: version, command, and whether it runs "
        "inside the image or on the host around it.",
    )
    launcher: Launcher = Field(default_factory=Launcher)
    binding: TaskBinding | None = Field(
        None,
        description="Each task on its GPU, the cores of that GPU's socket and that socket's "
        "memory (GH200), for jobs of one task per GPU; unset: the site's defaults.",
    )
    template: str | None = Field(
        None, description="Template name under partitions/ (default: the partition's name)."
    )

    @field_validator("max_time", "default_time", mode="before")
    @classmethod
    def _time(cls, v: object) -> str:
        return format_time(parse_time(str(v)))

    @field_validator("mem_per_node", mode="before")
    @classmethod
    def _mem(cls, v: object) -> str:
        return format_mem(parse_mem_mib(str(v)))

    @field_validator("env", mode="before")
    @classmethod
    def _env_names(cls, v: object) -> object:
        # The same rule, and the same sentence, as a job spec's workload.env.
        return env_dict(v)

    @field_validator("template")
    @classmethod
    def _template_name(cls, v: str | None) -> str | None:
        if v is not None and (not re.fullmatch(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", v) or ".." in v):
            raise ValueError(
                f"template {v!r} must be a plain name (letters, digits, '.', '_', '-'); it means "
                "partitions/<template>.sbatch.j2 in the template dirs"
            )
        return v

    @field_validator("gpu_mem", "cpu_mem", mode="before")
    @classmethod
    def _opt_mem(cls, v: object) -> object:
        return None if v is None else format_mem(parse_mem_mib(str(v)))

    @model_validator(mode="after")
    def _coherent(self) -> Partition:
        if parse_time(self.default_time) > parse_time(self.max_time):
            raise ValueError(
                f"default_time {self.default_time} is longer than max_time {self.max_time}; "
                "lower default_time or raise max_time"
            )
        if self.binding is not None:
            both = [o for o in self.launcher.options if o.split("=", 1)[0] in BINDING_FLAGS]
            if both:
                raise ValueError(
                    f"launcher.options {', '.join(both)} and binding both bind the tasks; drop "
                    "the option (binding renders it) or the binding"
                )
            if self.binding.gpu != "none" and self.gpus_per_node == 0:
                raise ValueError(
                    f"binding.gpu: {self.binding.gpu} on a partition without GPUs "
                    "(gpus_per_node: 0); set binding.gpu: none"
                )
        return self

    @field_validator("sbatch_options")
    @classmethod
    def _sbatch_options(cls, v: list[str]) -> list[str]:
        for opt in v:
            if not re.fullmatch(r"^--?[A-Za-z][A-Za-z0-9-]*(=[A-Za-z0-9_.:,@%+=/-]+)?$", opt):
                raise ValueError(
                    f"{opt!r} is not an sbatch option sbatch can take in a directive; "
                    "write --option or --option=value with letters, digits and . _ : , @ % + = / -"
                )
        return v

    @property
    def max_time_seconds(self) -> int:
        return parse_time(self.max_time)

    @property
    def mem_mib(self) -> int:
        return parse_mem_mib(self.mem_per_node)


class ClusterPaths(Strict):
    """Folders on the cluster's shared file system. `{home}` is the gh-run home."""

    runs: str = Field("{home}/runs", description="Where run folders are created.")


# ssh -o options gh-run sets itself: one multiplexed connection per process, never a prompt.
SSH_OWN_OPTIONS = frozenset({"controlmaster", "controlpath", "controlpersist", "batchmode"})
LOGIN_RE = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>\d{1,5}))?\Z"
)
# What may reach ssh, rsync's -e parser and the remote shell without a quoting doubt.
_SSH_WORD_RE = re.compile(r"^[^'\"\\\n\r\x00]*\Z")


class SshSettings(Strict):
    """How gh-run reaches the login node (`transport: ssh`): the system's OpenSSH client, with
    the user's SSH config (host keys, jump hosts, agents) plus what is written here.

    Local paths may use `~`, `$VAR` and `${VAR:-default}`; relative ones are relative to the
    cluster file. Host keys are checked as the SSH config says: gh-run never turns it off."""

    identity: str | None = Field(
        None, description="Private key file (ssh -i, with IdentitiesOnly=yes)."
    )
    config: str | None = Field(
        None, description="An ssh_config file instead of ~/.ssh/config (ssh -F)."
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="ssh -o KEY=VALUE options, e.g. UserKnownHostsFile, ProxyJump.",
    )
    rsync_options: list[str] = Field(
        default_factory=list,
        description="Extra rsync options for copies to and from the cluster, e.g. --bwlimit=20M.",
    )
    gh_run: list[str] = Field(
        default_factory=lambda: ["gh-run"],
        description="The command running gh-run on the login node (where schedules fire).",
    )
    persist_s: int = Field(
        60,
        ge=1,
        le=3600,
        description="Seconds the shared connection stays open when idle (ControlPersist).",
    )
    connect_timeout_s: int = Field(10, ge=1, le=300, description="ssh ConnectTimeout.")

    @field_validator("options")
    @classmethod
    def _options(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.match(r"^[A-Za-z][A-Za-z0-9]*$", key):
                raise ValueError(
                    f"ssh option {key!r} is not an ssh_config keyword; write one like "
                    "UserKnownHostsFile"
                )
            if key.lower() in SSH_OWN_OPTIONS:
                raise ValueError(
                    f"ssh option {key} is gh-run's own (one shared connection per process, "
                    "no prompts); remove it"
                )
            if not _SSH_WORD_RE.match(str(value)) or not str(value).strip():
                raise ValueError(
                    f"ssh option {key}: {value!r} is empty or holds a quote, a backslash or a "
                    "line break; write the value plainly"
                )
        return v

    @field_validator("identity", "config", "rsync_options", "gh_run")
    @classmethod
    def _plain(cls, v: object) -> object:
        for word in v if isinstance(v, list) else [v]:
            if word is not None and (not _SSH_WORD_RE.match(str(word)) or not str(word)):
                raise ValueError(
                    f"{word!r} is empty or holds a quote, a backslash or a line break; "
                    "write it plainly"
                )
        return v


class ClusterDefaults(Strict):
    """What every job on the site gets unless its partition or the job says otherwise."""

    account: str | None = Field(
        None, description="SLURM account for jobs that name none (resources.account)."
    )
    qos: str | None = Field(None, description="QoS for jobs that name none (resources.qos).")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of every job; a partition's env and the job's own win.",
    )
    setup: list[str] = Field(
        default_factory=list,
        description="Shell lines run before the partition's setup lines (site-wide modules).",
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_names(cls, v: object) -> object:
        return env_dict(v)

    @field_validator("account", "qos")
    @classmethod
    def _slurm_word(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"^[A-Za-z0-9_.-]+$", v):
            raise ValueError(
                f"{v!r} is not a SLURM account/QoS name; use letters, digits, '.', '_' and '-'"
            )
        return v


# SLURM's cluster names (ClusterName; --clusters/-M): letters, digits, '_' and '-'.
SLURM_CLUSTER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class SlurmCluster(Strict):
    """Which SLURM cluster a cluster file describes, and how gh-run addresses it."""

    cluster_name: str | None = Field(
        None,
        description="ClusterName in the controller's slurm.conf (`scontrol show config`). Before "
        "check, submit, campaign run, cancel and schedules gh-run confirms that the controller "
        "it reaches says this name, and refuses otherwise. `gh-run partitions import` fills it in.",
    )
    multi_cluster: bool = Field(
        False,
        description="True where the login node reaches several clusters (a federation; "
        "`sacctmgr list clusters` lists more than one): gh-run then passes "
        "--clusters=<cluster_name> to sbatch, squeue, sacct, scontrol and scancel.",
    )

    @field_validator("cluster_name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not SLURM_CLUSTER_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a SLURM cluster name; write ClusterName as `scontrol show config` "
                "prints it (letters, digits, '_' and '-')"
            )
        return v

    @model_validator(mode="after")
    def _multi(self) -> SlurmCluster:
        if self.multi_cluster and self.cluster_name is None:
            raise ValueError(
                "multi_cluster is true but cluster_name is not set; set cluster_name to the "
                "cluster gh-run should pass as --clusters"
            )
        return self


class ClusterAnalysis(Strict):
    """Where gh-run runs on the compute nodes, for the analysis step at the end of a profiled
    job (each report analysed where it was written) and `gh-run analyze --on-cluster`."""

    in_job: bool = Field(
        True,
        description="Profiled jobs end with an analysis step on the nodes (their reports "
        "analysed there, a record beside each); false: every report is analysed where fetched.",
    )
    gh_run: list[str] | None = Field(
        None,
        description="The command that runs gh-run on the compute nodes, e.g. [/apps/gh-run/bin/"
        "gh-run]. Default: the job's image's own gh-run when the job runs in one and it answers "
        "with this gh-run's version; else, with transport local, the Python that submitted "
        "(`python -m orchestrator`: the nodes see the submit host's files, as on most sites and "
        "the dev cluster), with transport ssh, ssh.gh_run (the login node's gh-run).",
    )

    @field_validator("gh_run")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not all(w.strip() for w in v)):
            raise ValueError("gh_run must be a command: a list of non-empty words")
        return v


class Cluster(Strict):
    """A site: its scheduler, shared paths, templates, site-wide defaults and partitions."""

    name: str
    description: str | None = None
    scheduler: Literal["slurm", "none"] = Field(
        "slurm",
        description="slurm: jobs go to the SLURM controller (or, with local_fallback, run here "
        "when none answers); none: no scheduler, jobs run with bash on this machine (the local "
        "executor), as gh-run's built-in cluster `local`.",
    )
    slurm: SlurmCluster = Field(
        default_factory=SlurmCluster,
        description="The SLURM cluster this file describes (ClusterName) and whether gh-run "
        "passes --clusters.",
    )
    login: str | None = Field(
        None,
        description="The login node, user@host[:port]: informational with transport local, "
        "the SSH destination with transport ssh.",
    )
    transport: Literal["local", "ssh"] = Field(
        "local",
        description="local: the SLURM clients are on this machine; ssh: gh-run reaches them "
        "through the login node (see ssh:).",
    )
    ssh: SshSettings | None = Field(None, description="SSH settings (transport: ssh).")
    paths: ClusterPaths = Field(default_factory=ClusterPaths)
    default_partition: str
    template_dirs: list[str] = Field(
        default_factory=list, description="Admin template folders, searched before gh-run's."
    )
    defaults: ClusterDefaults = Field(default_factory=ClusterDefaults)
    artifacts: SizeLimits = Field(
        default_factory=SizeLimits,
        description="How much a run may bring back into the artifact store (per file, per run).",
    )
    analysis: ClusterAnalysis = Field(
        default_factory=lambda: ClusterAnalysis(),
        description="The analysis a profiled job makes of its own reports on the compute nodes.",
    )
    local_fallback: bool = Field(
        False,
        description="Whether `--executor auto` may run this cluster's jobs with bash on the "
        "submitting machine when no SLURM controller answers (true for a test cluster, never "
        "for a site whose submit hosts are shared login nodes).",
    )
    partitions: dict[str, Partition] = Field(..., min_length=1)
    # The file this cluster came from (set by load_cluster; never read from YAML).
    _source: str | None = PrivateAttr(default=None)
    # Where the search found that file (site_config.FoundCluster); None: built in code.
    _origin: FoundCluster | None = PrivateAttr(default=None)

    def gh_run_on_nodes(self) -> list[str]:
        """The command that runs gh-run on the compute nodes (`analysis.gh_run`'s default)."""
        if self.analysis.gh_run is not None:
            return list(self.analysis.gh_run)
        if self.transport == "ssh":
            return list(self.ssh.gh_run) if self.ssh is not None else ["gh-run"]
        import sys

        return [sys.executable, "-m", "orchestrator"]

    @property
    def source(self) -> str | None:
        return self._source

    @source.setter
    def source(self, value: str | None) -> None:
        self._source = value

    @property
    def origin(self) -> FoundCluster | None:
        return self._origin

    @origin.setter
    def origin(self, value: FoundCluster | None) -> None:
        self._origin = value

    @field_validator("partitions")
    @classmethod
    def _partition_names(cls, v: dict[str, Partition]) -> dict[str, Partition]:
        for key in v:
            if not re.fullmatch(r"^[A-Za-z0-9_.-]+$", key):
                raise ValueError(
                    f"partition name {key!r} is not a SLURM partition name; "
                    "use letters, digits, '.', '_' and '-'"
                )
        return v

    @model_validator(mode="after")
    def _transport(self) -> Cluster:
        if self.scheduler == "none" and self.transport != "local":
            raise ValueError(
                "scheduler none runs jobs on this machine, transport ssh sends them to a login "
                "node; set scheduler: slurm, or transport: local"
            )
        if self.transport == "local":
            if self.ssh is not None:
                raise ValueError(
                    "ssh: is set but transport is local; set transport: ssh to reach the "
                    "cluster through its login node, or remove ssh:"
                )
            return self
        m = LOGIN_RE.match(self.login or "")
        if m is None:
            raise ValueError(
                f"login {self.login!r} is not user@host[:port]; write the login node that "
                "transport: ssh goes through, e.g. jdoe@login.example.org or "
                "jdoe@login.example.org:2222"
            )
        port = m.group("port")
        if port is not None and not 1 <= int(port) <= 65535:
            raise ValueError(f"login {self.login!r}: port {port} is not 1-65535; fix the port")
        return self

    @property
    def ssh_settings(self) -> SshSettings:
        """The SSH settings in force (defaults when the file has no ssh: block)."""
        return self.ssh or SshSettings()

    @model_validator(mode="after")
    def _default_exists(self) -> Cluster:
        if self.default_partition not in self.partitions:
            raise ValueError(
                f"default_partition {self.default_partition!r} is not among the partitions "
                f"({', '.join(sorted(self.partitions))}); add it or pick one of them"
            )
        return self

    def partition(self, name: str | None) -> tuple[str, Partition]:
        key = name or self.default_partition
        if key not in self.partitions:
            raise UserError(
                f"partition {key!r} does not exist on cluster {self.name!r}; "
                f"choose one of: {', '.join(sorted(self.partitions))}"
            )
        return key, self.partitions[key]

    def template_search_path(self) -> list[Path]:
        base = Path(self.source).parent if self.source else Path.cwd()
        return [(base / d).resolve() for d in self.template_dirs]


def find_cluster_file(name_or_path: str) -> Path:
    """The cluster file a name or path means (site_config.find_cluster: the search order, and
    the refusal of other users' files)."""
    return find_cluster(name_or_path).path


def load_cluster(name_or_path: str) -> Cluster:
    found = find_cluster(name_or_path)
    if found.origin == "builtin":
        from orchestrator.site.builtin_cluster import local_cluster_data

        cluster = Cluster.model_validate(local_cluster_data())
        cluster.origin = found
        return cluster
    # every file of its `extends:` chain checked as the first was, on what is read
    doc = yamlio.read_file(found.path, yamlio.Trusted("cluster file", FIX_FILE))
    cluster = yamlio.to_model(doc, Cluster)
    cluster.source = str(found.path.resolve())
    cluster.origin = found
    return cluster


def validate_job(
    spec: JobSpec,
    cluster: Cluster,
    spec_src: str | yamlio.Located = "job",
    problems: list[GhRunError] | None = None,
) -> tuple[str, Partition]:
    """Refuse, before anything is submitted, a job the partition cannot run.

    Each refusal is one sentence naming the field (at its line in the job file when
    `spec_src` is the file as read, `yamlio.Located`), the limit and the partition; every
    refusal is found, not only the first. With `problems` they are appended to it (for
    `check`, which reports them with everything else it finds); without, they are raised
    together. The cluster's default account and QoS are filled in first (into `spec`), so
    they are checked like the job's own and reach the script the same way.
    """
    name_of = spec_src.source if isinstance(spec_src, yamlio.Located) else spec_src
    try:
        name, part = cluster.partition(spec.partition)
    except UserError as exc:
        raise UserError(f"{located(spec_src, 'partition')}: partition: {exc}") from None
    found: list[GhRunError] = []

    def refuse(field: str, text: str) -> None:
        found.append(
            UserError(f"{located(spec_src, 'resources', field)}: resources.{field}: {text}")
        )

    res = spec.resources
    # Assigned only when there is something to fill in: each assignment is validated.
    if res.account is None and cluster.defaults.account is not None:
        res.account = cluster.defaults.account
    if res.qos is None and cluster.defaults.qos is not None:
        res.qos = cluster.defaults.qos
    if res.gpus_per_node > part.gpus_per_node:
        refuse(
            "gpus_per_node",
            f"{res.gpus_per_node} GPUs per node asked, but partition {name!r} has "
            f"{part.gpus_per_node} per node; ask for at most {part.gpus_per_node}",
        )
    if res.nodes > part.max_nodes:
        refuse(
            "nodes",
            f"{res.nodes} nodes asked, but partition {name!r} allows at most {part.max_nodes}; "
            "ask for fewer nodes",
        )
    if res.time_seconds is not None and res.time_seconds > part.max_time_seconds:
        refuse(
            "time",
            f"{res.time} is over the limit of partition {name!r}, {part.max_time}; "
            f"ask for {part.max_time} or less",
        )
    if res.mem_mib is not None and res.mem_mib > part.mem_mib:
        refuse(
            "mem",
            f"{res.mem} is more than a node of partition {name!r} has ({part.mem_per_node}); "
            f"ask for {part.mem_per_node} or less",
        )
    if res.tasks_per_node * res.cpus_per_task > part.cpus_per_node:
        refuse(
            "cpus_per_task",
            f"{res.tasks_per_node} tasks x {res.cpus_per_task} CPUs is more than the "
            f"{part.cpus_per_node} cores of a node of partition {name!r}; "
            "lower cpus_per_task or ntasks_per_node",
        )
    if res.constraint:
        # SLURM's constraint syntax: AND (&, ,), OR (|), counts (*N), brackets, negation (!).
        plain = re.sub(r"\*\d+", "", res.constraint)
        wanted = set(re.split(r"[&|,\[\]()!]+", plain)) - {""}
        missing = sorted(wanted - set(part.features))
        if missing:
            offered = ", ".join(part.features) or "none"
            refuse(
                "constraint",
                f"feature {', '.join(missing)} is not offered by partition {name!r} "
                f"(features: {offered}); drop it or pick another partition",
            )
    if res.account and part.accounts and res.account not in part.accounts:
        refuse(
            "account",
            f"{res.account!r} may not use partition {name!r}; use one of "
            f"{', '.join(part.accounts)}",
        )
    if res.qos and part.qos and res.qos not in part.qos:
        refuse(
            "qos",
            f"{res.qos!r} is not allowed on partition {name!r}; use one of {', '.join(part.qos)}",
        )
    for check in (_check_arch, _check_profile):
        try:
            check(spec, name, part, spec_src)
        except UserError as exc:
            found.append(exc)
    if problems is not None:
        problems.extend(found)
    elif found:
        raise combine(found, name_of)
    return name, part


def located(spec_src: str | yamlio.Located, *path: str) -> str:
    """Where a field of the job was written: `file:line`, or `file (--set key)` when an
    override set it, as far as known."""
    if not isinstance(spec_src, yamlio.Located):
        return spec_src
    where = spec_src.locate(path)
    return f"{spec_src.source} ({where})" if where.startswith("--set ") else where


def _check_profile(
    spec: JobSpec, part_name: str, part: Partition, spec_src: str | yamlio.Located
) -> None:
    setup = nsys_setup(spec.profile, part.nsys, part_name)
    check_for_version(spec.profile, setup, located(spec_src, "profile"))
    _check_nsys_placement(spec, part, setup, located(spec_src, "container"))


def _check_nsys_placement(spec: JobSpec, part: Partition, setup: NsysSetup, spec_src: str) -> None:
    """nsys on the host traces the container's processes by preloading its libraries into them
    through the environment (LD_PRELOAD, NVTX_INJECTION64_PATH, QUADD_*) and talking to them
    through /tmp and shared memory. Measured with Apptainer 1.4.5: with --cleanenv or
    --containall nothing inside the container is traced (the report holds only the runtime's
    own process), and without a bind of the nsys installation the preload fails inside."""
    c = spec.container
    if spec.profile.tool != "nsys" or setup.placement != "host" or c.runtime == "none":
        return
    if c.cleanenv or c.containall:
        flag = "containall" if c.containall else "cleanenv"
        raise UserError(
            f"{spec_src}: container.{flag}: nsys on the host (nsys placement host) cannot trace "
            f"into a container started with --{flag}: the runtime drops the variables nsys "
            f"injects itself with; drop {flag}, or set profile.nsys_placement: container"
        )
    if setup.path.startswith("/"):
        binds = [*part.container.binds, *c.binds]
        inside = [parse_bind(b)[1] for b in binds]
        if not any(setup.path == d or setup.path.startswith(d.rstrip("/") + "/") for d in inside):
            raise UserError(
                f"{spec_src}: container.binds: nsys on the host ({setup.path}) preloads its "
                "libraries into the container's processes, so its installation must be visible "
                "at the same path inside; bind its folder (e.g. /opt/nvidia:/opt/nvidia:ro)"
            )


# What an image's name says about its architecture (e.g. nemo-24.05-amd64.sif, ...:arm64).
_ARCH_WORDS: tuple[tuple[Arch, re.Pattern[str]], ...] = (
    ("x86_64", re.compile(r"(?<![A-Za-z0-9])(x86[_-]?64|amd64)(?![A-Za-z0-9])", re.IGNORECASE)),
    ("aarch64", re.compile(r"(?<![A-Za-z0-9])(aarch64|arm64|sbsa)(?![A-Za-z0-9])", re.IGNORECASE)),
)


def image_arch(spec: JobSpec) -> tuple[Arch, str] | None:
    """The architecture of the job's image, and how we know: the spec says so
    (`container.arch`, when the container model has it) or the image name does."""
    declared = getattr(spec.container, "arch", None)
    if declared in ("x86_64", "aarch64"):
        return declared, "container.arch"
    image = spec.container.image
    if not image or spec.container.runtime == "none":
        return None
    found = {arch for arch, pattern in _ARCH_WORDS if pattern.search(Path(image).name)}
    if len(found) == 1:
        arch = found.pop()
        return arch, "container.image"
    return None


def _check_arch(spec: JobSpec, name: str, part: Partition, spec_src: str | yamlio.Located) -> None:
    known = image_arch(spec)
    if known is None or known[0] == part.arch:
        return
    arch, field = known
    how = "is declared" if field == "container.arch" else "is named as"
    raise UserError(
        f"{located(spec_src, *field.split('.'))}: {field}: image {spec.container.image!r} "
        f"{how} an {arch} image, but "
        f"partition {name!r} runs {part.arch} nodes; use an {part.arch} build of the image"
    )
