"""profile.gpu_metrics (issue 29 item 3): the flags as each nsys version spells them, one
sampler per node in multi-rank jobs (the rendered task.sh run by bash, nsys_path `echo` so
each rank prints the command it would run), bad values refused in one sentence, and the post
step that fails a job whose sampler's export holds no samples (run on real exports)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.core.errors import UserError
from orchestrator.nsys.profile import (
    NsysSite,
    ProfileSpec,
    check_for_version,
    nsys_setup,
    profiler_prefix,
)
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.job import JobSpec
from tests.fixtures.recordings import export
from tests.unit.test_render import extract_files

REPO = Path(__file__).resolve().parents[2]
METRICS = REPO / "tests" / "data" / "gpu_metrics"


def prof(**kw: Any) -> ProfileSpec:
    return ProfileSpec.model_validate({"tool": "nsys", **kw})


@pytest.mark.parametrize(
    ("version", "flag"),
    [("2022.4", "--gpu-metrics-device"), ("2023.4", "--gpu-metrics-device"),
     ("2024.2", "--gpu-metrics-device"), ("2024.6", "--gpu-metrics-devices")],
)  # fmt: skip
def test_flags_are_spelled_for_the_sites_version(version: str, flag: str) -> None:
    p = prof(gpu_metrics={"devices": "all", "set": "gh100", "frequency": 20000})
    setup = nsys_setup(p, NsysSite(version=version))
    argv = profiler_prefix(p, "out", setup)
    assert argv[-3:] == [f"{flag}=all", "--gpu-metrics-set=gh100", "--gpu-metrics-frequency=20000"]
    assert profiler_prefix(p, "out", setup, sampler=False)[-1] != "--gpu-metrics-frequency=20000"


@pytest.mark.parametrize("version", ["2022.4", "2023.4", "2024.2"])
def test_the_installed_nsys_takes_the_rendered_flags(version: str) -> None:
    """Each installed nsys lists the flags rendered for its version (its own --help)."""
    binary = shutil.which(f"nsys-{version}", path="/opt/gh-run/bin")
    if binary is None:
        pytest.fail(f"nsys {version} is not installed under /opt/gh-run: `make deps`")
    out = subprocess.run([binary, "profile", "--help"], capture_output=True, text=True).stdout
    p = prof(gpu_metrics={"set": "0", "frequency": 10})
    for arg in profiler_prefix(p, "o", nsys_setup(p, NsysSite(version=version)))[-3:]:
        assert f"{arg.split('=')[0]}=" in out, arg


@pytest.mark.parametrize(
    ("gm", "says"),
    [
        ({"devices": "none"}, "drop profile.gpu_metrics"),
        ({"devices": "0;1"}, "GPU indices"),
        ({"frequency": 5}, "use 10 to 200000"),
        ({"frequency": 300000}, "use 10 to 200000"),
        ({"set": "gh 100"}, "--gpu-metrics-set=help"),
    ],
)
def test_bad_values_are_refused(gm: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        prof(gpu_metrics=gm)


def test_gpu_metrics_needs_nsys_and_excludes_the_old_field() -> None:
    with pytest.raises(ValidationError, match="set tool: nsys"):
        ProfileSpec.model_validate({"tool": "torch", "gpu_metrics": {}})
    with pytest.raises(ValidationError, match="drop gpu_metrics_devices"):
        prof(gpu_metrics={}, gpu_metrics_devices="all")


def test_a_list_of_gpus_is_refused_before_2024_5() -> None:
    p = prof(gpu_metrics={"devices": "0,1"})
    with pytest.raises(UserError, match=r"profile.gpu_metrics.devices: nsys 2024.2 takes all"):
        check_for_version(p, nsys_setup(p, NsysSite(version="2024.2")), "jobs/x.yaml")
    check_for_version(p, nsys_setup(p, NsysSite(version="2024.6")), "jobs/x.yaml")


def _four_gpu_cluster(tmp_path: Path) -> Any:
    text = (REPO / "clusters" / "dev.yaml").read_text()
    text = text.replace("gpus_per_node: 1", "gpus_per_node: 4").replace(
        "cpus_per_node: 2", "cpus_per_node: 8"
    )
    (tmp_path / "four.yaml").write_text(text)
    return load_cluster(str(tmp_path / "four.yaml"))


def _render(tmp_path: Path, profile: dict[str, Any], nodes: int = 2) -> str:
    cluster = _four_gpu_cluster(tmp_path)
    spec = JobSpec.model_validate(
        {
            "name": "t",
            "resources": {"nodes": nodes, "gpus_per_node": 4},
            "workload": {"command": "true"},
            # `echo` as the nsys command: each rank prints what it would run
            "profile": {"tool": "nsys", "nsys_path": "echo", "nsys_version": "2024.2", **profile},
        }
    )
    pn, part = validate_job(spec, cluster)
    return render_job(spec, cluster, pn, part, "t-1", str(tmp_path / "run")).script


def _rank_runs(task: Path, rank: int, local: int) -> str:
    env = {"PATH": "/usr/bin:/bin", "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local)}
    env["GH_RUN_DIR"] = str(task.parent)
    out = subprocess.run(["bash", str(task)], env=env, capture_output=True, text=True, check=True)
    return out.stdout


def test_one_sampler_per_node(tmp_path: Path) -> None:
    script = _render(tmp_path, {"gpu_metrics": {}})
    task = tmp_path / "task.sh"
    task.write_text(extract_files(script)["task.sh"])
    for rank in range(8):
        local = rank % 4
        said = _rank_runs(task, rank, local)
        assert said.startswith("profile ")
        assert ("--gpu-metrics-device=all" in said) == (local == 0), (rank, said)
    # the post step checks the samplers' exports only: rank % tasks per node = the sampler's
    post = extract_files(script)["nsys_post.sh"]
    assert "ghr_tasks_per_node=4\n" in post and "ghr_sampler=0\n" in post
    assert '[ $((rank % ghr_tasks_per_node)) -eq "$ghr_sampler" ]' in post


def test_the_sampler_follows_sampler_local_rank_and_profiled_ranks(tmp_path: Path) -> None:
    script = _render(tmp_path, {"gpu_metrics": {"sampler_local_rank": 1}, "ranks": [0, 1, 5]})
    task = tmp_path / "task.sh"
    task.write_text(extract_files(script)["task.sh"])
    runs = {r: _rank_runs(task, r, r % 4) for r in range(8)}
    assert [r for r, s in runs.items() if "--gpu-metrics-device" in s] == [1, 5]
    assert [r for r, s in runs.items() if s.startswith("profile ")] == [0, 1, 5]


def test_one_rank_samples_itself(tmp_path: Path) -> None:
    script = _render(tmp_path, {"gpu_metrics": {}}, nodes=1)
    assert "--gpu-metrics-device=all" in script


def _post(tmp_path: Path, sqlite: Path) -> subprocess.CompletedProcess[str]:
    """The rendered post step's sample check (its ghr_error and ghr_samples), run on
    `sqlite`."""
    post = extract_files(_render(tmp_path, {"gpu_metrics": {}}, nodes=1))["nsys_post.sh"]
    error = post[post.index("ghr_error() {") : post.index("# ghr_run ")]
    samples = post[post.index("ghr_samples() {") :]
    samples = samples[: samples.index("\n}\n") + 3]
    sh = tmp_path / "check.sh"
    sh.write_text(
        f'set -uo pipefail\nghr_failed=0\n{error}{samples}ghr_samples "{sqlite}"\n'
        'exit "$ghr_failed"\n'
    )
    return subprocess.run(["bash", str(sh)], capture_output=True, text=True)


def test_a_sampler_report_without_samples_fails_the_post_step(tmp_path: Path) -> None:
    good = export(METRICS / "bf16" / "metrics_bf16.sqlite.xz")
    assert _post(tmp_path, good).returncode == 0
    none = export(METRICS / "ddp" / "metrics_ddp.rank1.sqlite.xz")  # its nsys did not sample
    got = _post(tmp_path, none)
    assert got.returncode == 1
    assert "holds no samples" in got.stderr and "ERR_NVGPUCTRPERM" in got.stderr
    assert "dcgmi profile --pause" in got.stderr
    empty = tmp_path / "empty.sqlite"
    shutil.copyfile(good, empty)
    with contextlib.closing(sqlite3.connect(empty)) as conn, conn:
        conn.execute("DELETE FROM GPU_METRICS")
    assert _post(tmp_path, empty).returncode == 1


def _spec(**profile: Any) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "t", "workload": {"command": "true"}, "profile": {"tool": "nsys", **profile}}
    )


def test_counter_warnings_say_what_closes_them(tmp_path: Path) -> None:
    from orchestrator.checks import gpu_counters

    params = tmp_path / "params"
    proc = tmp_path / "proc"
    proc.mkdir()
    asks = _spec(gpu_metrics={})
    assert gpu_counters.warnings(_spec(), [], params, proc) == []  # asks for none
    # no driver here: the nodes decide
    (said,) = gpu_counters.warnings(asks, [], params, proc)
    assert "NVreg_RestrictProfilingOnlyToAdminUsers=0" in said and "ERR_NVGPUCTRPERM" in said
    params.write_text("EnableGpuFirmware: 18\nRmProfilingAdminOnly: 0\n")
    assert gpu_counters.warnings(asks, [], params, proc) == []
    params.write_text("RmProfilingAdminOnly: 1\n")
    if os.geteuid() != 0:
        (said,) = gpu_counters.warnings(asks, [], params, proc)
        assert "RmProfilingAdminOnly: 1" in said
    # DCGM's host engine running, unless the site's setup pauses its profiling
    params.write_text("RmProfilingAdminOnly: 0\n")
    (proc / "4242").mkdir()
    (proc / "4242" / "comm").write_text("nv-hostengine\n")
    (said,) = gpu_counters.warnings(asks, [], params, proc)
    assert "dcgmi profile --pause" in said
    assert gpu_counters.warnings(asks, ["dcgmi profile --pause"], params, proc) == []
    assert gpu_counters.warnings(_spec(gpu_metrics_devices="all"), [], params, proc)
