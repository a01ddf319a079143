"""Issue 36: `campaign run campaigns/canary.yaml` from `.venv/bin/gh-run` without the venv on
PATH failed 7 of 7 variants with "No module named 'workloads'": the jobs ran `python3 -m
workloads.sft` with the system's python3. A job that runs gh-run's own workloads runs them with
the interpreter gh-run runs under where the nodes see this machine's files, and `check` says
what to put on PATH where gh-run cannot choose (an image, a cluster reached over SSH)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.render.own_workloads import path_advice, runs_own, with_interpreter
from orchestrator.site.cluster import load_cluster
from orchestrator.spec.job import JobSpec
from tests.conftest import REPO


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python3", "-m", "workloads.sft", "--steps", "2"], "workloads.sft"),
        (["python", "-u", "-m", "workloads.cpu_steps"], "workloads.cpu_steps"),
        (["python3.12", "-m", "workloads"], "workloads"),
        (["python3", "-m", "workloadsx.sft"], None),  # another package
        (["python3", "train.py"], None),
        (["/opt/conda/bin/python", "-m", "workloads.sft"], None),  # the user chose it
        (["bash", "-c", "python3 -m workloads.sft"], None),
        (["python3", "-m"], None),
    ],
)
def test_which_commands_run_gh_runs_own_workloads(argv: list[str], module: str | None) -> None:
    assert runs_own(argv) == module


def _spec(runtime: str = "none") -> JobSpec:
    container = {"runtime": runtime}
    if runtime != "none":
        container["image"] = "/images/x.sif"
    return JobSpec.model_validate(
        {
            "name": "own",
            "cluster": "dev",
            "container": container,
            "workload": {"kind": "command", "command": "python3", "args": ["-m", "workloads.sft"]},
        }
    )


def test_the_interpreter_is_gh_runs_where_the_nodes_see_this_machine() -> None:
    dev = load_cluster("dev")
    argv = ["python3", "-m", "workloads.sft"]
    assert with_interpreter(argv, _spec(), dev) == [sys.executable, "-m", "workloads.sft"]
    assert path_advice(_spec(), dev, "jobs/own.yaml") is None
    # inside an image its own Python runs it: gh-run cannot know where that is
    assert with_interpreter(argv, _spec("apptainer"), dev) == argv
    said = path_advice(_spec("apptainer"), dev, "jobs/own.yaml")
    assert said is not None and "inside the image /images/x.sif" in said
    assert "jobs/own.yaml: workload.command" in said and "first on PATH" in said
    # over SSH, the login node's files: the same advice, for the cluster's nodes
    ssh = load_cluster("dev-ssh")
    assert with_interpreter(argv, _spec(), ssh) == argv
    said = path_advice(_spec(), ssh, "jobs/own.yaml")
    assert said is not None and "on the nodes of cluster dev-ssh (reached over SSH)" in said


def test_a_job_of_gh_runs_workloads_runs_without_gh_run_on_path(
    tmp_path: Path, gh_home: Path
) -> None:
    """The reproduction: PATH holds the system's python3 only (no venv), the job runs
    `python3 -m workloads.cpu_steps` with the local executor, and completes."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no system python3 in /usr/bin or /bin")
    probe = subprocess.run(
        [system, "-c", "import workloads"], cwd=tmp_path, capture_output=True, check=False
    )
    assert probe.returncode != 0, "the system python3 imports workloads: no reproduction here"
    job = tmp_path / "own.yaml"
    job.write_text(
        "name: own\ncluster: dev\nresources: {cpus_per_task: 1, mem: 256M, time: '00:02:00'}\n"
        "container: {runtime: none}\n"
        "workload:\n  kind: command\n  command: python3\n"
        "  args: [-m, workloads.cpu_steps, --steps, '2', --step-ms, '5', --trace]\n"
        "artifacts: {include: ['*.pt.trace.json']}\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env.update(PATH="/usr/bin:/bin", GH_RUN_HOME=str(gh_home), NO_COLOR="1")
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "submit", str(job), "-x", "local", "--wait"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "COMPLETED" in res.stdout
    [run] = (gh_home / "artifacts").iterdir()
    assert (run / "artifacts" / "cpu_steps_rank0.pt.trace.json").is_file()
    script = (gh_home / "runs" / run.name / "job.sbatch").read_text()
    assert sys.executable in script and str(REPO) not in script.replace(sys.executable, "")
