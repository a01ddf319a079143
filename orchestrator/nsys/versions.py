"""What differs between the Nsight Systems (nsys) versions gh-run supports, in one place.

Rendering (`profile.py`: flag spellings, trace APIs, `nsys stats` report names) and the readers
(export schema) consult this module; nothing else spells a version-dependent name.

gh-run knows four families: 2022.4, 2023.4 and 2024.2 (each measured with the real CLI that
`make deps` installs: tests/unit/test_nsys_versions.py checks these tables against them), and
"newer" (2024.3 and later: what NVIDIA's documentation says, and what the binary answers when
asked, `nsys_probe.py`). A binary's own answers (`Capabilities`: `nsys profile --help`,
`nsys export --help`, `nsys stats --help-reports`) take precedence over the tables wherever
gh-run has them, so a newer nsys gets the flags it lists rather than a guess.

- GPU metrics flag: `--gpu-metrics-device` in 2022.4, 2023.4 and 2024.2 (measured: the plural
  is an "unrecognised option" there), `--gpu-metrics-devices` in 2024.5 and later (NVIDIA's
  documentation; 2024.3-2024.4 unmeasured: asked of the binary where it can be). Its values:
  all, none or one GPU id before 2024.5; lists later; `cuda-visible` from 2024.5.
- `--trace` APIs: 2022.4 has the common ones only (measured); 2023.4 adds python-gil
  (measured); 2024.2 adds cusolver (measured; no gds or syscall); later ones add more.
- `nsys stats` report names: 2022.4 knows only the old ones (`gpukernsum`, `osrtsum`, ...: 32,
  measured); 2023.4 lists the new ones (`cuda_gpu_kern_sum`, `osrt_sum`, ...: 37, measured)
  and still runs the old; 2024.2 the new ones and `mpi_event_sum` (38, measured).
- `nsys export --type`: sqlite, hdf, text, arrow, json, info in 2022.4; 2023.4 and 2024.2 add
  arrowdir and parquetdir (measured); 2026.4 drops json and text for jsonlines (its release
  notes; gh-run exports sqlite only).
- 2025-2026 (NVIDIA's documentation of 2026.4: its User Guide and release notes; none of these
  versions runs here, so each is also asked of the binary, `Capabilities.help`):
  `--gpu-metrics-set` and `--gpu-metrics-frequency` take one value per GPU, in the order of
  `--gpu-metrics-devices` (documented for 2026.4; earlier releases: asked); `--cpu-metrics`
  replaces `--cpu-core-events`, `--cpu-core-metrics`, `--cpu-socket-events` and
  `--cpu-socket-metrics` and cannot be combined with them (2026.3 and later; 2024.2 has
  `--cpu-core-metrics`, measured); `--pytorch` takes `autograd-nvtx`, `autograd-shapes-nvtx`,
  `functions-trace` (2024.2 has no `--pytorch`, measured; later releases: documented, asked) and
  `functions-trace-shapes` (2026.4); `--capture-range-end=repeat[:N][:mode]` and
  `repeat-shutdown:N[:mode]` with mode defer, sync or async (2026.4; 2022.4-2024.2 take no
  mode, measured).
- Export metadata: table EXPORT_META_DATA in 2022.4, META_DATA_EXPORT + META_DATA_CAPTURE from
  2023.4 (measured). From 2022.4 on, a table with no rows is left out of the export (measured:
  no NVTX_EVENTS or CUPTI_* when nothing was recorded). Export schema versions met:
  `export_schema.py`.

Other measured facts that shape what gh-run does:
- `nsys stats` exits 0 whatever happens: an unknown report name leaves no CSV ("could not be
  found"), a report that finds no data leaves an empty CSV ("SKIPPED"), a report that fails
  ("internal error") leaves an empty CSV too. The job checks the CSVs itself (nsys_post.sh).
- The other spelling of the GPU-metrics flag is an "unrecognised option" (exit 1), so a job
  rendered for the wrong version fails at launch.
- An older nsys cannot read a report written by a newer one (2022.4 refuses 2023.4's with
  "Version number is invalid", 2022.4 and 2023.4 refuse 2024.2's with "Please update your
  Nsight Systems"): exports of a `.nsys-rep` go through the newest local nsys
  (`nsys_export.py`).
- 2022.4 (on this machine's 6.x kernel) sometimes never finishes a CPU-only profile when CPU
  sampling or context-switch tracing is on (`--sample`, `--cpuctxsw`): its agent spins after the
  application exits. Jobs for 2022.4 on such nodes set `sample: none` and `cpuctxsw: none`.
- NVTX ranges from the PyPI `nvtx` package 0.2.12 and later are not recorded by 2022.4 or 2023.4
  (only domain rows); 0.2.10/0.2.11 are, and so is `torch.cuda.nvtx`.
- 2023.4's importer drops the CUDA data after `cudaGetDriverEntryPointByVersion` (CUDA 12.5 and
  later): reports that keep their runtime calls but lose their kernels (issue 24; the reader
  refuses such an export, `analysis/readers/capture_health.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["2022.4", "2023.4", "2024.2", "newer"]
FAMILIES: tuple[Family, ...] = ("2022.4", "2023.4", "2024.2", "newer")
SUPPORTED_TEXT = "2022.4, 2023.4, 2024.1-2024.2, or 2024.3 and later"
# the families measured with a real binary (the others follow NVIDIA's documentation and the
# binary's own answers)
MEASURED: tuple[Family, ...] = ("2022.4", "2023.4", "2024.2")
# What gh-run renders for when neither the partition nor the job says which nsys the site has
# (the release the project installs; `gh-run check` probes and says when the site differs).
DEFAULT_VERSION = "2023.4"

_VERSION_RE = re.compile(r"(?<![\d.])(20\d\d)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")


@dataclass(frozen=True, order=True)
class NsysVersion:
    """An nsys release: year.minor[.patch[.build]] (`2023.4.4.54`)."""

    year: int
    minor: int
    patch: int | None = None
    build: int | None = None

    @classmethod
    def parse(cls, text: str) -> NsysVersion:
        """From `2023.4`, `2023.4.4.54-234433681190v0` or a whole `nsys --version` line;
        ValueError naming what was expected."""
        m = _VERSION_RE.search(text.strip())
        if not m:
            raise ValueError(
                f"{text.strip()!r} is not an nsys version; write it as YEAR.MINOR, e.g. 2023.4"
            )
        year, minor, patch, build = m.groups()
        return cls(
            int(year),
            int(minor),
            int(patch) if patch is not None else None,
            int(build) if build is not None else None,
        )

    def __str__(self) -> str:
        parts = [self.year, self.minor, self.patch, self.build]
        return ".".join(str(p) for p in parts if p is not None)

    @property
    def family(self) -> Family | None:
        """The family gh-run knows this release by, or None (not supported)."""
        if (self.year, self.minor) == (2022, 4):
            return "2022.4"
        if (self.year, self.minor) == (2023, 4):
            return "2023.4"
        if (self.year, self.minor) in ((2024, 1), (2024, 2)):
            return "2024.2"
        if self.at_least(2024, 3):
            return "newer"
        return None

    def at_least(self, year: int, minor: int) -> bool:
        return (self.year, self.minor) >= (year, minor)


def parse_supported(text: str) -> NsysVersion:
    """`parse`, then refuse a release outside the supported families (ValueError with the fix)."""
    v = NsysVersion.parse(text)
    if v.family is None:
        raise ValueError(
            f"nsys {v} is not a version gh-run knows ({SUPPORTED_TEXT}); declare the nearest "
            "of those (they differ in flag spellings and report names), or upgrade nsys"
        )
    return v


# ---------------------------------------------------------------- nsys profile


def gpu_metrics_flag(v: NsysVersion, caps: Capabilities | None = None) -> str:
    """The GPU-metrics flag as this version spells it: the binary's own list where known."""
    if caps is not None:
        for flag in ("--gpu-metrics-devices", "--gpu-metrics-device"):
            if flag in caps.options:
                return flag
    return "--gpu-metrics-devices" if v.at_least(2024, 3) else "--gpu-metrics-device"


