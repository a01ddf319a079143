"""ProfileSpec → nsys long-flag argv, per-rank outputs, rank filtering, post-processing that
never loses the report, and the torch-profiler contract."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.nsys.command import from_nsys_command
from orchestrator.nsys.profile import (
    NsysSetup,
    ProfileSpec,
    nsys_output,
    post_commands,
    profiler_prefix,
    report_files,
)
from orchestrator.nsys.versions import NsysVersion
from orchestrator.render.scripts import RenderedJob, render_job
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.job import JobSpec
from tests.unit.test_render import extract_files

SEED = (
    "nsys profile -y 360 -d 720 --trace=cuda,cudnn,cublas,osrt,nvtx --event-sample=system-wide "
    "-w true -c CudaProfilerApi -o sft_llama2_7B python train.py --lr 1e-4"
)
SEED_LONG = [
    "nsys",
    "profile",
    "--output=/runs/r/artifacts/sft_llama2_7B",
    "--force-overwrite=true",
    "--trace=cuda,cudnn,cublas,osrt,nvtx",
    "--delay=360",
    "--duration=720",
    "--capture-range=cudaProfilerApi",
    "--event-sample=system-wide",
    "--show-output=true",
]


def test_the_seed_command_renders_to_its_long_flag_equivalent() -> None:
    spec, app = from_nsys_command(SEED)
    assert app == ["python", "train.py", "--lr", "1e-4"]
    assert spec == ProfileSpec(
        tool="nsys",
        delay=360,
        duration=720,
        trace=["cuda", "cudnn", "cublas", "osrt", "nvtx"],
        event_sample="system-wide",
        show_output=True,
        capture_range="cudaProfilerApi",
        output="sft_llama2_7B",
    )
    out = nsys_output("/runs/r/artifacts", spec.report_base("job"), multi_rank=False)
    argv = profiler_prefix(spec, out)
    assert argv == SEED_LONG
    assert not any(a.startswith("-") and not a.startswith("--") for a in argv)


def test_jobs_sft_profiles_exactly_as_the_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.spec.job import load_spec

    monkeypatch.setenv("SCRATCH", "/scratch/test")
    repo = Path(__file__).resolve().parents[2]
    assert load_spec(repo / "jobs" / "sft.yaml").profile == from_nsys_command(SEED)[0]


def test_every_flag_in_long_form() -> None:
    spec = ProfileSpec(
        tool="nsys",
        trace=["cuda", "nvtx"],
        capture_range="nvtx",
        nvtx_capture="train@*",
        capture_range_end="repeat:3",
        sample="process-tree",
        cpuctxsw="system-wide",
        cuda_memory_usage=True,
        cuda_um_cpu_page_faults=True,
        cuda_um_gpu_page_faults=False,
        gpu_metrics_devices="all",
        force_overwrite=False,
    )
    # rendered for gh-run's default nsys (2023.4), which spells the GPU-metrics flag in the
    # singular: `--gpu-metrics-devices` is an unknown option to it (a real run found that)
    assert profiler_prefix(spec, "/o") == [
        "nsys", "profile", "--output=/o", "--force-overwrite=false", "--trace=cuda,nvtx",
        "--capture-range=nvtx", "--nvtx-capture=train@*", "--capture-range-end=repeat:3",
        "--sample=process-tree", "--cpuctxsw=system-wide", "--gpu-metrics-device=all",
        "--cuda-memory-usage=true", "--cuda-um-cpu-page-faults=true",
        "--cuda-um-gpu-page-faults=false",
    ]  # fmt: skip
    # 2024.2 keeps the singular (measured); 2024.5 spells it plural (NVIDIA's documentation)
    v2024 = NsysSetup(NsysVersion.parse("2024.2"), "test", path="/opt/nsys/bin/nsys")
    assert "--gpu-metrics-device=all" in profiler_prefix(spec, "/o", v2024)
    v2024_5 = NsysSetup(NsysVersion.parse("2024.5"), "test", path="/opt/nsys/bin/nsys")
    later = profiler_prefix(spec, "/o", v2024_5)
    assert later[0] == "/opt/nsys/bin/nsys" and "--gpu-metrics-devices=all" in later


def test_not_nsys_means_no_prefix_and_no_post() -> None:
    for tool in ("none", "torch"):
        spec = ProfileSpec(tool=tool)  # type: ignore[arg-type]
        assert profiler_prefix(spec, "/o") == []
        assert post_commands(spec, ["/o"]) == []


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"trace": ["cuda", "cuda"]}, "twice"),
        ({"trace": ["cuda", "none"]}, "none together"),
        ({"trace": []}, "is empty"),
        ({"trace": ["cudaa"]}, "cudaa"),
        ({"capture_range": "cudaProfiler"}, "capture_range"),
        ({"capture_range": "nvtx"}, "needs nvtx_capture"),
        ({"nvtx_capture": "x"}, "capture_range is not nvtx"),
        ({"capture_range": "cudaProfilerApi", "capture_range_end": "halt"}, "capture-range-end"),
        ({"capture_range_end": "stop"}, "without a capture_range"),
        ({"delay": -1}, "delay"),
        ({"duration": 0}, "duration"),
        ({"event_sample": "process-tree"}, "event_sample"),
        ({"gpu_metrics_devices": "gpu0"}, "gpu-metrics-devices"),
        ({"output": "../x"}, "plain file name"),
        ({"output": "a/b"}, "plain file name"),
        ({"ranks": []}, "at least one rank"),
        ({"ranks": [0, 0]}, "twice"),
        ({"ranks": [-1]}, "negative"),
        ({"reports": ["cuda gpu"]}, "report name"),
        ({"torch_profile_flag": "--x"}, "tool is not torch"),
        ({"tool": "torch", "torch_profile_flag": "x y"}, "not a command-line flag"),
    ],
)
def test_refusals(fields: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ProfileSpec.model_validate({"tool": "nsys", **fields})


def test_gpu_metrics_devices_accepts_lists_and_ints() -> None:
    assert ProfileSpec(gpu_metrics_devices=[0, 1]).gpu_metrics_devices == "0,1"  # type: ignore[arg-type]
    assert ProfileSpec(gpu_metrics_devices=0).gpu_metrics_devices == "0"  # type: ignore[arg-type]


def test_post_commands_export_then_stats_per_report() -> None:
    spec = ProfileSpec(tool="nsys", reports=["cuda_gpu_kern_sum", "um_sum"])
    files = report_files("/r/artifacts", "sft", [0, 2])
    assert files == ["/r/artifacts/sft.0", "/r/artifacts/sft.2"]
    cmds = post_commands(spec, files)
    assert cmds[0] == [
        "nsys", "export", "--type=sqlite", "--output=/r/artifacts/sft.0.sqlite",
        "--force-overwrite=true", "/r/artifacts/sft.0.nsys-rep",
    ]  # fmt: skip
    assert cmds[1] == [
        "nsys", "stats", "--report=cuda_gpu_kern_sum", "--report=um_sum", "--format=csv",
        "--output=/r/artifacts/sft.0", "--force-overwrite=true", "/r/artifacts/sft.0.sqlite",
    ]  # fmt: skip
    assert len(cmds) == 4 and cmds[3][-1] == "/r/artifacts/sft.2.sqlite"
    # without the export, stats read the report itself; never is the report an output
    only_stats = post_commands(ProfileSpec(tool="nsys", export_sqlite=False), ["/r/a/x"])
    assert len(only_stats) == 1 and only_stats[0][-1] == "/r/a/x.nsys-rep"
    for cmd in cmds + only_stats:
        outputs = [a for a in cmd if a.startswith("--output=")]
        assert all(not o.endswith(".nsys-rep") for o in outputs)


def _job(profile: dict[str, object], nodes: int = 1, tasks: int = 1, **wl: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "p",
            "resources": {"nodes": nodes, "ntasks_per_node": tasks},
            "profile": profile,
            "workload": {"command": "app", "args": ["--x", "1"], **wl},
        }
    )


def _render(job: JobSpec, run_dir: str = "/runs/r", launcher: str = "srun") -> RenderedJob:
    cluster = load_cluster("dev")
    pn, part = validate_job(job, cluster)
    return render_job(job, cluster, pn, part, "r", run_dir, launcher)  # type: ignore[arg-type]


def test_multi_rank_outputs_per_rank_and_post_per_rank() -> None:
    r = _render(_job({"tool": "nsys", "output": "prof"}, nodes=2))
    ctx = r.context
    assert "--output=/runs/r/artifacts/prof.%q{SLURM_PROCID}" in ctx.argv
    assert ctx.profile_ranks is None
    # one loop over ranks 0-1 of reports /runs/r/artifacts/prof.RANK, one task per node
    post = ctx.node_post
    assert post is not None
    assert (post.base, post.ranks, post.per_rank, post.nodes) == (
        "/runs/r/artifacts/prof",
        "0-1",
        True,
        2,
    )
    assert post.export[-1] == "--type=sqlite"
    # then each export analysed on its node (clusters/dev.yaml: analysis.in_job by default)
    assert post.analysis
    assert ctx.post == [["bash", "/runs/r/nsys_post.sh"]]


def test_ranks_restrict_profiling_at_run_time(tmp_path: Path) -> None:
    r = _render(_job({"tool": "nsys", "ranks": [1]}, nodes=2))
    assert r.context.profile_ranks == "1"
    assert r.context.plain_argv == ["app", "--x", "1"]
    assert r.context.node_post is not None and r.context.node_post.ranks == "1"
    # run task.sh as rank 0 and rank 1 with a stand-in `nsys` on PATH that prints its argv
    task = tmp_path / "task.sh"
    task.write_text(extract_files(r.script)["task.sh"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("nsys", "app"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/bash\necho "{name}: $*"\n')
        tool.chmod(0o755)
    seen = {}
    for rank in ("0", "1"):
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "SLURM_PROCID": rank,
            "GH_RUN_DIR": str(tmp_path),
        }
        res = subprocess.run(["bash", str(task)], env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        seen[rank] = res.stdout.strip()
    assert seen["0"] == "app: --x 1"
    assert seen["1"].startswith("nsys: profile --output=/runs/r/artifacts/p.%q{SLURM_PROCID}")
    assert seen["1"].endswith(" app --x 1")


def test_ranks_beyond_the_world_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"profile.ranks lists rank 2, but the job has 2"):
        _job({"tool": "nsys", "ranks": [0, 2]}, nodes=2)


def _stand_in_nsys(bin_dir: Path) -> None:
    """A STAND-IN `nsys` for the tests below: profile writes a report and runs the app;
    export and stats fail with exit 3."""
    bin_dir.mkdir()
    nsys = bin_dir / "nsys"
    nsys.write_text(
        "#!/bin/bash\n# STAND-IN nsys for this test\n"
        'if [ "$1" = profile ]; then shift; while [[ "$1" == --* ]]; do\n'
        '  case "$1" in --output=*) out="${1#--output=}";; esac; shift; done\n'
        '  echo report > "$out.nsys-rep"; exec "$@"; fi\n'
        'echo "stand-in nsys $1 fails" >&2; exit 3\n'
    )
    nsys.chmod(0o755)


def _run_script(r: RenderedJob, run_dir: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    (run_dir / "job.sbatch").write_text(r.script)
    # the dev partition puts $GH_RUN_TOOLS/bin first on the PATH: make that the stand-in's
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GH_RUN_TOOLS": str(bin_dir.parent),
    }
    return subprocess.run(
        ["bash", str(run_dir / "job.sbatch")], env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(("workload_exit", "job_exit"), [(4, 4), (0, 1)])
def test_failed_post_processing_keeps_the_report_and_fails_loudly(
    tmp_path: Path, workload_exit: int, job_exit: int
) -> None:
    """The whole script (launcher direct) with a stand-in `nsys` whose export and stats fail:
    the report stays, every failure is said, and the job fails: with the workload's status when
    it failed itself, else with post-processing's."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _stand_in_nsys(tmp_path / "bin")
    job = _job({"tool": "nsys", "delay": 1}, command="bash", args=["-c", f"exit {workload_exit}"])
    res = _run_script(_render(job, str(run_dir), "direct"), run_dir, tmp_path / "bin")
    assert res.returncode == job_exit, res.stderr
    assert (run_dir / "artifacts" / "p.nsys-rep").read_text() == "report\n"
    assert "post-processing: nsys export failed (exit 3): see " in res.stderr
    assert "post-processing: nsys stats failed (exit 3): see " in res.stderr
    assert "nsys export wrote no " in res.stderr
    assert "nsys stats wrote no " in res.stderr and "_osrt_sum.csv" in res.stderr
    assert res.stderr.count("the reports are kept") >= 3
    assert (run_dir / "exit_code").read_text().strip() == str(job_exit)
    assert ("the tasks succeeded, but post-processing failed" in res.stderr) == (job_exit == 1)


