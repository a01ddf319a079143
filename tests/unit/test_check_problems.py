"""`check` and `doctor SPEC` on a machine without SLURM (a laptop): every problem of the job at
once, each with a fix this command can act on, through the real CLI (no cluster needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.laptop import SLURM_CLIENTS


@pytest.fixture
def laptop_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No SLURM clients on the PATH, no SLURM_CONF; $SCRATCH empty, which is as good as unset
    (it would otherwise put the run folders under /gh-run)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.delenv("SLURM_CONF", raising=False)
    env = {"PATH": str(empty), "SCRATCH": ""}
    assert not [p for p in SLURM_CLIENTS if shutil.which(p, path=env["PATH"])]
    return env


def _problems(err: str) -> list[str]:
    lines = [x for x in err.strip().splitlines() if not x.startswith("warning: ")]
    assert lines[0].startswith("error: ") and "problems, each with its fix:" in lines[0], err
    return [line.removeprefix("  - ") for line in lines[1:]]


def test_check_lists_every_problem_once_and_no_option_it_lacks(cli, laptop_env) -> None:  # type: ignore[no-untyped-def]
    res = cli("check", "jobs/sft.yaml", env=laptop_env)
    assert res.rc == 2, res.text
    problems = _problems(res.err)
    assert len(problems) == 3, problems
    scratch, image, slurm = problems
    assert scratch.startswith(
        "clusters/gh200.yaml: paths.runs: '$SCRATCH/gh-run/runs' uses $SCRATCH"
    )
    # The image is refused at the line of the file that set it (the job's base file).
    assert image.startswith("jobs/base/sft_base.yaml:20: container.image: ")
    assert slurm.startswith("the SLURM clients (scontrol, sbatch) are not installed")
    assert "gh200 login node (login.gh200.example.org)" in slurm
    assert "--executor" not in res.err  # check has no such option
    assert "Traceback" not in res.err


def test_doctor_spec_says_what_check_would_refuse(cli, laptop_env) -> None:  # type: ignore[no-untyped-def]
    res = cli("doctor", "jobs/sft.yaml", env=laptop_env)
    assert res.rc == 1, res.text
    lines = {line.split(":")[0]: line for line in res.out.splitlines()}
    assert lines["ok partition"].endswith("fits the limits of partition gh (clusters/gh200.yaml)")
    assert "$SCRATCH, which is not set here" in lines["missing run folder"]
    assert "not installed on this machine" in lines["missing cluster"]


def test_partition_limits_point_at_their_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: t\ncluster: dev\nresources:\n  nodes: 3\n  mem: 9G\nworkload:\n  command: 'true'\n"
    )
    res = cli("render", str(job), "-x", "local")
    assert res.rc == 2, res.text
    problems = _problems(res.err)
    assert [p.split(": ")[0].rsplit(":", 1)[-1] for p in problems] == ["4", "5"]
    assert "resources.nodes: 3 nodes asked" in problems[0]
    assert "resources.mem: 9G is more than" in problems[1]


def test_check_names_an_unset_secret_with_the_other_problems(
    cli, tmp_path: Path, laptop_env
) -> None:  # type: ignore[no-untyped-def]
    """preflight.secrets: `check` says what `submit` would refuse on this machine, at the line
    that names the secret, with every other problem (here: no SLURM clients)."""
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: t\ncluster: dev\nworkload:\n  command: 'true'\n"
        "  secret_env: [GH_RUN_TEST_UNSET_TOKEN]\n"
    )
    env = {**laptop_env, "SCRATCH": "/tmp"}
    res = cli("check", str(job), env=env)
    assert res.rc == 2, res.text
    problems = _problems(res.err)
    secret = [p for p in problems if "secret_env" in p]
    assert len(secret) == 1 and len(problems) == 2, problems
    assert secret[0].startswith(f"{job}:5: workload.secret_env: GH_RUN_TEST_UNSET_TOKEN is not set")
    assert "export it before submitting" in secret[0]
    res = cli("check", str(job), env={**env, "GH_RUN_TEST_UNSET_TOKEN": "x"})
    assert "secret_env" not in res.err, res.text


def test_the_submit_host_checks_return_every_problem(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """preflight.submit_host: each check returns its problem; submit raises them together, one
    alone as its own sentence; a cluster over SSH has its image there, not here."""
    from orchestrator.checks import preflight
    from orchestrator.core.errors import UserError
    from orchestrator.spec.job import JobSpec

    monkeypatch.delenv("GH_RUN_TEST_A", raising=False)
    spec = JobSpec.model_validate(
        {
            "name": "x",
            "container": {"runtime": "apptainer", "image": str(tmp_path / "none.sif")},
            "workload": {"command": "true", "secret_env": ["GH_RUN_TEST_A"]},
        }
    )
    both = preflight.submit_host(spec, "job.yaml")
    assert [e.message.split(": ")[1] for e in both] == ["container.image", "workload.secret_env"]
    assert all(isinstance(e, UserError) for e in both)
    remote = preflight.submit_host(spec, "job.yaml", remote=True)
    assert [e.message.split(": ")[1] for e in remote] == ["workload.secret_env"]
    with pytest.raises(UserError) as raised:
        preflight.check_submit_host(spec, "job.yaml")
    assert raised.value.message.startswith("job.yaml: 2 problems, each with its fix:")
    with pytest.raises(UserError) as raised:
        preflight.check_submit_host(spec, "job.yaml", remote=True)
    assert raised.value.message == remote[0].message  # one problem: its own sentence
    (tmp_path / "none.sif").write_text("")
    monkeypatch.setenv("GH_RUN_TEST_A", "")  # set, even empty: sbatch passes it
    assert preflight.submit_host(spec, "job.yaml") == []
    preflight.check_submit_host(spec, "job.yaml")


def test_fit_partition_collects_or_raises_every_limit() -> None:
    from orchestrator.checks import preflight
    from orchestrator.core.errors import GhRunError, UserError
    from orchestrator.site.cluster import load_cluster
    from orchestrator.spec.job import JobSpec

    cluster = load_cluster("dev")
    spec = JobSpec.model_validate(
        {"name": "x", "resources": {"nodes": 3, "mem": "9G"}, "workload": {"command": "true"}}
    )
    found: list[GhRunError] = []
    preflight.fit_partition(spec, cluster, "job.yaml", found)
    assert len(found) == 2 and all(e.message.startswith("job.yaml: resources.") for e in found)
    with pytest.raises(UserError, match="2 problems"):
        preflight.fit_partition(spec, cluster, "job.yaml")
    ok = JobSpec.model_validate({"name": "x", "workload": {"command": "true"}})
    name, part = preflight.fit_partition(ok, cluster, "job.yaml")
    assert part is cluster.partitions[name]
