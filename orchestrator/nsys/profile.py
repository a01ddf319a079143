"""ProfileSpec → the profiler's argv prefix and the post-processing commands.

`tool: nsys` wraps each profiled rank's command in `nsys profile` with long flags only
(`--delay=360`, never `-y 360`), so a rendered script reads the same to everyone. Reports are
named `<output>.nsys-rep` for one rank and `<output>.<rank>.nsys-rep` (nsys expands
`%q{SLURM_PROCID}`) when the job has several ranks. `ranks: [0]` profiles only rank 0; the
others run the bare command (task.sh picks at run time from SLURM_PROCID).

Which nsys, and where it runs (`NsysSetup`): the job's `profile.nsys_version`, `nsys_path`,
`nsys_placement` over the partition's `nsys:` (cluster file) over gh-run's defaults (version
`nsys_versions.DEFAULT_VERSION`, command `nsys`, placement `container`). The version decides
flag spellings, the trace APIs and the `nsys stats` report names (`nsys_versions`); a spec that
asks for something the version lacks is refused before anything is written. Placement:
`container` puts nsys inside the image (`<runtime> exec IMAGE nsys profile ... APP`: the seed's
NeMo image ships nsys); `host` puts it on the node around the runtime
(`nsys profile ... <runtime> exec IMAGE APP`: it traces the container's process tree, for images
without nsys). With `runtime: none` both read the same.

After the tasks end, in the same job (and the same container, for placement container), each
report is exported to SQLite (`nsys export --type=sqlite`) and summarised (`nsys stats
--format=csv`, one CSV per report in `reports`), so analysis needs no nsys on the user's
machine: `post_reports` says what to run, templates/sbatch/nsys_post.sh.j2 runs it. Those steps
never delete or rewrite the `.nsys-rep`; a missing report, export or CSV (nsys stats exits 0
even when it wrote none) fails the job loudly, with the reports kept.

`tool: torch` is the PyTorch-profiler path. The contract with torch-profiled workloads: the job
exports `GH_RUN_TORCH_PROFILE=<run>/artifacts` (workloads.sft takes it as the default of
`--torch-profile`); a workload that wants a flag instead names it in `torch_profile_flag`
(e.g. `--torch-profile`), and `<flag> <run>/artifacts` is appended to its argv.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.nsys import versions as nv

TraceApi = Literal[
    "cuda",
    "nvtx",
    "cublas",
    "cublas-verbose",
    "cudnn",
    "cusparse",
    "cusparse-verbose",
    "cusolver",
    "cusolver-verbose",
    "osrt",
    "mpi",
    "ucx",
    "oshmem",
    "openacc",
    "openmp",
    "opengl",
    "vulkan",
    "nvvideo",
    "gds",
    "python-gil",
    "syscall",
    "none",
]
CaptureRange = Literal["none", "cudaProfilerApi", "nvtx", "hotkey"]
# `:mode` (defer, sync, async): nsys 2026.4's documentation (`nv.capture_end_modes`)
_CAPTURE_RANGE_END_RE = re.compile(
    r"^(none|stop|stop-shutdown|repeat(:[1-9][0-9]*)?(:(defer|sync|async))?"
    r"|repeat-shutdown:[1-9][0-9]*(:(defer|sync|async))?)$"
)
_CPU_METRIC_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/=-]*$")
PytorchOption = Literal[
    "autograd-nvtx", "autograd-shapes-nvtx", "functions-trace", "functions-trace-shapes"
]
_GPU_DEVICES_RE = re.compile(r"^(all|none|cuda-visible|[0-9]+(,[0-9]+)*)$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
_REPORT_RE = re.compile(r"^[a-z][a-z0-9_]*(:[A-Za-z0-9_=.,-]+)?$")
_FLAG_RE = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*$")
# An nsys command: a name on the job's PATH or an absolute path, nothing a shell would split.
_COMMAND_RE = re.compile(r"^(/[A-Za-z0-9_.+@=,/-]+|[A-Za-z0-9_.+-]+)$")
Placement = Literal["container", "host"]
MemoryMode = Literal["off", "timeline", "snapshot"]

DEFAULT_TRACE: list[TraceApi] = ["cuda", "nvtx", "osrt"]
DEFAULT_REPORTS = [
    "cuda_gpu_kern_sum",
    "cuda_api_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_mem_size_sum",
    "osrt_sum",
    "nvtx_sum",
]


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _nsys_version(v: object) -> object:
    # YAML reads an unquoted 2023.4 as a number
    return str(nv.parse_supported(str(v))) if isinstance(v, str | int | float) else v


def _nsys_command(v: str) -> str:
    if not _COMMAND_RE.match(v) or ".." in v.split("/"):
        raise ValueError(
            f"{v!r} is not an nsys command; give a name on the job's PATH (nsys) or an "
            "absolute path such as /opt/nvidia/nsight-systems/bin/nsys"
        )
    return v


# The same rules for the partition's nsys and the job's own choice.
NsysVersionText = Annotated[str, BeforeValidator(_nsys_version)]
NsysCommand = Annotated[str, AfterValidator(_nsys_command)]


class NsysSite(Strict):
    """The nsys a partition offers (cluster file: `partitions.<name>.nsys`)."""

    version: NsysVersionText | None = Field(
        None,
        description="Its version (YEAR.MINOR, e.g. 2023.4): flag spellings and report names "
        f"follow it; unset: gh-run renders for {nv.DEFAULT_VERSION} and `check` probes.",
    )
    path: NsysCommand = Field(
        "nsys",
        description="The nsys command: a name on the job's PATH or an absolute path (inside "
        "the image when placement is container).",
    )
    placement: Placement = Field(
        "container",
        description="container: nsys runs inside the image (images that ship it, like NeMo's); "
        "host: nsys on the node wraps `<runtime> exec` and traces the container's processes.",
    )


@dataclass(frozen=True)
class NsysSetup:
    """The nsys a job renders for: which version (and who said so), which command, where, and
    what a binary of that version answered when asked on this machine (`nsys_probe`; None: not
    asked, the version's tables serve)."""

    version: nv.NsysVersion
    version_from: str
    path: str = "nsys"
    placement: Placement = "container"
    caps: nv.Capabilities | None = None

    @property
    def note(self) -> str | None:
        """Why the flags may not be the binary's own: a version newer than those measured,
        never asked here."""
        if self.version.family != "newer" or self.caps is not None:
            return None
        return (
            f"nsys {self.version} is newer than the versions gh-run has measured "
            f"({', '.join(nv.MEASURED)}): its flags follow NVIDIA's documentation; "
            "`gh-run doctor SPEC` asks the binary, and later renders use its answers"
        )


DEFAULT_SETUP = NsysSetup(
    nv.NsysVersion.parse(nv.DEFAULT_VERSION), f"gh-run's default ({nv.DEFAULT_VERSION})"
)


class GpuMetricsSpec(Strict):
    """nsys GPU-metric sampling (what the SMs did: SM and tensor activity, DRAM, PCIe or
    NVLink-C2C throughput). nsys samples every GPU it is given from one process, and two
    samplers of one GPU conflict, so a multi-rank job samples from one rank per node (the one
    of local rank `sampler_local_rank`); gh-run attributes its samples to every GPU of the node
    when it analyses the run."""

    devices: str = Field(
        "all",
        description="GPUs to sample: all (every GPU of the node), or GPU ids 0,1,... (lists "
        "and cuda-visible from nsys 2024.5).",
    )
    set: str | None = Field(
        None,
        description="--gpu-metrics-set: the metric set (an index or alias that "
        "`nsys profile --gpu-metrics-set=help` lists), or one per GPU of `devices` in its "
        "order (a list; nsys 2026.4+); default: the GPU's first.",
    )
    frequency: int | list[int] | None = Field(
        None,
        description="--gpu-metrics-frequency: samples per second (10 to 200000; nsys's "
        "default 10000), or one per GPU of `devices` in its order (a list; nsys 2026.4+).",
    )
    sampler_local_rank: int = Field(
        0, ge=0, description="The local rank (SLURM_LOCALID) whose nsys samples, per node."
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        if isinstance(v, str) and (v == "none" or not _GPU_DEVICES_RE.fullmatch(v)):
            raise ValueError(
                f"{v!r} is not a GPU list to sample; use all, cuda-visible or GPU indices such as"
                " 0,1 (drop profile.gpu_metrics to sample none)"
            )
        return v

    @field_validator("set", mode="before")
    @classmethod
    def _set(cls, v: object) -> object:
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        one = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
        if isinstance(v, str) and not re.fullmatch(rf"{one}(,{one})*", v):
            raise ValueError(
                f"{v!r} is not a metric set; use an index or alias that `nsys profile "
                "--gpu-metrics-set=help` lists (e.g. gh100), or one per GPU: [gh100, gh100]"
            )
        return v

    @field_validator("frequency")
    @classmethod
    def _frequency(cls, v: int | list[int] | None) -> int | list[int] | None:
        for f in v if isinstance(v, list) else [] if v is None else [v]:
            if not 10 <= f <= 200_000:
                raise ValueError(f"{f} is not a sampling frequency; use 10 to 200000 (Hz)")
        if isinstance(v, list) and not v:
            raise ValueError("is an empty list; give one frequency, or one per GPU")
        return v

    def per_gpu(self) -> int:
        """How many values per GPU the set or frequency lists (1: one value for every GPU)."""
        sets = len(self.set.split(",")) if self.set else 1
        freqs = len(self.frequency) if isinstance(self.frequency, list) else 1
        return max(sets, freqs)

    @model_validator(mode="after")
    def _lists_match_devices(self) -> GpuMetricsSpec:
        n = self.per_gpu()
        if n > 1:
            devices = self.devices.split(",") if self.devices[0].isdigit() else None
            if devices is None or len(devices) != n:
                raise ValueError(
                    f"set or frequency gives {n} values, one per GPU, but devices is"
                    f" {self.devices!r}; list the {n} GPU ids in devices (e.g. 0,1), in the"
                    " order of the values"
                )
            sets = len(self.set.split(",")) if self.set else n
            freqs = len(self.frequency) if isinstance(self.frequency, list) else n
            if sets != freqs:
                raise ValueError(
                    f"set lists {sets} values and frequency {freqs}; give one value, or one"
                    " per GPU of devices, to each"
                )
        return self

    def flags(self, setup: NsysSetup) -> list[str]:
        """The nsys flags, spelled as `setup.version` spells them."""
        out = [f"{nv.gpu_metrics_flag(setup.version, setup.caps)}={self.devices}"]
        if self.set is not None:
            out.append(f"--gpu-metrics-set={self.set}")
        if self.frequency is not None:
            f = self.frequency
            out.append(
                f"--gpu-metrics-frequency={','.join(map(str, f)) if isinstance(f, list) else f}"
            )
        return out


class ProfileSpec(Strict):
    """What profiles the workload: nothing, Nsight Systems, or the PyTorch profiler."""

    tool: Literal["none", "nsys", "torch"] = "none"
    trace: list[TraceApi] = Field(
        default_factory=lambda: list(DEFAULT_TRACE), description="--trace APIs."
    )
    delay: int | None = Field(None, ge=0, description="--delay: seconds before collection.")
    duration: int | None = Field(None, ge=1, description="--duration: seconds of collection.")
    capture_range: CaptureRange | None = Field(None, description="--capture-range.")
    capture_range_end: str | None = Field(
        None, description="--capture-range-end: none, stop, stop-shutdown, repeat[:N], ..."
    )
    nvtx_capture: str | None = Field(
        None, description="--nvtx-capture: the NVTX range (with capture_range: nvtx)."
    )
    event_sample: Literal["none", "system-wide"] | None = Field(None, description="--event-sample.")
    sample: Literal["none", "process-tree", "system-wide"] | None = Field(
        None, description="--sample: CPU IP/backtrace sampling."
    )
    cpuctxsw: Literal["none", "process-tree", "system-wide"] | None = Field(
        None, description="--cpuctxsw: OS context-switch tracing."
    )
    cuda_memory_usage: bool | None = Field(None, description="--cuda-memory-usage.")
    pytorch: list[PytorchOption] | None = Field(
        None,
        description="--pytorch: PyTorch's own annotations (autograd-nvtx: every operator as an"
        " NVTX range, read by gh-run as CPU operators; autograd-shapes-nvtx: with input shapes;"
        " functions-trace: forward, backward, optimizer step; functions-trace-shapes, nsys"
        " 2026.4+). nsys 2024.3+; implies nvtx tracing.",
    )
    cpu_metrics: list[str] | None = Field(
        None,
        description="--cpu-metrics: CPU core and uncore events and metrics by name or alias"
        " (`nsys profile --cpu-metrics=help:all` lists them); nsys 2026.3+, where it replaces"
        " the four --cpu-core/--cpu-socket event and metric flags.",
    )
    cuda_um_cpu_page_faults: bool | None = Field(None, description="--cuda-um-cpu-page-faults.")
    cuda_um_gpu_page_faults: bool | None = Field(None, description="--cuda-um-gpu-page-faults.")
    gpu_metrics_devices: str | None = Field(
        None,
        description="--gpu-metrics-devices: all, none, cuda-visible or 0,1,... on every "
        "profiled rank (gpu_metrics samples from one rank per node instead).",
    )
    gpu_metrics: GpuMetricsSpec | None = Field(
        None,
        description="GPU-metric sampling, one sampler per node; the job fails when it asked "
        "for metrics and its reports hold none.",
    )
    show_output: bool | None = Field(None, description="--show-output.")
    force_overwrite: bool = Field(True, description="--force-overwrite (a requeued job rewrites).")
    output: str | None = Field(
        None, description="Report base name in the artifacts folder; default: the job's name."
    )
    ranks: list[int] | None = Field(
        None, description="Profile only these ranks (SLURM_PROCID); default: every rank."
    )
    export_sqlite: bool = Field(True, description="Run `nsys export --type=sqlite` after.")
    reports: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REPORTS),
        description="`nsys stats` reports written as CSV after the run (empty: none).",
    )
    torch_profile_flag: str | None = Field(
        None,
        description="tool torch: append `<flag> <run>/artifacts` to the workload's argv.",
    )
    nsys_version: NsysVersionText | None = Field(
        None,
        description="The nsys version to render for (YEAR.MINOR, e.g. 2022.4); default: the "
        "partition's nsys.version.",
    )
    nsys_path: NsysCommand | None = Field(
        None, description="The nsys command (name or absolute path); default: the partition's."
    )
    nsys_placement: Placement | None = Field(
        None,
        description="container (nsys inside the image) or host (nsys wraps the container); "
        "default: the partition's nsys.placement.",
    )
    memory: MemoryMode = Field(
        "off",
        description="PyTorch's allocator history, recorded by gh-run's import hook without a "
        "change to the workload: timeline (every allocation and free, no stacks), snapshot "
        "(each with its Python stack: categories from the frames too); dumped when the "
        "cudaProfilerApi window ends or the process exits, and when it runs out of GPU memory "
        "(docs/profiling.md, Memory). Any profile.tool, none included.",
    )
    memory_max_events: int | None = Field(
        None,
        ge=1000,
        le=10_000_000,
        description="With memory: the allocator keeps the last N events (a ring); default "
        "100000 (docs/profiling.md gives its cost).",
    )

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: object) -> object:
        # YAML reads an unquoted off as false (and on as true)
        if v is False:
            return "off"
        if v is True:
            raise ValueError(
                "is on, which says no mode; set timeline or snapshot (off: no recording)"
            )
        return v

    @field_validator("capture_range", mode="before")
    @classmethod
    def _capture_range(cls, v: object) -> object:
        # nsys matches these case-insensitively (the seed writes CudaProfilerApi).
        if isinstance(v, str):
            for known in ("none", "cudaProfilerApi", "nvtx", "hotkey"):
                if v.lower() == known.lower():
                    return known
        return v

    @field_validator("capture_range_end")
    @classmethod
    def _capture_range_end(cls, v: str | None) -> str | None:
        if v is not None and not _CAPTURE_RANGE_END_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not an nsys --capture-range-end value; use none, stop, "
                "stop-shutdown, repeat[:N][:mode] or repeat-shutdown:N[:mode] (mode: defer, "
                "sync or async)"
            )
        return v

    @field_validator("gpu_metrics_devices", mode="before")
    @classmethod
    def _gpu_devices(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        if isinstance(v, str) and not _GPU_DEVICES_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not an nsys --gpu-metrics-devices value; use all, none, "
                "cuda-visible or GPU indices such as 0,1"
            )
        return v

    @field_validator("pytorch")
    @classmethod
    def _pytorch(cls, v: list[PytorchOption] | None) -> list[PytorchOption] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("is empty; list e.g. [autograd-nvtx], or drop pytorch")
        if len(set(v)) != len(v):
            raise ValueError("lists a value twice; keep each once")
        for pair in (("autograd-nvtx", "autograd-shapes-nvtx"),
                     ("functions-trace", "functions-trace-shapes")):  # fmt: skip
            if set(pair) <= set(v):
                raise ValueError(f"lists both {pair[0]} and {pair[1]}; nsys takes one of them")
        return v

    @field_validator("cpu_metrics")
    @classmethod
    def _cpu_metrics(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("is empty; list events or metrics by name, or drop cpu_metrics")
        for m in v:
            if m.startswith("help") or not _CPU_METRIC_RE.fullmatch(m):
                raise ValueError(
                    f"{m!r} is not a CPU event or metric name; `nsys profile"
                    " --cpu-metrics=help:all` lists them"
                )
        return v

    @field_validator("trace")
    @classmethod
    def _trace(cls, v: list[TraceApi]) -> list[TraceApi]:
        if not v:
            raise ValueError("is empty; list APIs such as [cuda, nvtx, osrt], or [none]")
        if "none" in v and len(v) > 1:
            raise ValueError("lists none together with other APIs; keep one or the other")
        if len(set(v)) != len(v):
            raise ValueError("lists an API twice; keep each once")
        return v

    @field_validator("output")
    @classmethod
    def _output(cls, v: str | None) -> str | None:
        if v is not None and not _NAME_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} must be a plain file name (letters, digits, '.', '_', '-'); reports are "
                "always written into the run's artifacts folder"
            )
        return v

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("is empty; list at least one rank, e.g. [0], or drop ranks")
        if any(r < 0 for r in v):
            raise ValueError("has a negative rank; ranks count from 0")
        if len(set(v)) != len(v):
            raise ValueError("lists a rank twice; keep each once")
        return sorted(v)

    @field_validator("reports")
    @classmethod
    def _reports(cls, v: list[str]) -> list[str]:
        for r in v:
            if not _REPORT_RE.fullmatch(r):
                raise ValueError(
                    f"{r!r} is not an nsys stats report name (e.g. cuda_gpu_kern_sum, um_sum)"
                )
        return v

    @field_validator("nvtx_capture")
    @classmethod
    def _nvtx_capture(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or any(c in v for c in "\x00\n\r")):
            raise ValueError("must be an NVTX range name on one line")
        return v

    @field_validator("torch_profile_flag")
    @classmethod
    def _torch_flag(cls, v: str | None) -> str | None:
        if v is not None and not _FLAG_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a command-line flag; write e.g. --torch-profile")
        return v

    @model_validator(mode="after")
    def _coherent(self) -> ProfileSpec:
        if self.nvtx_capture and self.capture_range != "nvtx":
            raise ValueError(
                "nvtx_capture is set but capture_range is not nvtx; set capture_range: nvtx"
            )
        if self.capture_range == "nvtx" and not self.nvtx_capture:
            raise ValueError(
                "capture_range: nvtx needs nvtx_capture (the range name, e.g. 'train@*')"
            )
        if self.capture_range_end and self.capture_range in (None, "none"):
            raise ValueError(
                "capture_range_end is set without a capture_range; set capture_range "
                "(e.g. cudaProfilerApi) or drop capture_range_end"
            )
        if self.gpu_metrics is not None and self.gpu_metrics_devices is not None:
            raise ValueError(
                "gpu_metrics and gpu_metrics_devices are both set; keep gpu_metrics (one "
                "sampler per node) and drop gpu_metrics_devices"
            )
        if self.gpu_metrics is not None and self.tool != "nsys":
            raise ValueError("gpu_metrics is set but tool is not nsys; set tool: nsys")
        if self.memory_max_events is not None and self.memory == "off":
            raise ValueError(
                "memory_max_events is set but memory is off; set memory: snapshot (or "
                "timeline), or drop memory_max_events"
            )
        if self.torch_profile_flag and self.tool != "torch":
            raise ValueError("torch_profile_flag is set but tool is not torch; set tool: torch")
        return self

    def report_base(self, default_name: str) -> str:
        return self.output or default_name