def gpu_metrics_problem(v: NsysVersion, value: str) -> str | None:
    """Why `value` cannot be given to this version's GPU-metrics flag (None: it can)."""
    if not v.at_least(2024, 5) and value not in ("all", "none") and not value.isdigit():
        return (
            f"nsys {v} takes all, none or one GPU id for {gpu_metrics_flag(v)} (lists from "
            f"2024.5), not {value!r}"
        )
    if value == "cuda-visible" and not v.at_least(2024, 5):
        return f"nsys {v} has no cuda-visible for {gpu_metrics_flag(v)} (2024.5 and later have)"
    return None


_COMMON_TRACE = frozenset(
    {
        "cuda",
        "nvtx",
        "cublas",
        "cublas-verbose",
        "cusparse",
        "cusparse-verbose",
        "mpi",
        "oshmem",
        "ucx",
        "osrt",
        "cudnn",
        "opengl",
        "opengl-annotations",
        "openacc",
        "openmp",
        "nvvideo",
        "vulkan",
        "vulkan-annotations",
        "none",
    }
)
# None: every API gh-run's ProfileSpec offers (a newer nsys: the binary's list where known).
TRACE_APIS: dict[Family, frozenset[str] | None] = {
    "2022.4": _COMMON_TRACE,
    "2023.4": _COMMON_TRACE | {"python-gil"},
    "2024.2": _COMMON_TRACE | {"python-gil", "cusolver", "cusolver-verbose"},
    "newer": None,
}


