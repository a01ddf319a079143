"""The reference workload's Unified-Memory and data-parallel paths, on CPU.

RMM needs a GPU: the Unified-Memory bootstrap and the RMM peak-memory reading run here against
the STAND-IN `rmm` / `torch` / `cuda.bindings` packages of tests/fixtures/fake_rmm (they log each
call and return numbers the test sets). Data parallelism runs for real: two processes, DDP over
gloo on CPU, as they would run over NCCL on GPUs.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from workloads.sft import main  # noqa: E402
from workloads.um import PEAK_SOURCE, host_snapshot, pool_sizes  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FAKE_RMM = REPO / "tests" / "fixtures" / "fake_rmm"
TINY = ["--layers", "1", "--hidden", "64", "--heads", "4", "--vocab", "512", "--seq-len", "32"]
TINY += ["--batch-size", "2", "--device", "cpu", "--precision", "fp32"]


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


# --- Unified Memory --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "sizes"),
    [
        (None, {}),  # the seed's call as written: RMM's default pool, no cap
        (0.6, pool_sizes(80 * 2**30, 0.6)),
    ],
)
def test_um_bootstrap_makes_the_managed_pool_torchs_allocator_on_the_ranks_gpu(
    tmp_path: Path, fraction: float | None, sizes: dict[str, int]
) -> None:
    log = tmp_path / "calls.jsonl"
    code = (
        "import sys; from workloads.um import enable_unified_memory; "
        f"enable_unified_memory(1, {fraction!r}); "
        "print('torch is the stand-in:', getattr(sys.modules['torch'], 'STAND_IN', False))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{FAKE_RMM}{os.pathsep}{REPO}",
        "FAKE_RMM_LOG": str(log),
        "FAKE_RMM_FREE_BYTES": str(80 * 2**30),
    }
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert res.returncode == 0, res.stderr
    assert "torch is the stand-in: True" in res.stdout
    calls = _calls(log)
    assert [c["event"] for c in calls] == [
        "import rmm",
        "cudaSetDevice",
        "rmm.reinitialize",
        "rmm.statistics.enable_statistics",
        "import torch",
        "torch.cuda.memory.change_current_allocator",
    ]
    assert calls[1]["device"] == 1
    assert calls[2]["kwargs"] == {
        "pool_allocator": True,
        "managed_memory": True,
        "devices": 1,
        **sizes,
    }
    assert calls[-1]["allocator"] == "STAND-IN rmm_torch_allocator"
    assert "torch" not in calls[0]["modules"]


def test_pool_cap_is_a_share_of_free_memory_and_never_below_the_initial_pool() -> None:
    free = 81_000_000_123
    for fraction in (0.1, 0.5, 0.6, 1.0):
        sizes = pool_sizes(free, fraction)
        assert sizes["maximum_pool_size"] <= free * fraction
        assert sizes["initial_pool_size"] <= sizes["maximum_pool_size"]
        assert sizes["initial_pool_size"] <= free // 2
        assert all(v % 256 == 0 for v in sizes.values())
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="max_fraction"):
            pool_sizes(free, bad)


def test_under_um_peak_memory_comes_from_rmm_statistics_not_torch(tmp_path: Path) -> None:
    """torch refuses its memory statistics under RMM's allocator: the run reads RMM's adaptor.
    Real torch (CPU) trains; the STAND-IN rmm, found after it on sys.path, holds the counters."""
    log = tmp_path / "calls.jsonl"
    code = f"""
import json, sys
sys.path.append({str(FAKE_RMM)!r})
import rmm.statistics
rmm.statistics.enable_statistics()   # what enable_unified_memory() leaves behind
from workloads.config import Config
from workloads.train import run
cfg = Config(layers=1, hidden=64, heads=4, vocab=512, seq_len=32, batch_size=2, steps=2,
             precision="fp32", device="cpu", unified_memory=True, um_host_touch_mb=1)
