"""`gh-run doctor`: what this machine has (the real tools `make deps` installs, asked for their
versions and report lists), what a job needs that is missing, and a machine without the tools."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def test_json_names_the_real_tools_and_what_they_know(tmp_path: Path, dev_cluster: None) -> None:
    # dev_cluster: Debian's SLURM clients answer --version only with a configuration to read
    res = run_cli(["doctor", "--json"], tmp_path / "home")
    assert res.rc == 0, res.text
    doc = json.loads(res.out)
    nsys = {n["family"]: n for n in doc["nsys"]}
    assert nsys["2023.4"]["version"].startswith("2023.4.4")
    assert nsys["2022.4"]["version"].startswith("2022.4.2")
    assert nsys["2024.2"]["version"].startswith("2024.2.3")
    # what each answered about itself: the GPU-metrics flag, the reports, the export types
    assert {n["gpu_metrics_flag"] for n in nsys.values()} == {"--gpu-metrics-device"}
    assert "mpi_event_sum" in nsys["2024.2"]["reports"]
    assert "mpi_event_sum" not in nsys["2023.4"]["reports"]
    assert "parquetdir" in nsys["2024.2"]["export_types"]
    assert "parquetdir" not in nsys["2022.4"]["export_types"]
    assert all(n["notes"] == [] for n in nsys.values())  # answers as gh-run's tables say
    assert "cuda_gpu_kern_sum" in nsys["2023.4"]["reports"]
    assert "gpukernsum" in nsys["2022.4"]["reports"]
    assert "cuda_gpu_kern_sum" not in nsys["2022.4"]["reports"]
    assert doc["apptainer"]["version"] == "apptainer version 1.4.5"
    assert doc["singularity"]["version"] == "apptainer version 1.4.5"
    for name in ("sbatch", "squeue", "sacct", "scontrol"):
        (client,) = [c for c in doc["slurm_clients"] if c["name"] == name]
        assert client["path"] and client["version"].startswith("slurm")
    assert set(doc) >= {"controller", "chromium", "cron", "tools_prefix"}


def test_a_machine_without_the_tools_is_told_how_to_get_them(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "GH_RUN_TOOLS": str(tmp_path / "none")}
    res = run_cli(["doctor"], tmp_path / "home", env=env)
    assert res.rc == 0, res.text
    assert "install: bash scripts/install-nsys.sh" in res.out
    row = next(line for line in res.out.splitlines() if line.strip().startswith("apptainer"))
    assert "missing" in row


def test_doctor_spec_names_what_the_job_lacks_with_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "gone.sif"
    res = run_cli(
        [
            "doctor",
            str(REPO / "jobs" / "smoke_profiled.yaml"),
            "--json",
            "--set",
            f"container.image={missing}",
            "--set",
            "profile.nsys_version=2022.4",
        ],
        tmp_path / "home",
    )
    assert res.rc == 1, res.text
    needs = {n["what"]: n for n in json.loads(res.out)}
    assert needs["apptainer"]["ok"]
    assert not needs["image"]["ok"] and str(missing) in needs["image"]["detail"]
    nsys = needs["nsys"]
    assert not nsys["ok"]  # rendered for 2022.4, but the job's nsys here is 2023.4
    assert "rendered for nsys 2022.4 (profile.nsys_version)" in nsys["detail"]
    assert nsys["fix"].startswith("set profile.nsys_version: 2023.4")