def unknown_trace_apis(
    v: NsysVersion, apis: list[str], caps: Capabilities | None = None
) -> list[str]:
    known = frozenset(caps.trace_apis) if caps and caps.trace_apis else TRACE_APIS[
        v.family or "newer"
    ]  # fmt: skip
    return [] if known is None else [a for a in apis if a not in known]


PER_GPU_LISTS_FROM = (2026, 4)  # documented there; earlier releases: asked of the binary
CPU_METRICS_FROM = (2026, 3)
PYTORCH_VALUES = ("autograd-nvtx", "autograd-shapes-nvtx", "functions-trace")
PYTORCH_SHAPES_FROM = (2026, 4)  # functions-trace-shapes
CAPTURE_END_MODES_FROM = (2026, 4)


def per_gpu_metric_lists(v: NsysVersion, caps: Capabilities | None = None) -> bool:
    """Whether this version takes one `--gpu-metrics-set`/`--gpu-metrics-frequency` value per
    GPU: the binary's own help where known, else the documentation."""
    text = (caps.help.get("--gpu-metrics-set") if caps is not None else None) or ""
    if text:
        return bool(re.search(r"(?i)per GPU|one value per|comma-separated list", text))
    return v.at_least(*PER_GPU_LISTS_FROM)


def has_cpu_metrics(v: NsysVersion, caps: Capabilities | None = None) -> bool:
    """Whether this version has `--cpu-metrics`: the binary's option list where known."""
    if caps is not None and caps.options:
        return "--cpu-metrics" in caps.options
    return v.at_least(*CPU_METRICS_FROM)


def pytorch_values(v: NsysVersion, caps: Capabilities | None = None) -> frozenset[str]:
    """The `--pytorch` values this version takes (empty: it has no `--pytorch`): the binary's
    own help where known, else the documentation (none for the families measured)."""
    if caps is not None and caps.options:
        if "--pytorch" not in caps.options:
            return frozenset()
        listed = set(_QUOTED.findall(caps.help.get("--pytorch", ""))) - {"none"}
        if listed:
            return frozenset(listed)
    if v.family != "newer":
        return frozenset()
    shapes = {"functions-trace-shapes"} if v.at_least(*PYTORCH_SHAPES_FROM) else set()
    return frozenset(PYTORCH_VALUES) | shapes


def capture_end_modes(v: NsysVersion, caps: Capabilities | None = None) -> bool:
    """Whether `--capture-range-end` takes a `:mode` (defer, sync, async) here."""
    text = (caps.help.get("--capture-range-end") if caps is not None else None) or ""
    if text:
        return ":mode" in text or "defer" in text
    return v.at_least(*CAPTURE_END_MODES_FROM)


# ---------------------------------------------------------------- nsys stats