def nsys_setup(spec: ProfileSpec, site: NsysSite | None, partition: str = "") -> NsysSetup:
    """The job's own choices over the partition's over gh-run's defaults."""
    site = site or NsysSite()
    if spec.nsys_version:
        version, source = spec.nsys_version, "profile.nsys_version"
    elif site.version:
        where = f"partition {partition}" if partition else "the partition's"
        version, source = site.version, f"{where} nsys.version"
    else:
        return NsysSetup(
            DEFAULT_SETUP.version,
            DEFAULT_SETUP.version_from,
            spec.nsys_path or site.path,
            spec.nsys_placement or site.placement,
        )
    v = nv.NsysVersion.parse(version)
    # a version measured: its tables; a newer one: what a binary of it answered here, if asked
    caps = None
    if v.family == "newer":
        from orchestrator.nsys.probe import cached_for

        caps = cached_for(v)
    return NsysSetup(
        v, source, spec.nsys_path or site.path, spec.nsys_placement or site.placement, caps
    )


def version_problems(spec: ProfileSpec, setup: NsysSetup) -> list[str]:
    """What this spec asks of nsys that `setup.version` lacks, one `field: why; fix` each."""
    if spec.tool != "nsys":
        return []
    v, src = setup.version, setup.version_from
    out: list[str] = []
    unknown = nv.unknown_trace_apis(v, list(spec.trace), setup.caps)
    if unknown:
        out.append(
            f"profile.trace: nsys {v} ({src}) cannot trace {', '.join(unknown)}; remove it, or "
            "set profile.nsys_version if the site's nsys is another"
        )
    if spec.gpu_metrics_devices is not None:
        why = nv.gpu_metrics_problem(v, spec.gpu_metrics_devices)
        if why:
            out.append(f"profile.gpu_metrics_devices: {why} ({src}); change the value")
    gm = spec.gpu_metrics
    if gm is not None:
        why = nv.gpu_metrics_problem(v, gm.devices)
        if why:
            out.append(f"profile.gpu_metrics.devices: {why} ({src}); change the value")
        flag = nv.gpu_metrics_flag(v, setup.caps)
        if setup.caps is not None and setup.caps.options and flag not in setup.caps.options:
            out.append(
                f"profile.gpu_metrics: nsys {v} ({src}) has no GPU-metric sampling ({flag} is"
                " not among its options); drop gpu_metrics or use a newer nsys"
            )
    out += _newer_problems(spec, setup)
    for r in spec.reports:
        if nv.report_name(v, r, setup.caps) is None:
            known = ", ".join(sorted(nv.known_reports(v, setup.caps)))
            out.append(f"profile.reports: nsys {v} ({src}) has no report {r!r}; use one of {known}")
    return out


