"""The 2025-2026 spellings `gh-run render` gives nsys (issue 37 item 4): per-GPU metric sets and
frequencies, `--cpu-metrics`, `--pytorch`, capture-range-end modes; each refused for a version
that lacks it, by the binary's own `profile --help` where gh-run has it (the real 2022.4, 2023.4
and 2024.2 CLIs installed here), else by NVIDIA's documentation (2026.4's User Guide and release
notes: no 2025-2026 binary runs here).

The 2026 help text below is a stand-in: paragraphs written after the 2026.4 User Guide's option
table, in the layout the real CLIs print (`nsys profile --help`); it tests the parser, not nsys.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.nsys import versions as nv
from orchestrator.nsys.command import from_nsys_command
from orchestrator.nsys.profile import (
    GpuMetricsSpec,
    NsysSetup,
    ProfileSpec,
    profiler_prefix,
    version_problems,
)
from tests.conftest import real_nsys

STANDIN_2026_HELP = """usage: nsys profile [<args>] [application] [<application args>]
\t--capture-range-end=

\t   Possible values are 'none', 'stop', 'stop-shutdown', 'repeat[:N][:mode]' or
\t   'repeat-shutdown:N[:mode]'. Mode is one of 'defer', 'sync' or 'async'.

\t--cpu-metrics=

\t   Choose the CPU core events and metrics desired. Use name or alias.

\t--gpu-metrics-devices=

\t   Collect GPU Metrics from specified devices.

\t--gpu-metrics-set=

\t   Specify metric set for GPU Metrics. Accepts a single value (assigned to all selected
\t   GPUs) or a comma-separated list with one value per GPU in the same order as
\t   --gpu-metrics-devices.

\t--pytorch=

\t   Possible values are 'autograd-nvtx', 'autograd-shapes-nvtx', 'functions-trace',
\t   'functions-trace-shapes' or 'none'.

\t--trace=

\t   Possible values are 'cuda', 'nvtx', 'osrt' or 'none'.
"""


def _setup(version: str, caps: nv.Capabilities | None = None) -> NsysSetup:
    return NsysSetup(nv.NsysVersion.parse(version), "test", caps=caps)


def _caps(text: str, version: str) -> nv.Capabilities:
    options, apis = nv.parse_profile_help(text)
    return nv.Capabilities(
        version=version, options=options, trace_apis=apis, help=nv.parse_option_help(text)
    )


SPEC = ProfileSpec(
    tool="nsys",
    pytorch=["autograd-shapes-nvtx", "functions-trace-shapes"],
    cpu_metrics=["cycles", "llc-misses"],
    capture_range="cudaProfilerApi",
    capture_range_end="repeat:2:sync",
    gpu_metrics=GpuMetricsSpec(devices="0,1", set=["gh100", "gh100-gfxt"], frequency=[50000, 4000]),
)


def test_2026_renders_every_new_spelling() -> None:
    argv = profiler_prefix(SPEC, "/a/x", _setup("2026.4"))
    assert version_problems(SPEC, _setup("2026.4")) == []
    for flag in (
        "--capture-range-end=repeat:2:sync",
        "--pytorch=autograd-shapes-nvtx,functions-trace-shapes",
        "--cpu-metrics=cycles,llc-misses",
        "--gpu-metrics-devices=0,1",
        "--gpu-metrics-set=gh100,gh100-gfxt",
        "--gpu-metrics-frequency=50000,4000",
    ):
        assert flag in argv


def test_the_binarys_help_decides_over_the_tables() -> None:
    caps = _caps(STANDIN_2026_HELP, "2026.1.1")
    assert nv.per_gpu_metric_lists(nv.NsysVersion.parse("2026.1"), caps)
    assert nv.capture_end_modes(nv.NsysVersion.parse("2026.1"), caps)
    assert nv.has_cpu_metrics(nv.NsysVersion.parse("2026.1"), caps)
    assert "functions-trace-shapes" in nv.pytorch_values(nv.NsysVersion.parse("2026.1"), caps)
    # without the binary's answers a 2026.1 follows the documentation (2026.3, 2026.4)
    problems = version_problems(SPEC, _setup("2026.1"))
    assert [p.split(":")[0] for p in problems] == [
        "profile.pytorch", "profile.cpu_metrics", "profile.gpu_metrics",
        "profile.capture_range_end",
    ]  # fmt: skip
    assert version_problems(SPEC, _setup("2026.1", caps)) == []


@pytest.mark.parametrize("family", ["2022.4", "2023.4", "2024.2"])
def test_the_real_clis_lack_the_new_options(family: str) -> None:
    """Measured: the installed nsys 2022.4, 2023.4 and 2024.2 answer that they take none of
    these, and gh-run refuses each for them."""
    import subprocess

    text = subprocess.run(
        [str(real_nsys(family)), "profile", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    caps = _caps(text, family + ".0")
    v = nv.NsysVersion.parse(family)
    assert not nv.per_gpu_metric_lists(v, caps) and not nv.per_gpu_metric_lists(v)
    assert not nv.capture_end_modes(v, caps) and not nv.capture_end_modes(v)
    assert not nv.has_cpu_metrics(v, caps) and not nv.has_cpu_metrics(v)
    assert nv.pytorch_values(v, caps) == nv.pytorch_values(v) == frozenset()
    assert "--capture-range-end" in caps.help and "--gpu-metrics-set" in caps.help
    problems = version_problems(SPEC, NsysSetup(v, "test", caps=caps))
    assert {p.split(":")[0] for p in problems} >= {
        "profile.pytorch", "profile.cpu_metrics", "profile.gpu_metrics",
        "profile.capture_range_end",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"pytorch": ["autograd-nvtx", "autograd-shapes-nvtx"]}, "takes one of them"),
        ({"pytorch": ["functions-trace", "functions-trace-shapes"]}, "takes one of them"),
        ({"pytorch": ["emit-nvtx"]}, "pytorch"),
        ({"pytorch": []}, "is empty"),
        ({"cpu_metrics": ["help:all"]}, "not a CPU event"),
        ({"cpu_metrics": ["a b"]}, "not a CPU event"),
        (
            {"capture_range": "cudaProfilerApi", "capture_range_end": "repeat:2:later"},
            "capture-range-end",
        ),
        ({"gpu_metrics": {"devices": "all", "set": ["a", "b"]}}, "list the 2 GPU ids"),
        ({"gpu_metrics": {"devices": "0,1,2", "frequency": [10, 20]}}, "list the 2 GPU ids"),
        (
            {"gpu_metrics": {"devices": "0,1", "set": ["a", "b"], "frequency": [10, 20, 30]}},
            "list the 3 GPU ids",
        ),
        ({"gpu_metrics": {"devices": "0", "frequency": 5}}, "sampling frequency"),
    ],
)
def test_refusals(fields: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ProfileSpec.model_validate({"tool": "nsys", **fields})


def test_a_pasted_2026_command_reads_into_the_spec() -> None:
    spec, app = from_nsys_command(
        "nsys profile --pytorch=autograd-nvtx,functions-trace --cpu-metrics cycles"
        " --capture-range=cudaProfilerApi --capture-range-end=repeat:3:defer python train.py"
    )
    assert spec.pytorch == ["autograd-nvtx", "functions-trace"]
    assert spec.cpu_metrics == ["cycles"] and spec.capture_range_end == "repeat:3:defer"
    assert app == ["python", "train.py"]
