"""nsys version knowledge (orchestrator/nsys_versions.py) and rendering for a version, checked
against the real Nsight Systems CLIs that `make deps` installs (2023.4.4 and 2022.4.2 in the
tools prefix): their report lists, and that the flag spelling gh-run renders for each version is
the one that version takes (the other spelling is refused by the real nsys)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator import doctor
from orchestrator import nsys_versions as nv
from orchestrator.profile import (
    NsysSetup,
    ProfileSpec,
    post_reports,
    profiler_prefix,
    version_problems,
)
from tests.conftest import real_nsys

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
    assert [v.family for v in (V22, V23, V24, V25)] == ["2022.4", "2023.4", "2024+", "2024+"]
    for bad in ("2023.1", "2021.5", "2022.2"):
        with pytest.raises(ValueError, match=r"2022\.4, 2023\.4, or 2024\.1 and later"):
            nv.parse_supported(bad)
    with pytest.raises(ValueError, match=r"YEAR\.MINOR"):
        nv.NsysVersion.parse("latest")


def test_gpu_metrics_flag_and_values_per_version() -> None:
    assert nv.gpu_metrics_flag(V22) == nv.gpu_metrics_flag(V23) == "--gpu-metrics-device"
    assert nv.gpu_metrics_flag(V24) == "--gpu-metrics-devices"
    assert nv.gpu_metrics_problem(V23, "0,1") is not None  # one id, all or none before 2024
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


# ---------------------------------------------------------------- the real CLIs


@pytest.fixture(scope="module")
def real_nsys_of() -> dict[str, Path]:
    return {family: real_nsys(family) for family in ("2022.4", "2023.4")}


@pytest.mark.parametrize("family", ["2022.4", "2023.4"])
def test_report_tables_match_the_real_nsys(real_nsys_of: dict[str, Path], family: str) -> None:
    listed = set(doctor.nsys_reports(real_nsys_of[family]))
    assert listed == set(nv.known_reports(nv.NsysVersion.parse(family)))


@pytest.mark.parametrize("family", ["2022.4", "2023.4"])
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
    res = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "ok.nsys-rep").stat().st_size > 0
    # the spelling of the other versions is an unknown option to this one
    other = [a.replace("--gpu-metrics-device=", "--gpu-metrics-devices=") for a in argv]
    res = subprocess.run([*other, "true"], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "gpu-metrics-devices" in res.stdout + res.stderr