def _newer_problems(spec: ProfileSpec, setup: NsysSetup) -> list[str]:
    """The 2025-2026 options this version lacks (`nsys_versions`: the binary's answers where
    gh-run has them, else NVIDIA's documentation)."""
    v, src, caps = setup.version, setup.version_from, setup.caps
    out: list[str] = []
    if spec.pytorch:
        takes = nv.pytorch_values(v, caps)
        lacking = [p for p in spec.pytorch if p not in takes]
        if lacking and not takes:
            out.append(
                f"profile.pytorch: nsys {v} ({src}) has no --pytorch (nsys 2024.3 and later"
                " have); drop pytorch, or set profile.nsys_version if the site's nsys is newer"
            )
        elif lacking:
            out.append(
                f"profile.pytorch: nsys {v} ({src}) takes {', '.join(sorted(takes))} for"
                f" --pytorch, not {', '.join(lacking)}; change the value"
            )
    if spec.cpu_metrics and not nv.has_cpu_metrics(v, caps):
        out.append(
            f"profile.cpu_metrics: nsys {v} ({src}) has no --cpu-metrics (nsys"
            f" {'.'.join(map(str, nv.CPU_METRICS_FROM))} and later have); drop cpu_metrics"
        )
    gm = spec.gpu_metrics
    if gm is not None and gm.per_gpu() > 1 and not nv.per_gpu_metric_lists(v, caps):
        known = "its --help says one value for every GPU" if caps else "documented from 2026.4"
        out.append(
            f"profile.gpu_metrics: nsys {v} ({src}): a --gpu-metrics-set or"
            f" --gpu-metrics-frequency value per GPU is not taken ({known}); give one value, or"
            " run `gh-run doctor SPEC` where the site's nsys is to ask it"
        )
    end = spec.capture_range_end or ""
    if end.endswith((":defer", ":sync", ":async")) and not nv.capture_end_modes(v, caps):
        known = "its --help lists none" if caps else "documented from 2026.4"
        out.append(
            f"profile.capture_range_end: nsys {v} ({src}) takes no :mode after repeat ({known});"
            f" drop {end.rsplit(':', 1)[1]!r}"
        )
    return out


