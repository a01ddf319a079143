"""Golden job scripts: every job in jobs/*.yaml (jobs/base/ holds shared bases, not jobs) renders
byte for byte to tests/golden/<job>.sbatch, with a fixed run id and run folder; and jobs/sft.yaml
on the fictional GH200 site (examples/gh200-site/cluster.yaml: four GH200 per node, task
binding, nsys from a module on the host) at 1 and 2 nodes to tests/golden/gh200_site/ (read line
by line in docs/templates.md, "A GH200 script, line by line"). Each script and each file it
embeds (task.sh, nsys_post.sh, um_bootstrap.py) is valid: `bash -n` + shellcheck, or Python.

After an intended change, regenerate and review the diff by eye:
    make golden   (or GH_RUN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_golden.py)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.checks.fit import fit_partition
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster
from orchestrator.spec.job import JobSpec, load_spec
from orchestrator.spec.yamlio import load_model
from tests.unit.test_render import extract_files

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
JOBS = sorted((REPO / "jobs").glob("*.yaml"))
RUN_DIR = "/scratch/gh-run/runs/golden-run"
UPDATE = os.environ.get("GH_RUN_UPDATE_GOLDEN") == "1"
GH200_SITE = REPO / "examples" / "gh200-site" / "cluster.yaml"
# jobs/sft.yaml as a site admin would try it on the fictional GH200 site: one rank per GPU
QUAD = [
    f"cluster={GH200_SITE}",
    "partition=quad",
    "resources.ntasks_per_node=4",
    "resources.gpus_per_node=4",
    "resources.cpus_per_task=72",
]
SITE_JOBS = {
    "gh200_site/sft_quad_1node": ("sft.yaml", [*QUAD, "resources.nodes=1"]),
    "gh200_site/sft_quad_2nodes": ("sft.yaml", [*QUAD, "resources.nodes=2"]),
}


def render_golden(job: Path, over: list[str] | None = None) -> str:
    spec = load_spec(job) if over is None else load_model(job, JobSpec, over)
    cluster = load_cluster(spec.cluster)
    part_name, part = fit_partition(spec, cluster, f"jobs/{job.name}")
    script = render_job(spec, cluster, part_name, part, f"{spec.name}-golden", RUN_DIR).script
    # Machine-independent: the checkout's path (specs resolve `workdir: ..` against it), and
    # the heredoc delimiters that hash it.
    # and the submitting Python (gh-run on the nodes by default: analysis_post.sh)
    script = script.replace(sys.executable, "/PYTHON").replace(str(REPO), "/REPO")
    return re.sub(r"GHRUN_EOF_[0-9A-F]{16}", "GHRUN_EOF_FFFFFFFFFFFFFFFF", script)


def _golden_cases() -> list[tuple[str, Path, list[str] | None]]:
    jobs: list[tuple[str, Path, list[str] | None]] = [(p.stem, p, None) for p in JOBS]
    jobs += [(name, REPO / "jobs" / f, over) for name, (f, over) in SITE_JOBS.items()]
    return jobs


CASES = _golden_cases()


def test_every_job_is_covered() -> None:
    assert {p.stem for p in JOBS} >= {
        "smoke", "sft", "sft_workers4", "sft_offload", "sft_full", "sft_full_um", "sft_fp8",
    }  # fmt: skip
    if not UPDATE:
        stale = {p.stem for p in GOLDEN.glob("*.sbatch")} - {p.stem for p in JOBS}
        assert not stale, f"golden files without a job: {stale}; delete them"


@pytest.mark.parametrize(("name", "job", "over"), CASES, ids=[c[0] for c in CASES])
def test_rendered_script_matches_golden(name: str, job: Path, over: list[str] | None) -> None:
    got = render_golden(job, over)
    golden = GOLDEN / f"{name}.sbatch"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
    assert golden.is_file(), (
        f"{golden} is missing; run GH_RUN_UPDATE_GOLDEN=1 .venv/bin/pytest {__file__} and review it"
    )
    assert got == golden.read_text(), (
        f"jobs/{job.name} renders differently from {golden.name}; if intended, regenerate "
        "with GH_RUN_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize(("name", "job", "over"), CASES, ids=[c[0] for c in CASES])
def test_script_and_embedded_files_are_valid(
    name: str, job: Path, over: list[str] | None, tmp_path: Path
) -> None:
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed: `make deps` installs it")
    script = render_golden(job, over)
    files = extract_files(script)
    assert "task.sh" in files
    shell = [tmp_path / "job.sbatch"]
    shell[0].write_text(script)
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)  # memory_hook/sitecustomize.py
        path.write_text(content)
        if name.endswith(".py"):
            compile(content, name, "exec")
        else:
            shell.append(path)
    for path in shell:
        subprocess.run(["bash", "-n", str(path)], check=True)
        res = subprocess.run(
            ["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True
        )
        assert res.returncode == 0, f"{job.name}: {path.name}\n{res.stdout}"