print(json.dumps(run(cfg, log=False)))
"""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FAKE_RMM_LOG": str(log),
        "FAKE_RMM_STATS": json.dumps({"current_bytes": 1000, "peak_bytes": 5000}),
        "FAKE_RMM_POOL_BYTES": "123456",
    }
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    metrics = json.loads(res.stdout.strip().splitlines()[-1])
    assert metrics["peak_gpu_memory_bytes"] == 1000 + 5000  # held at reset + the new peak
    assert metrics["peak_gpu_memory_reserved_bytes"] == 123456  # the pool's size
    assert metrics["peak_gpu_memory_source"] == PEAK_SOURCE
    # a CPU run's parameters are plain host memory: the snapshot reads them like managed ones
    # (all of them here: the tiny model's fp32 weights hold less than the 1 MiB asked for)
    assert metrics["host_snapshot_bytes_per_step"] == min(
        2**20, 4 * metrics["trainable_parameters"]
    )
    pushes = [c for c in _calls(log) if c["event"] == "rmm.statistics.push_statistics"]
    assert len(pushes) == 1  # counters restart once, before the first step


def test_host_snapshot_copies_the_bytes_in_order_up_to_the_limit() -> None:
    a = torch.arange(10, dtype=torch.float32)
    b = torch.arange(7, dtype=torch.int64)
    whole = a.numpy().tobytes() + b.numpy().tobytes()
    assert bytes(host_snapshot([a, b], 10_000, managed=False)) == whole  # less than the limit
    assert bytes(host_snapshot([a, b], 44, managed=False)) == whole[:44]  # cut inside b
    assert host_snapshot([], 64, managed=False) == bytearray()


def test_host_snapshot_refuses_device_memory_that_is_not_managed() -> None:
    on_gpu = types.SimpleNamespace(is_cuda=True)  # never dereferenced: refused before
    with pytest.raises(ValueError, match="managed"):
        host_snapshot([on_gpu], 64, managed=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unified-memory"], "--unified-memory needs a GPU"),
        (["--um-host-touch-mb", "4"], "--um-host-touch-mb needs --unified-memory"),
        (["--um-max-pool-fraction", "0.5"], "--um-max-pool-fraction needs --unified-memory"),
        (["--um-max-pool-fraction", "1.5"], "must be in (0, 1]"),
        (["--straggle-rank", "1"], "--straggle-rank and --straggle-ms go together"),
        (["--straggle-ms", "50"], "--straggle-rank and --straggle-ms go together"),
    ],
)
def test_unusable_flag_combinations_are_refused_before_anything_runs(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--steps", "2", "--output", str(tmp_path), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "metrics.json").exists()


# --- data parallel ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ddp_on_gloo_keeps_replicas_equal_shards_data_and_straggles_one_rank(
    tmp_path: Path,
) -> None:
    port = str(_free_port())
    args = [*TINY, "--steps", "3", "--ddp", "--straggle-rank", "1", "--straggle-ms", "30"]
    args += ["--output", str(tmp_path), "--torch-profile", str(tmp_path), "--profile-steps", "1:3"]
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "OMP_NUM_THREADS": "1",
        }
        env.pop("SLURM_PROCID", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "workloads.sft", *args],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    m0 = json.loads((tmp_path / "metrics.json").read_text())
    m1 = json.loads((tmp_path / "metrics_rank1.json").read_text())
    assert (m0["rank"], m1["rank"]) == (0, 1)
    assert m0["world_size"] == m1["world_size"] == 2
    assert m0["ddp_backend"] == m1["ddp_backend"] == "gloo"
    # gradients were averaged: both replicas end with the same weights ...
    assert m0["parameter_checksum"] == m1["parameter_checksum"]
    # ... after training on different shards of the data
    assert m0["losses"] != m1["losses"]
    # the straggler's extra host work is inside its data phase, on rank 1 only
    assert (m0["straggle_ms_per_step"], m1["straggle_ms_per_step"]) == (0.0, 30.0)
    assert min(m1["data_times_s"]) >= 0.030
    for rank in (0, 1):
        with gzip.open(tmp_path / f"sft_rank{rank}.pt.trace.json.gz") as fh:
            trace = json.load(fh)
        info = trace["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")


def test_without_ddp_each_rank_trains_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main([*TINY, "--steps", "3", "--output", str(tmp_path)]) == 0
    metrics = json.loads((tmp_path / "metrics_rank1.json").read_text())
    assert metrics["ddp_backend"] is None and metrics["world_size"] == 2


@pytest.mark.slow
def test_ddp_job_through_gh_run_with_torchrun(cli, gh_home: Path) -> None:  # type: ignore[no-untyped-def]
    """jobs/canary_ddp.yaml as bench/gpu_ddp.sh runs it on a GPU host without SLURM: the local
    executor runs the batch script, torchrun starts two ranks in the one task, each writes its
    own trace and metrics, and analysis finds both ranks by distributedInfo."""
    wl = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    wl += ["workloads.sft", "--ddp", *TINY, "--steps", "3", "--profile-steps", "1:3"]
    wl += ["--straggle-rank", "1", "--straggle-ms", "200"]
    res = cli(
        "submit",
        str(REPO / "jobs" / "canary_ddp.yaml"),
        "--executor",
        "local",
        "--wait",
        "--cluster",
        str(REPO / "bench" / "clusters" / "gpu-host.yaml"),
        "--set",
        "partition=gpu",
        "--set",
        "resources.nodes=1",
        "--set",
        "resources.ntasks_per_node=1",
        "--set",
        "resources.gpus_per_node=2",
        "--set",
        "container.runtime=none",
        "--set",
        f"workload.command={sys.executable}",
        "--set",
        "workload.args=" + json.dumps(wl),
        env={"SCRATCH": str(gh_home / "scratch")},
        timeout=400,
    )
    assert res.rc == 0, res.text
    analysis = cli("analyze", "last", "--json")
    assert analysis.rc == 0, analysis.text
    doc = json.loads(analysis.out)
    assert [(s["rank"], s["rank_rule"]) for s in doc["sources"]] == [
        (0, "distributedInfo.rank"),
        (1, "distributedInfo.rank"),
    ]
    waits = {r["rank"]: r["data_wait_ns"] for r in doc["ranks"]}
    assert waits[1] > waits[0]