def check_for_version(spec: ProfileSpec, setup: NsysSetup, where: str) -> None:
    """Refuse (UserError) what the version cannot do, before anything is written."""
    problems = version_problems(spec, setup)
    if problems:
        raise UserError(f"{where}: {problems[0]}")


def nsys_output(artifacts_dir: str, base: str, multi_rank: bool) -> str:
    """The --output value: per rank (`%q{SLURM_PROCID}`) when the job has several ranks."""
    return f"{artifacts_dir}/{base}.%q{{SLURM_PROCID}}" if multi_rank else f"{artifacts_dir}/{base}"


def report_files(artifacts_dir: str, base: str, ranks: list[int] | None) -> list[str]:
    """Report paths without extension: one per profiled rank, or the single-rank name."""
    if ranks is None:
        return [f"{artifacts_dir}/{base}"]
    return [f"{artifacts_dir}/{base}.{r}" for r in ranks]


def profiler_prefix(
    spec: ProfileSpec, output: str, setup: NsysSetup = DEFAULT_SETUP, *, sampler: bool = True
) -> list[str]:
    """The argv that wraps the workload (empty unless nsys). `output` as from nsys_output;
    flags are spelled as `setup.version` spells them; `sampler`: this rank samples the GPU
    metrics of `spec.gpu_metrics` (one rank per node does)."""
    if spec.tool != "nsys":
        return []
    argv = [setup.path, "profile", f"--output={output}"]
    argv.append(f"--force-overwrite={_flag(spec.force_overwrite)}")
    argv.append(f"--trace={','.join(spec.trace)}")
    if spec.delay is not None:
        argv.append(f"--delay={spec.delay}")
    if spec.duration is not None:
        argv.append(f"--duration={spec.duration}")
    if spec.capture_range is not None:
        argv.append(f"--capture-range={spec.capture_range}")
    if spec.nvtx_capture is not None:
        argv.append(f"--nvtx-capture={spec.nvtx_capture}")
    if spec.capture_range_end is not None:
        argv.append(f"--capture-range-end={spec.capture_range_end}")
    for flag, choice in (
        ("--event-sample", spec.event_sample),
        ("--sample", spec.sample),
        ("--cpuctxsw", spec.cpuctxsw),
        (nv.gpu_metrics_flag(setup.version, setup.caps), spec.gpu_metrics_devices),
    ):
        if choice is not None:
            argv.append(f"{flag}={choice}")
    for flag, on in (
        ("--cuda-memory-usage", spec.cuda_memory_usage),
        ("--cuda-um-cpu-page-faults", spec.cuda_um_cpu_page_faults),
        ("--cuda-um-gpu-page-faults", spec.cuda_um_gpu_page_faults),
        ("--show-output", spec.show_output),
    ):
        if on is not None:
            argv.append(f"{flag}={_flag(on)}")
    if spec.pytorch:
        argv.append(f"--pytorch={','.join(spec.pytorch)}")
    if spec.cpu_metrics:
        argv.append(f"--cpu-metrics={','.join(spec.cpu_metrics)}")
    if spec.gpu_metrics is not None and sampler:
        argv += spec.gpu_metrics.flags(setup)
    return argv


