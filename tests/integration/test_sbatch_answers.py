"""What sbatch answers (issue 26, class 5), on the real dev cluster: a site's sbatch is often a
wrapper that prints a banner, a quota notice or a warning around the job id, or a plugin's
message. The real sbatch of the dev cluster is reached through such a wrapper (first on PATH, as
a site installs it); the job it submits must be recorded with its id, never as SUBMIT_FAILED
(the run used to be SUBMIT_FAILED while its job ran to COMPLETED, and the user sent it again).
Where the answer holds no clear id, the job is found by its unique name, and exactly one job
exists. Nothing is mocked: the wrapper calls the real sbatch."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.store.db import Store
from tests import devcluster

pytestmark = pytest.mark.cluster


def _jobs_named(name: str) -> list[str]:
    """Every job id SLURM knows by this name (queue, then accounting)."""
    env = devcluster.slurm_env()
    q = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i", "--name", name], env=env,
                       capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
    a = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID", "--name", name, "-S",
                        "now-1days"], env=env, capture_output=True, text=True,
                       check=False).stdout.split()  # fmt: skip
    return sorted(set(q) | set(a))


def _wrapper(tmp: Path, before: str, after: str = "", code: str = "$rc") -> dict[str, str]:
    """An sbatch first on PATH that prints `before` and `after` around the real sbatch's
    answer and exits `code`."""
    real = shutil.which("sbatch", path=devcluster.slurm_env().get("PATH"))
    assert real
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "sbatch").write_text(
        "#!/bin/bash\n"
        f"printf '%s' {before!r}\n"
        f'out="$({real} "$@")"; rc=$?\n'
        'echo "$out"\n'
        f"printf '%s' {after!r}\n"
        f"exit {code}\n"
    )
    (bindir / "sbatch").chmod(0o755)
    return {**devcluster.slurm_env(), "PATH": f"{bindir}:{os.environ['PATH']}"}


def _spec(tmp: Path) -> str:
    f = tmp / "trivial.yaml"
    f.write_text("name: trivial\ncluster: dev\nworkload: {command: 'true'}\n")
    return str(f)


@pytest.mark.parametrize(
    "before, after, code, clear",
    [
        (
            "Welcome to the dev cluster.\nYour project has 42 core-hours left.\n",
            "Remember: /scratch is purged after 30 days.\n",
            "$rc",
            True,
        ),
        ("sbatch: WARNING: no --mem given, 4000M per node assumed\n", "", "$rc", True),
        # a banner that is a number alone: two lines read as answers, so the id is unclear
        ("Jobs queued ahead of you:\n12345\n", "", "$rc", False),
        # a wrapper that keeps sbatch's answer to itself
        ("", "", "$rc", False),
        # a wrapper whose own step after sbatch fails: the job was submitted all the same
        ("", "post-submit hook failed\n", "3", True),
    ],
    ids=["banner", "warning", "number-banner", "no-answer", "wrapper-fails-after"],
)
def test_a_submitted_job_is_recorded_with_its_id_whatever_sbatch_prints(
    dev_cluster, cli, gh_home: Path, tmp_path: Path, before: str, after: str, code: str,
    clear: bool,
) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    env = _wrapper(tmp_path, before, after, code)
    if before == "" and after == "" and code == "$rc":
        # keep the answer: the wrapper prints what it was told to and swallows sbatch's
        env = _wrapper(tmp_path, "Submitted to the dev cluster.\n", "", "$rc")
        script = Path(env["PATH"].split(":")[0]) / "sbatch"
        script.write_text(script.read_text().replace('echo "$out"\n', ""))
    res = cli("submit", _spec(tmp_path), "-x", "slurm", "--wait", env=env, timeout=300)
    run = Store(gh_home).find_run("last")
    assert run.state != "SUBMIT_FAILED", res.text
    assert res.rc == 0, res.text
    assert run.state == "COMPLETED", run
    assert _jobs_named(run.job_name) == [run.job_id], "the job recorded is the job submitted"
    if not clear:
        assert "found job" in res.err and run.job_id in res.err, res.err
    if code != "$rc":
        assert f"sbatch exited {code} after submitting job {run.job_id}" in res.err, res.err


def test_an_unclear_answer_with_slurm_unable_to_say_keeps_the_intent(
    dev_cluster, cli, gh_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """No id in the answer and squeue failing at that moment: the run stays an intent (the job
    may be queued), and `status` finds it by its name once SLURM answers, never a second job."""
    env = _wrapper(tmp_path, "Submitted.\n")
    script = Path(env["PATH"].split(":")[0]) / "sbatch"
    script.write_text(script.read_text().replace('echo "$out"\n', ""))
    # squeue fails while gh-run submits (a controller busy at that moment)
    (script.parent / "squeue").write_text("#!/bin/sh\necho 'squeue: error: busy' >&2\nexit 1\n")
    (script.parent / "squeue").chmod(0o755)
    res = cli("submit", _spec(tmp_path), "-x", "slurm", env=env, timeout=120)
    assert res.rc == 1, res.text
    assert "no clear job id" in res.err and "stays an intent" in res.err, res.err
    run = Store(gh_home).find_run("last")
    assert run.state == "INTENT" and run.job_id is None
    time.sleep(5.5)  # repair leaves intents younger than 5 s to a live submitter
    assert cli("status", run.run_id).rc == 0
    repaired = Store(gh_home).get_run(run.run_id)
    assert repaired.job_id and repaired.state != "INTENT"
    assert _jobs_named(run.job_name) == [repaired.job_id]