def test_torch_tool_sets_the_contract_and_optional_flag() -> None:
    r = _render(_job({"tool": "torch"}))
    assert r.context.env["GH_RUN_TORCH_PROFILE"] == "/runs/r/artifacts"
    assert r.context.argv == ["app", "--x", "1"]
    r = _render(_job({"tool": "torch", "torch_profile_flag": "--torch-profile"}))
    assert r.context.argv == ["app", "--x", "1", "--torch-profile", "/runs/r/artifacts"]
    assert r.context.post == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("sample", "cpu"), ("sample", "yes"), ("cpuctxsw", "always"), ("cpuctxsw", "true")],
)
def test_bad_sample_and_cpuctxsw_refused_naming_file_field_and_choices(
    tmp_path: Path, field: str, value: str
) -> None:
    from orchestrator.core.errors import UserError
    from orchestrator.spec.job import load_spec

    job = tmp_path / "p.yaml"
    job.write_text(
        f"name: p\nprofile:\n  tool: nsys\n  {field}: {value}\nworkload: {{command: x}}\n"
    )
    with pytest.raises(UserError) as exc:
        load_spec(job)
    message = str(exc.value)
    assert message.startswith(f"{job}:4: profile.{field}: "), message
    assert "use one of: none, process-tree, system-wide" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("command", "why"),
    [
        # nsys switches take true or false: `yes` must not silently become false.
        ("nsys profile -w yes python x.py", "-w yes: profile.show_output takes true or false"),
        ("nsys profile --show-output=1 x", "--show-output 1: profile.show_output takes true"),
        ("nsys profile --cuda-memory-usage TRUE x", "--cuda-memory-usage TRUE: profile.cuda_"),
        # whole seconds: 1.9 must not silently become 1.
        ("nsys profile -y 1.9 python x.py", "-y 1.9: profile.delay takes whole seconds"),
        ("nsys profile --duration=0.5 x", "--duration 0.5: profile.duration takes whole seconds"),
        ("nsys profile -y 10s x", "-y 10s: profile.delay takes whole seconds"),
    ],
)
def test_from_nsys_command_refuses_what_it_would_otherwise_coerce(command: str, why: str) -> None:
    with pytest.raises(ValueError, match="^nsys option " + re.escape(why)):
        from_nsys_command(command)


def test_from_nsys_command_takes_nsys_spellings_exactly() -> None:
    spec, app = from_nsys_command("nsys profile -w false -y 0 --duration=30 -f true app --x")
    assert (spec.show_output, spec.delay, spec.duration, spec.force_overwrite) == (
        False, 0, 30, True,
    )  # fmt: skip
    assert app == ["app", "--x"]