# New name (2023.x and later) -> the 2022.4 name, for the reports both have.
OLD_REPORT_NAMES: dict[str, str] = {
    "cuda_api_gpu_sum": "apigpusum",
    "cuda_api_sum": "cudaapisum",
    "cuda_api_trace": "cudaapitrace",
    "cuda_gpu_kern_sum": "gpukernsum",
    "cuda_gpu_mem_size_sum": "gpumemsizesum",
    "cuda_gpu_mem_time_sum": "gpumemtimesum",
    "cuda_gpu_sum": "gpusum",
    "cuda_gpu_trace": "gputrace",
    "cuda_kern_exec_sum": "kernexecsum",
    "cuda_kern_exec_trace": "kernexectrace",
    "dx11_pix_sum": "dx11pixsum",
    "dx12_gpu_marker_sum": "dx12gpumarkersum",
    "dx12_pix_sum": "dx12pixsum",
    "nvtx_gpu_proj_trace": "nvtxgpuproj",
    "nvtx_kern_sum": "nvtxkernsum",
    "nvtx_pushpop_sum": "nvtxppsum",
    "nvtx_pushpop_trace": "nvtxpptrace",
    "nvtx_startend_sum": "nvtxsesum",
    "nvtx_sum": "nvtxsum",
    "openacc_sum": "openaccsum",
    "openmp_sum": "openmpevtsum",
    "opengl_khr_gpu_range_sum": "khrdebuggpusum",
    "opengl_khr_range_sum": "khrdebugsum",
    "osrt_sum": "osrtsum",
    "um_cpu_page_faults_sum": "umcpupagefaults",
    "um_sum": "unifiedmemory",
    "um_total_sum": "unifiedmemorytotals",
    "vulkan_api_sum": "vulkanapisum",
    "vulkan_api_trace": "vulkanapitrace",
    "vulkan_gpu_marker_sum": "vulkangpumarkersum",
    "vulkan_marker_sum": "vulkanmarkerssum",
    "wddm_queue_sum": "wddmqueuesdetails",
}
# Old name -> new name; gpukerngbsum is an old-style name only 2023.4 ships.
NEW_REPORT_NAMES = {old: new for new, old in OLD_REPORT_NAMES.items()} | {
    "gpukerngbsum": "cuda_gpu_kern_gb_sum"
}
# What `nsys stats --help-reports` lists (measured): 2022.4's 32, 2023.4's 37, 2024.2's 38.
REPORTS_2022_4 = frozenset(OLD_REPORT_NAMES.values())
REPORTS_2023_4 = frozenset(
    {*OLD_REPORT_NAMES}
    | {
        "cuda_gpu_kern_gb_sum",
        "mpi_event_trace",
        "network_congestion",
        "nvtx_gpu_proj_sum",
        "nvvideo_api_sum",
    }
)
REPORTS_2024_2 = REPORTS_2023_4 | {"mpi_event_sum"}
REPORTS: dict[Family, frozenset[str]] = {
    "2022.4": REPORTS_2022_4,
    "2023.4": REPORTS_2023_4,
    "2024.2": REPORTS_2024_2,
    "newer": REPORTS_2024_2,
}
# 2023.4 still runs the old names (their scripts ship beside the new ones; measured).
_ALSO_RUNS_2023_4 = REPORTS_2022_4 | {"gpukerngbsum"}


def known_reports(v: NsysVersion, caps: Capabilities | None = None) -> frozenset[str]:
    """The report names this version lists: the binary's own list where known (newer: 2024.2's;
    later ones add more)."""
    if caps is not None and caps.reports:
        return frozenset(caps.reports)
    return REPORTS[v.family or "newer"]


def report_name(v: NsysVersion, name: str, caps: Capabilities | None = None) -> str | None:
    """The spelling of report `name` (old or new, with any `:option` suffix) that this version
    runs, or None when it has no such report. New names are preferred where both run."""
    base, sep, opts = name.partition(":")
    listed = known_reports(v, caps)
    if v.family == "2022.4":
        spelled = OLD_REPORT_NAMES.get(base, base)
        return spelled + sep + opts if spelled in listed else None
    spelled = NEW_REPORT_NAMES.get(base, base)
    if spelled in listed:
        return spelled + sep + opts
    if v.family == "2023.4" and base in _ALSO_RUNS_2023_4:
        return name
    # a newer nsys not asked adds reports gh-run has no list of: a well-formed name passes
    return name if v.family == "newer" and not (caps and caps.reports) else None


def csv_name(output: str, report: str) -> str:
    """The file `nsys stats --format=csv --output=OUTPUT` writes for `report` (options dropped)."""
    return f"{output}_{report.partition(':')[0]}.csv"


# ---------------------------------------------------------------- export types

EXPORT_TYPES: dict[Family, frozenset[str]] = {
    "2022.4": frozenset({"sqlite", "hdf", "text", "arrow", "json", "info"}),
    "2023.4": frozenset(
        {"sqlite", "hdf", "text", "arrow", "json", "info", "arrowdir", "parquetdir"}
    ),
    "2024.2": frozenset(
        {"sqlite", "hdf", "text", "arrow", "json", "info", "arrowdir", "parquetdir"}
    ),
    "newer": frozenset(
        {"sqlite", "hdf", "text", "arrow", "json", "info", "arrowdir", "parquetdir"}
    ),
}


# ---------------------------------------------------------------- what a binary says it takes


