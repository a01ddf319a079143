"""A job that dies of GPU out-of-memory, through gh-run on the real dev cluster (issue 39 item
5): `submit --wait` (local executor and SLURM), a campaign, and the cluster reached over SSH
all say that it ran out of GPU memory (not just FAILED), collect the memory hook's dump whatever
`artifacts.include` says, and `gh-run analyze RUN` leads with what was asked, what was free,
what held the rest and the knob.

There is no GPU here, so the job is a STAND-IN for one that ran out of memory, named so: with
`profile.memory: snapshot` (the hook's sitecustomize loads in its Python, for real), it copies
an out-of-memory snapshot made from a real H200 recording (bench/memory_oom_standin.py, from
tests/data/memory_h200/activations) to where the hook writes one, prints PyTorch's own message
(the format torch 2.3+ writes) on stderr and exits 1, as a training script that raised
torch.OutOfMemoryError does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.store.db import Store
from tests import devcluster
from tests.conftest import REPO, run_cli
from tests.fixtures.recordings import unpacked
from tests.laptop import Laptop
from tests.laptop import run_id_of as _run_id

pytestmark = pytest.mark.cluster

MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total"
    " capacity of 139.80 GiB of which 120.00 GiB is free. Including non-PyTorch memory, this"
    " process has 17.00 GiB memory in use. Of the allocated memory 8.44 GiB is allocated by"
    " PyTorch, and 7.98 GiB is reserved by PyTorch but unallocated."
)


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in out-of-memory snapshot, where the cluster's jobs can read it."""
    real = unpacked(REPO / "tests" / "data" / "memory_h200" / "activations")
    folder = devcluster.SCRATCH / "gh-run-test-oom-standin"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "memory-oom.rank0.pickle"
    subprocess.run(
        [sys.executable, str(REPO / "bench" / "memory_oom_standin.py"),
         str(real / "memory.rank0.pickle"), str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    out.chmod(0o644)
    return out


def _script(snapshot: Path) -> str:
    return (
        'mkdir -p "$GH_RUN_MEMORY_DIR"\n'
        f'cp {snapshot} "$GH_RUN_MEMORY_DIR/memory-oom.rank0.pickle"\n'
        # the job's Python, with the hook's sitecustomize on its path (no torch, no recording)
        'python3 -c \'import sys, os; assert "memory_hook" in os.environ["PYTHONPATH"];'
        f' sys.stderr.write("Traceback (most recent call last):\\n{MESSAGE}\\n"); sys.exit(1)\'\n'
    )


def _job(tmp: Path, snapshot: Path, cluster: str = "dev") -> Path:
    path = tmp / "oom.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "oom-standin",
                "cluster": cluster,
                **({"partition": "gh"} if cluster == "dev" else {}),
                "resources": {"nodes": 1, "cpus_per_task": 1, "mem": "200M", "time": "00:02:00"},
                **({"container": {"runtime": "none"}} if cluster == "dev" else {}),
                "profile": {"memory": "snapshot"},
                "workload": {"command": "bash", "args": ["-c", _script(snapshot)]},
                "artifacts": ["*.txt"],
            }
        )
    )
    return path


def _says_oom(submit_out: str, status_out: str, analyze_out: str) -> None:
    assert "FAILED" in submit_out and "GPU out of memory: tried to allocate 12.00 GiB" in (
        submit_out
    ), submit_out
    assert "120.00 GiB free of 139.80 GiB on GPU 0" in submit_out, submit_out
    assert "says what held the memory" in submit_out, submit_out
    assert "FAILED (GPU OOM)" in status_out, status_out
    lines = [ln for ln in analyze_out.splitlines() if ln.strip()]
    assert lines[0] == "GPU out of memory", analyze_out
    lead = " ".join(lines[1:8])
    assert "it asked for 12.00 GiB" in lead and "largest block 512.00 MiB" in lead, lead
    assert "held:" in lead and "activations" in lead and "knob:" in lead, lead


@pytest.mark.parametrize("executor", ["local", "slurm"])
def test_submit_wait_status_and_analyze_say_gpu_out_of_memory(
    dev_cluster: None, gh_home: Path, tmp_path: Path, standin: Path, executor: str
) -> None:
    spec = _job(tmp_path, standin)
    res = run_cli(["submit", str(spec), "-x", executor, "--wait"], gh_home, timeout=180)
    assert res.rc == 1, res.text
    run = Store(gh_home).find_run("last")
    assert run.state == "FAILED" and run.reason and run.reason.startswith("GPU out of memory")
    status = run_cli(["status"], gh_home)
    analyze = run_cli(["analyze", run.run_id], gh_home)
    assert analyze.rc == 0, analyze.text
    _says_oom(res.out, status.out, analyze.out)
    # collected whatever artifacts.include says (*.txt here)
    art = gh_home / "artifacts" / run.run_id / "artifacts" / "memory"
    assert (art / "memory-oom.rank0.pickle").is_file(), list(art.parent.rglob("*"))
    js = json.loads(run_cli(["analyze", run.run_id, "--json"], gh_home).out)
    oom = js["ranks"][0]["memory"]["oom"]
    assert oom["requested_bytes"] == 12 << 30 and oom["phase"] == "forward", oom


def test_over_ssh(laptop: Laptop, tmp_path: Path, standin: Path) -> None:
    spec = _job(tmp_path, standin, cluster="dev-ssh")
    res = laptop.cli("submit", str(spec), "--wait", timeout=240)
    assert res.rc == 1, res.text
    run_id = _run_id(res)
    status = laptop.cli("status")
    analyze = laptop.cli("analyze", run_id)
    assert analyze.rc == 0, analyze.text
    _says_oom(res.out, status.out, analyze.out)


def test_a_campaign_names_the_variant_that_ran_out(
    dev_cluster: None, gh_home: Path, tmp_path: Path, standin: Path
) -> None:
    camp = tmp_path / "oom-campaign.yaml"
    camp.write_text(
        yaml.safe_dump(
            {
                "name": "oomcamp",
                "job": str(_job(tmp_path, standin)),
                "executor": "slurm",
                "matrix": {"x": {"a": []}},
            }
        )
    )
    res = run_cli(["campaign", "run", str(camp), "--wait", "--timeout", "180"], gh_home)
    assert res.rc != 0, res.text
    # the variant's own line ("failed a: ..."), not the summary: a campaign id may end in "a:"
    failed = [ln for ln in res.out.splitlines() if ln.strip().startswith("failed a:")]
    assert failed and "GPU out of memory: tried to allocate 12.00 GiB" in failed[0], res.out
    cid = next(w.rstrip(":") for w in res.out.split() if w.startswith("oomcamp-"))
    listing = run_cli(["campaign", "status", cid], gh_home)
    assert listing.rc == 0 and "FAILED (GPU OOM)" in listing.out, listing.text
