"""nsys version knowledge (orchestrator/nsys/versions.py) and rendering for a version, checked
against the real Nsight Systems CLIs that `make deps` installs (2023.4.4, 2022.4.2 and 2024.2.3
in the tools prefix): what each answers about itself (the probe), its report lists, and that the
flag spelling gh-run renders for each version is the one that version takes (the other spelling
is refused by the real nsys); and a version newer than those measured."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.checks import doctor
from orchestrator.nsys import probe as nsys_probe
from orchestrator.nsys import versions as nv
from orchestrator.nsys.profile import (
    NsysSetup,
    NsysSite,
    ProfileSpec,
    nsys_setup,
    post_reports,
    profiler_prefix,
    version_problems,
)
from tests.conftest import nsys_profile, nsys_recording, real_nsys

V22, V23, V24, V25 = (nv.NsysVersion.parse(t) for t in ("2022.4", "2023.4", "2024.2", "2025.1"))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2023.4", nv.NsysVersion(2023, 4)),
        ("2023.4.4.54-234433681190v0", nv.NsysVersion(2023, 4, 4, 54)),
        ("NVIDIA Nsight Systems version 2022.4.2.1-df9881f", nv.NsysVersion(2022, 4, 2, 1)),
        ("2024.5.1", nv.NsysVersion(2024, 5, 1)),
    ],
)
def test_versions_parse(text: str, want: nv.NsysVersion) -> None:
    assert nv.NsysVersion.parse(text) == want


def test_families_and_refusals() -> None:
    assert [v.family for v in (V22, V23, V24, V25)] == ["2022.4", "2023.4", "2024.2", "newer"]
    assert nv.NsysVersion(2024, 1).family == "2024.2"
    for bad in ("2023.1", "2021.5", "2022.2"):
        with pytest.raises(ValueError, match=r"2022\.4, 2023\.4, 2024\.1-2024\.2, or 2024\.3"):
            nv.parse_supported(bad)
    with pytest.raises(ValueError, match=r"YEAR\.MINOR"):
        nv.NsysVersion.parse("latest")


def test_gpu_metrics_flag_and_values_per_version() -> None:
    # 2024.2 still spells it singular (measured: issue 24); NVIDIA's 2024.5 documents the plural
    assert nv.gpu_metrics_flag(V22) == nv.gpu_metrics_flag(V23) == "--gpu-metrics-device"
    assert nv.gpu_metrics_flag(V24) == "--gpu-metrics-device"
    assert nv.gpu_metrics_flag(V25) == "--gpu-metrics-devices"
    assert nv.gpu_metrics_problem(V23, "0,1") is not None  # one id, all or none before 2024.5
    assert nv.gpu_metrics_problem(V24, "0,1") is not None
    assert nv.gpu_metrics_problem(V23, "all") is None
    assert nv.gpu_metrics_problem(V24, "cuda-visible") is not None  # from 2024.5
    assert nv.gpu_metrics_problem(nv.NsysVersion(2024, 5), "cuda-visible") is None


def test_report_names_follow_the_version() -> None:
    assert nv.report_name(V22, "cuda_gpu_kern_sum") == "gpukernsum"
    assert nv.report_name(V22, "cuda_gpu_kern_sum:base") == "gpukernsum:base"
    assert nv.report_name(V22, "osrtsum") == "osrtsum"
    assert nv.report_name(V22, "cuda_gpu_kern_gb_sum") is None  # 2023 added it
    assert nv.report_name(V23, "gpukernsum") == "cuda_gpu_kern_sum"  # new spelling preferred
    assert nv.report_name(V23, "gpukerngbsum") == "cuda_gpu_kern_gb_sum"
    assert nv.report_name(V23, "no_such_report") is None
    assert nv.report_name(V24, "mpi_event_sum") == "mpi_event_sum"  # 2024.2 added it
    assert nv.report_name(V23, "mpi_event_sum") is None
    assert nv.report_name(V24, "some_2025_report") is None
    assert nv.report_name(V25, "some_2025_report") == "some_2025_report"
    assert nv.csv_name("/a/x.0", "cuda_gpu_kern_sum:base") == "/a/x.0_cuda_gpu_kern_sum.csv"


def test_a_spec_asks_what_its_version_lacks() -> None:
    spec = ProfileSpec(
        tool="nsys", trace=["osrt", "python-gil"], reports=["cuda_gpu_kern_gb_sum", "osrt_sum"]
    )
    problems = version_problems(spec, NsysSetup(V22, "profile.nsys_version"))
    assert [p.split(":")[0] for p in problems] == ["profile.trace", "profile.reports"]
    assert "python-gil" in problems[0] and "cuda_gpu_kern_gb_sum" in problems[1]
    assert version_problems(spec, NsysSetup(V23, "x")) == []


def test_post_processing_spells_reports_for_the_version() -> None:
    spec = ProfileSpec(tool="nsys", reports=["osrt_sum", "nvtx_sum"])
    (old,) = post_reports(spec, ["/a/x.0"], NsysSetup(V22, "v", path="/opt/nsys-2022.4"))
    assert old.stats[:4] == ["/opt/nsys-2022.4", "stats", "--report=osrtsum", "--report=nvtxsum"]
    assert [c.path for c in old.csvs] == ["/a/x.0_osrtsum.csv", "/a/x.0_nvtxsum.csv"]
    (new,) = post_reports(spec, ["/a/x.0"], NsysSetup(V23, "v"), prefix=["apptainer", "exec"])
    assert new.export[:3] == ["apptainer", "exec", "nsys"]
    assert [c.report for c in new.csvs] == ["osrt_sum", "nvtx_sum"]


def test_help_texts_are_read_for_what_they_list() -> None:
    """The probe's parsers, on text shaped like a newer nsys's (the plural flag, a new API)."""
    profile_help = (
        "usage: nsys profile [<args>] [application] [<application args>]\n\n"
        "\t--gpu-metrics-devices=\n\n\t   Collect GPU Metrics from specified devices.\n\n"
        "\t-t, --trace=\n\n\t   Possible values are 'cuda', 'nvtx', 'gds',\n"
        "\t   'syscall' or 'none'.\n\t   Select the API(s) to trace.\n\n"
        "\t-o, --output=\n"
    )
    options, apis = nv.parse_profile_help(profile_help)
    assert options == ["--gpu-metrics-devices", "--output", "--trace"]
    assert apis == ["cuda", "gds", "none", "nvtx", "syscall"]
    export_help = "\t-t, --type=\n\n           Possible values are: sqlite, hdf,\n" + (
        "           and parquetdir.\n\n           Export format type.\n"
    )
    assert nv.parse_export_types(export_help) == ["hdf", "parquetdir", "sqlite"]
    reports = "  cuda_api_sum -- CUDA API Summary\n  osrt_sum[:x] -- OS Runtime\n"
    assert nv.parse_reports(reports) == ["cuda_api_sum", "osrt_sum"]


def test_a_newer_nsys_renders_what_its_binary_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version newer than those measured: NVIDIA's documented spelling with a note until a
    binary of it was asked here; then its own answers (here: one that kept the singular flag
    and dropped a report)."""
    monkeypatch.setenv("GH_RUN_HOME", str(tmp_path / "home"))
    spec = ProfileSpec(tool="nsys", gpu_metrics_devices="all", reports=["osrt_sum", "nvtx_sum"])
    site = NsysSite(version="2025.6")
    setup = nsys_setup(spec, site)
    assert setup.caps is None and setup.note and "2025.6 is newer" in setup.note
    assert "--gpu-metrics-devices=all" in profiler_prefix(spec, "/a/x", setup)
    cache = tmp_path / "home" / "cache" / "nsys-probe"
    cache.mkdir(parents=True)
    caps = nv.Capabilities(
        version="2025.6.1.190",
        options=["--gpu-metrics-device", "--trace"],
        trace_apis=["cuda", "nvtx", "osrt"],
        reports=["osrt_sum"],
    )
    (cache / "x.json").write_text(caps.model_dump_json())
    setup = nsys_setup(spec, site)
    assert setup.caps == caps and setup.note is None
    assert "--gpu-metrics-device=all" in profiler_prefix(spec, "/a/x", setup)
    problems = version_problems(spec, setup)
    assert len(problems) == 1 and "has no report 'nvtx_sum'" in problems[0]