class Capabilities(BaseModel):
    """What one nsys binary answers about itself (`nsys_probe.probe`): its version, the long
    options of `nsys profile`, its `--trace` APIs, its `nsys export --type` values and its
    `nsys stats` reports. An empty list: the binary's answer had none gh-run could read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    options: list[str] = Field(default_factory=list)
    trace_apis: list[str] = Field(default_factory=list)
    export_types: list[str] = Field(default_factory=list)
    reports: list[str] = Field(default_factory=list)
    # the `profile --help` paragraph of each of WATCHED_OPTIONS the binary lists: what values
    # it takes (per-GPU lists, PyTorch values, capture-range-end modes)
    help: dict[str, str] = Field(default_factory=dict)


_OPTION_RE = re.compile(r"^\s*(?:-[A-Za-z], )?(--[a-z][a-z0-9-]*)(?:=|\s|$)")
_REPORT_LINE = re.compile(r"^\s{2}([a-z][a-z0-9_]*)(?:\[|\s+--)")
_QUOTED = re.compile(r"'([a-z0-9][a-z0-9-]*)'")


def parse_profile_help(text: str) -> tuple[list[str], list[str]]:
    """(long options, --trace APIs) of `nsys profile --help`."""
    options = sorted({m.group(1) for line in text.splitlines() if (m := _OPTION_RE.match(line))})
    apis: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _OPTION_RE.match(line) and "--trace=" in line:
            # the paragraph that follows: "Possible values are 'cuda', 'nvtx', ... or 'none'."
            for follow in lines[i + 1 : i + 12]:
                apis |= set(_QUOTED.findall(follow.split("Select")[0]))
                if "." in follow.replace("'", "") and apis:
                    break
            break
    return options, sorted(apis)


# the options whose values grew in 2025-2026: their help text says what this binary takes
WATCHED_OPTIONS = (
    "--gpu-metrics-set",
    "--gpu-metrics-frequency",
    "--capture-range-end",
    "--pytorch",
    "--cpu-metrics",
)


def parse_option_help(text: str, wanted: tuple[str, ...] = WATCHED_OPTIONS) -> dict[str, str]:
    """The help paragraph (its lines joined by spaces) of each option in `wanted` that
    `nsys profile --help` lists: the lines from the option's own to the next option's."""
    out: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in [*text.splitlines(), "--end-of-help"]:
        m = _OPTION_RE.match(line) or (re.match(r"^(--end-of-help)$", line))
        if m:
            if current in wanted:
                out[current] = " ".join(x.strip() for x in lines if x.strip())
            current, lines = m.group(1), [line]
        elif current is not None:
            lines.append(line)
    return out


def parse_export_types(text: str) -> list[str]:
    """The `--type` values of `nsys export --help` ("Possible values are: sqlite, hdf, ...")."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "--type=" in line:
            words: list[str] = []
            for follow in lines[i + 1 : i + 6]:
                if "Possible values are" in follow or words:
                    after = follow.split("Possible values are")[-1]
                    words += re.findall(r"[a-z][a-z0-9]*", after)
                    if after.rstrip().endswith("."):
                        break
            return sorted(set(words) - {"and", "or"})
    return []


def parse_reports(text: str) -> list[str]:
    """The report names `nsys stats --help-reports` lists."""
    return sorted({m.group(1) for line in text.splitlines() if (m := _REPORT_LINE.match(line))})


def differences(v: NsysVersion, caps: Capabilities) -> list[str]:
    """Where a binary's answers differ from what gh-run renders for its version without them:
    one line each (empty: the tables hold)."""
    out = []
    flag = gpu_metrics_flag(v)
    if caps.options and flag not in caps.options:
        out.append(f"{flag} is not among its options ({gpu_metrics_flag(v, caps)} is)")
    family = v.family or "newer"
    known = TRACE_APIS[family]
    if caps.trace_apis and known is not None and set(caps.trace_apis) != known:
        out.append(
            f"its --trace APIs differ from the {family} table: "
            + ", ".join(sorted(set(caps.trace_apis) ^ known))
        )
    if caps.reports and set(caps.reports) != REPORTS[family]:
        out.append(
            f"its nsys stats reports differ from the {family} table: "
            + ", ".join(sorted(set(caps.reports) ^ REPORTS[family]))
        )
    if caps.export_types and set(caps.export_types) != EXPORT_TYPES[family]:
        out.append(
            f"its export types differ from the {family} table: "
            + ", ".join(sorted(set(caps.export_types) ^ EXPORT_TYPES[family]))
        )
    return out


# ---------------------------------------------------------------- export schema

EXPORT_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023.4+, 2022.x


def export_meta_table(v: NsysVersion) -> str:
    return "EXPORT_META_DATA" if v.year <= 2022 else "META_DATA_EXPORT"


def empty_tables_absent(v: NsysVersion) -> bool:
    """2022.4 and later leave out tables with no rows (2022.2 created all of them)."""
    return v.at_least(2022, 4)
