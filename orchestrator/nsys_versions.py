"""What differs between the Nsight Systems (nsys) versions gh-run supports, in one place.

Rendering (`profile.py`: flag spellings, trace APIs, `nsys stats` report names) and the readers
(export schema) consult this module; nothing else spells a version-dependent name.

gh-run knows three families: 2022.4, 2023.4, and 2024.1 and later. Measured with the real CLIs
where marked (tests/unit/test_nsys_versions.py checks the tables against the installed 2022.4.2
and 2023.4.4):

- GPU metrics flag: `--gpu-metrics-device` in 2022.4 and 2023.4 (measured), then
  `--gpu-metrics-devices` (2024.1 and later). Its values: all, none or one GPU id before 2024;
  lists later; `cuda-visible` from 2024.5.
- `--trace` APIs: 2022.4 has the common ones only (measured); 2023.4 adds python-gil
  (measured); 2024.x adds cusolver, gds, syscall and more.
- `nsys stats` report names: 2022.4 knows only the old ones (`gpukernsum`, `osrtsum`, ...: 32,
  measured); 2023.4 lists the new ones (`cuda_gpu_kern_sum`, `osrt_sum`, ...: 37, measured)
  and still runs the old; 2024.x the new.
- Export metadata: table EXPORT_META_DATA in 2022.4, META_DATA_EXPORT + META_DATA_CAPTURE from
  2023.4 (measured). From 2022.4 on, a table with no rows is left out of the export (measured:
  no NVTX_EVENTS or CUPTI_* when nothing was recorded).

Other measured facts that shape what gh-run does:
- `nsys stats` exits 0 whatever happens: an unknown report name leaves no CSV ("could not be
  found"), a report that finds no data leaves an empty CSV ("SKIPPED"), a report that fails
  ("internal error") leaves an empty CSV too. The job checks the CSVs itself (nsys_post.sh).
- The other spelling of the GPU-metrics flag is an "unrecognised option" (exit 1), so a job
  rendered for the wrong version fails at launch.
- 2022.4 cannot read a report written by 2023.4 ("Version number is invalid", exit 1): exports of
  a `.nsys-rep` go through the newest local nsys (`nsys_export.py`).
- 2022.4 (on this machine's 6.x kernel) sometimes never finishes a CPU-only profile when CPU
  sampling or context-switch tracing is on (`--sample`, `--cpuctxsw`): its agent spins after the
  application exits. Jobs for 2022.4 on such nodes set `sample: none` and `cpuctxsw: none`.
- NVTX ranges from the PyPI `nvtx` package 0.2.12 and later are not recorded by 2022.4 or 2023.4
  (only domain rows); 0.2.10/0.2.11 are, and so is `torch.cuda.nvtx`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Family = Literal["2022.4", "2023.4", "2024+"]
FAMILIES: tuple[Family, ...] = ("2022.4", "2023.4", "2024+")
SUPPORTED_TEXT = "2022.4, 2023.4, or 2024.1 and later"
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
        if self.year >= 2024:
            return "2024+"
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


def gpu_metrics_flag(v: NsysVersion) -> str:
    return "--gpu-metrics-devices" if v.year >= 2024 else "--gpu-metrics-device"


def gpu_metrics_problem(v: NsysVersion, value: str) -> str | None:
    """Why `value` cannot be given to this version's GPU-metrics flag (None: it can)."""
    if v.year < 2024 and value not in ("all", "none") and not value.isdigit():
        return f"nsys {v} takes all, none or one GPU id for {gpu_metrics_flag(v)}, not {value!r}"
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
        "openacc",
        "openmp",
        "nvvideo",
        "vulkan",
        "none",
    }
)
# None: every API gh-run's ProfileSpec offers.
TRACE_APIS: dict[Family, frozenset[str] | None] = {
    "2022.4": _COMMON_TRACE,
    "2023.4": _COMMON_TRACE | {"python-gil"},
    "2024+": None,
}


def unknown_trace_apis(v: NsysVersion, apis: list[str]) -> list[str]:
    known = TRACE_APIS[v.family or "2024+"]
    return [] if known is None else [a for a in apis if a not in known]


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
# What `nsys stats --help-reports` lists (measured): 2022.4's 32, 2023.4's 37.
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
# 2023.4 still runs the old names (their scripts ship beside the new ones; measured).
_ALSO_RUNS_2023_4 = REPORTS_2022_4 | {"gpukerngbsum"}


def known_reports(v: NsysVersion) -> frozenset[str]:
    """The report names this version lists (2024+: 2023.4's; later ones add more)."""
    return REPORTS_2022_4 if v.family == "2022.4" else REPORTS_2023_4


def report_name(v: NsysVersion, name: str) -> str | None:
    """The spelling of report `name` (old or new, with any `:option` suffix) that this version
    runs, or None when it has no such report. New names are preferred where both run."""
    base, sep, opts = name.partition(":")
    if v.family == "2022.4":
        spelled = OLD_REPORT_NAMES.get(base, base)
        return spelled + sep + opts if spelled in REPORTS_2022_4 else None
    spelled = NEW_REPORT_NAMES.get(base, base)
    if spelled in REPORTS_2023_4:
        return spelled + sep + opts
    if v.family == "2023.4" and base in _ALSO_RUNS_2023_4:
        return name
    # 2024+ adds reports gh-run has no list of: a well-formed name is passed through.
    return name if v.family == "2024+" else None


def csv_name(output: str, report: str) -> str:
    """The file `nsys stats --format=csv --output=OUTPUT` writes for `report` (options dropped)."""
    return f"{output}_{report.partition(':')[0]}.csv"


# ---------------------------------------------------------------- export schema

EXPORT_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023.4+, 2022.x


def export_meta_table(v: NsysVersion) -> str:
    return "EXPORT_META_DATA" if v.year <= 2022 else "META_DATA_EXPORT"


def empty_tables_absent(v: NsysVersion) -> bool:
    """2022.4 and later leave out tables with no rows (2022.2 created all of them)."""
    return v.at_least(2022, 4)
