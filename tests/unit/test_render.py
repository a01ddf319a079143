"""Rendering: the script is valid shell, passes shellcheck, quotes every value, and the
embedded per-task script carries values intact (checked by running it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.render.scripts import EmbeddedFile, render_job, shell_quote
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.job import JobSpec, load_spec

REPO = Path(__file__).resolve().parents[2]
HOSTILE = [
    "plain",
    "with space",
    "it's",
    '"double"',
    "$(touch /tmp/gh-run-pwned)",
    "`touch /tmp/gh-run-pwned`",
    "a;b|c&d",
    "line1\nline2",
    "{{ 7*7 }} {% if x %}",
    "GHRUN_EOF_0000000000000000",
    "\\back\\slash",
    "*glob?[x]",
    "ünïcødé ✓",
]


def spec_with(args: list[str], env: dict[str, str] | None = None, **res: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "t",
            "resources": res,
            "workload": {"command": "printf", "args": ["%s\\0", *args], "env": env or {}},
        }
    )


def render(spec: JobSpec, run_dir: str, launcher: str = "srun") -> str:
    cluster = load_cluster("dev")
    pn, p = validate_job(spec, cluster)
    return render_job(spec, cluster, pn, p, "t-1", run_dir, launcher).script  # type: ignore[arg-type]


def extract_files(script: str) -> dict[str, str]:
    files = {}
    for m in re.finditer(
        r"cat > \"\$GH_RUN_DIR\"/(\S+) <<'(GHRUN_EOF_[0-9A-F]+)'\n(.*?)^\2$", script, re.S | re.M
    ):
        files[m.group(1)] = m.group(3)
    return files


def test_shell_quote_filter() -> None:
    assert shell_quote("a b") == "'a b'"
    assert shell_quote(["a", "b c"]) == "a 'b c'"
    assert shell_quote(True) == "true"


def test_script_shape(tmp_path: Path) -> None:
    script = render(spec_with(["x"], gpus_per_node=1, time="00:05:00", mem="1G"), "/runs/t-1")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert "#SBATCH --job-name=ghr-t-1" in directives
    assert "#SBATCH --gpus-per-node=1" in directives
    assert "#SBATCH --ntasks-per-node=1" in directives
    assert "#SBATCH --time=00:05:00" in directives
    assert "#SBATCH --mem=1G" in directives
    assert "#SBATCH --output=/runs/t-1/%j_0_log.out" in directives
    # all directives come before the first command (sbatch stops reading at the first one)
    first_cmd = next(i for i, ln in enumerate(lines) if ln and not ln.startswith("#"))
    assert all(lines.index(d) < first_cmd for d in directives)
    assert "task.sh" in extract_files(script)


def test_bash_n_and_shellcheck(tmp_path: Path) -> None:
    script = render(spec_with(HOSTILE, env={"E": HOSTILE[4]}), "/runs/t-1")
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    task = tmp_path / "task.sh"
    task.write_text(extract_files(script)["task.sh"])
    subprocess.run(["bash", "-n", str(task)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed: `make deps` installs it")
    for f in (path, task):
        res = subprocess.run(["shellcheck", "-s", "bash", str(f)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout


def test_hostile_values_arrive_intact_when_run(tmp_path: Path) -> None:
    """Run the rendered script for real (launcher direct): printf echoes every arg back."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env_value = HOSTILE[4] + "\n" + HOSTILE[2]
    script = render(spec_with(HOSTILE, env={"E": env_value}), str(run_dir), "direct")
    (run_dir / "job.sbatch").write_text(script)
    res = subprocess.run(
        ["bash", str(run_dir / "job.sbatch")],
        capture_output=True,
        cwd=run_dir,
        env={**os.environ},
        check=True,
    )
    assert res.stdout.split(b"\0")[:-1] == [a.encode() for a in HOSTILE]
    assert not Path("/tmp/gh-run-pwned").exists()
    assert (run_dir / "exit_code").read_text().strip() == "0"


def test_env_value_reaches_task_intact(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    value = "a'b\"c $(x) `y` \n; z"
    spec = JobSpec.model_validate(
        {
            "name": "t",
            "workload": {"command": "bash", "args": ["-c", 'printf %s "$E"'], "env": {"E": value}},
        }
    )
    (run_dir / "job.sbatch").write_text(render(spec, str(run_dir), "direct"))
    res = subprocess.run(
        ["bash", str(run_dir / "job.sbatch")], capture_output=True, cwd=run_dir, check=True
    )
    assert res.stdout.decode() == value


def test_failing_command_status_is_the_scripts_exit_code(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = JobSpec.model_validate(
        {"name": "t", "workload": {"command": "bash", "args": ["-c", "exit 7"]}}
    )
    (run_dir / "job.sbatch").write_text(render(spec, str(run_dir), "direct"))
    res = subprocess.run(["bash", str(run_dir / "job.sbatch")], cwd=run_dir, check=False)
    assert res.returncode == 7
    assert (run_dir / "exit_code").read_text().strip() == "7"


def test_direct_launcher_refuses_multi_task() -> None:
    with pytest.raises(UserError, match="need srun"):
        render(spec_with([], nodes=2), "/runs/t-1", "direct")


def test_embedded_file_delimiter_cannot_occur_in_content() -> None:
    f = EmbeddedFile(name="x", content="GHRUN_EOF_ABC\n")
    assert f.delimiter not in f.content


def test_run_dir_with_unsafe_characters_is_refused() -> None:
    with pytest.raises(UserError, match="sbatch cannot take"):
        render(spec_with([]), "/runs/has space/t-1")


def test_smoke_spec_renders_deterministically() -> None:
    spec = load_spec(REPO / "jobs" / "smoke.yaml")
    assert render(spec, "/runs/a") == render(spec, "/runs/a")


@pytest.mark.parametrize(
    ("resources", "tasks"),
    [
        ({"gpus_per_node": 1}, 1),
        ({"gpus_per_node": 2}, 2),
        ({"gpus_per_node": 4}, 4),
        ({"gpus_per_node": 4, "ntasks_per_node": 1}, 1),  # an explicit count wins
        ({}, 1),  # no GPU: one task
    ],
)
def test_one_task_per_gpu(tmp_path: Path, resources: dict[str, int], tasks: int) -> None:
    """resources.gpus_per_node: N starts N tasks per node (one per GPU): --ntasks-per-node=N,
    and WORLD_SIZE counts them over all nodes."""
    text = (REPO / "clusters" / "dev.yaml").read_text()
    text = text.replace("gpus_per_node: 1", "gpus_per_node: 4").replace(
        "cpus_per_node: 2", "cpus_per_node: 8"
    )
    assert "gpus_per_node: 4" in text
    (tmp_path / "four.yaml").write_text(text)
    cluster = load_cluster(str(tmp_path / "four.yaml"))
    spec = spec_with(["x"], nodes=2, **resources)
    pn, part = validate_job(spec, cluster)
    script = render_job(spec, cluster, pn, part, "t-1", "/runs/t-1").script
    directives = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert [d for d in directives if d.startswith("#SBATCH --ntasks")] == [
        f"#SBATCH --ntasks-per-node={tasks}"
    ]
    gpus = resources.get("gpus_per_node")
    assert (f"#SBATCH --gpus-per-node={gpus}" in directives) == bool(gpus)
    assert f"export WORLD_SIZE={2 * tasks}\n" in script