# ---------------------------------------------------------------- the real CLIs

FAMILIES = ["2022.4", "2023.4", "2024.2"]


@pytest.fixture(scope="module")
def real_nsys_of() -> dict[str, Path]:
    return {family: real_nsys(family) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_probe_of_each_real_nsys_matches_gh_runs_tables(
    real_nsys_of: dict[str, Path], family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each installed nsys answers about itself is what gh-run renders for its version
    (the tables are measured facts), and the answers are kept for the next time."""
    monkeypatch.setenv("GH_RUN_HOME", str(tmp_path / "home"))
    caps = nsys_probe.probe(str(real_nsys_of[family]))
    assert caps is not None and caps.version.startswith(family + ".")
    v = nv.NsysVersion.parse(caps.version)
    assert v.family == family
    assert nv.differences(v, caps) == []
    assert nv.gpu_metrics_flag(v) in caps.options
    assert set(caps.reports) == nv.known_reports(v)
    assert set(caps.export_types) == nv.EXPORT_TYPES[family] and "sqlite" in caps.export_types
    assert {"cuda", "nvtx", "osrt"} <= set(caps.trace_apis)
    (entry,) = (tmp_path / "home" / "cache" / "nsys-probe").glob("*.json")
    assert nv.Capabilities.model_validate_json(entry.read_text()) == caps
    assert nsys_probe.probe(str(real_nsys_of[family])) == caps
    assert nsys_probe.cached_for(nv.NsysVersion.parse(family)) == caps


@pytest.mark.parametrize("family", FAMILIES)
def test_report_tables_match_the_real_nsys(real_nsys_of: dict[str, Path], family: str) -> None:
    listed = set(doctor.nsys_reports(real_nsys_of[family]))
    assert listed == set(nv.known_reports(nv.NsysVersion.parse(family)))


@pytest.mark.parametrize("family", FAMILIES)
def test_rendered_gpu_metrics_flag_is_the_one_the_real_nsys_takes(
    real_nsys_of: dict[str, Path], family: str, tmp_path: Path
) -> None:
    v = nv.NsysVersion.parse(family)
    spec = ProfileSpec(
        tool="nsys", trace=["osrt"], sample="none", cpuctxsw="none", gpu_metrics_devices="none"
    )
    argv = profiler_prefix(
        spec, str(tmp_path / "ok"), NsysSetup(v, "test", str(real_nsys_of[family]))
    )
    other = [a.replace("--gpu-metrics-device=", "--gpu-metrics-devices=") for a in argv]
    res = nsys_profile([*argv, "true"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "ok.nsys-rep").stat().st_size > 0
    # the spelling of the other versions is an unknown option to this one
    with nsys_recording():
        res = subprocess.run([*other, "true"], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "gpu-metrics-devices" in res.stdout + res.stderr