class StatsCsv(Strict):
    """One CSV `nsys stats` must write: the report (as this version spells it) and its path."""

    report: str
    path: str


class PostReport(Strict):
    """What happens after the tasks to one rank's report (templates/sbatch/nsys_post.sh.j2)."""

    label: str
    rep: str
    sqlite: str | None = Field(description="The export's path; None without export_sqlite.")
    export: list[str] = Field(default_factory=list, description="nsys export argv (or none).")
    stats: list[str] = Field(default_factory=list, description="nsys stats argv (or none).")
    export_log: str = Field(description="Where the export's output is kept (beside the report).")
    missing_why: str = Field(
        "",
        description="What a missing report means for this profile (a capture range that "
        "never opened writes none).",
    )
    stats_log: str = Field(description="Where the stats output is kept (beside the report).")
    csvs: list[StatsCsv] = Field(default_factory=list)
    gpu_metrics: bool = Field(
        False, description="This report's nsys sampled GPU metrics: its export must hold them."
    )


def post_reports(
    spec: ProfileSpec,
    reports: list[str],
    setup: NsysSetup = DEFAULT_SETUP,
    prefix: list[str] | None = None,
    samplers: list[str] | None = None,
) -> list[PostReport]:
    """Per report (path without extension): the SQLite export, then the CSV summaries with the
    report names `setup.version` knows. `prefix` (the container's exec argv, for placement
    container) comes before each nsys command. Inputs are only read; outputs get their own
    names (`.sqlite`, `<name>_<report>.csv`)."""
    if spec.tool != "nsys":
        return []
    out: list[PostReport] = []
    for base in reports:
        rep = f"{base}.nsys-rep"
        source = rep
        export: list[str] = []
        sqlite = None
        if spec.export_sqlite:
            sqlite = f"{base}.sqlite"
            export = [
                *(prefix or []),
                setup.path,
                "export",
                "--type=sqlite",
                f"--output={sqlite}",
                "--force-overwrite=true",
                rep,
            ]
            source = sqlite
        stats: list[str] = []
        csvs: list[StatsCsv] = []
        if spec.reports:
            names = [nv.report_name(setup.version, r, setup.caps) or r for r in spec.reports]
            stats = [*(prefix or []), setup.path, "stats"]
            stats += [f"--report={r}" for r in names]
            stats += ["--format=csv", f"--output={base}", "--force-overwrite=true", source]
            csvs = [StatsCsv(report=r, path=nv.csv_name(base, r)) for r in names]
        out.append(
            PostReport(
                label=base.rsplit("/", 1)[-1],
                rep=rep,
                missing_why=_missing_why(spec),
                sqlite=sqlite,
                export=export,
                stats=stats,
                export_log=f"{base}.export.log",
                stats_log=f"{base}.stats.log",
                csvs=csvs,
                gpu_metrics=spec.gpu_metrics is not None
                and sqlite is not None
                and (samplers is None or base in samplers),
            )
        )
    return out


def _missing_why(spec: ProfileSpec) -> str:
    """What no report means for this profile: nsys writes none, and exits 0, when the capture
    range never opened (measured with 2024.2: `--capture-range=cudaProfilerApi` around a program
    that never calls cudaProfilerStart)."""
    if spec.capture_range == "cudaProfilerApi":
        return (
            "the capture range (cudaProfilerApi) never opened: the workload never called "
            "cudaProfilerStart (or ended before it)"
        )
    if spec.capture_range == "nvtx":
        return (
            f"the capture range never opened: the workload never entered the NVTX range "
            f"{spec.nvtx_capture!r} (capture_range nvtx)"
        )
    if spec.capture_range == "hotkey":
        return "the capture range never opened: the hotkey was never pressed"
    return "the profiled task wrote none (see its log)"


def post_commands(
    spec: ProfileSpec, reports: list[str], setup: NsysSetup = DEFAULT_SETUP
) -> list[list[str]]:
    """The nsys commands of `post_reports`, in order (export, then stats, per report)."""
    return [cmd for r in post_reports(spec, reports, setup) for cmd in (r.export, r.stats) if cmd]
