"""bench/workloads/convnet_sgd.py, the plain training script recorded for issue 28 (workloads
nobody annotated): on CPU, tiny, it trains, writes its own truth and leaves no marks of its own
in a Kineto trace."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "workloads" / "convnet_sgd.py"
TINY = ["--device", "cpu", "--batch-size", "4", "--image-size", "32", "--blocks", "1,1"]
TINY += ["--width", "8", "--classes", "10"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, *args], capture_output=True, text=True, timeout=300
    )


def load_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("convnet_sgd", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trains_and_writes_its_truth_and_an_unannotated_kineto_trace(tmp_path: Path) -> None:
    out = run("--steps", "4", "--item-ms", "3", "--num-workers", "0", "--output", str(tmp_path),
              "--torch-profile", str(tmp_path), "--profile-steps", "1:3")  # fmt: skip
    assert out.returncode == 0, out.stderr
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["workload"] == "convnet_sgd" and m["annotated"] is False and m["steps"] == 4
    assert m["planted_item_ms"] == 3 and m["planted_data_ms_per_step"] == 12
    assert len(m["step_times_s"]) == len(m["data_times_s"]) == len(m["losses"]) == 4
    assert m["step_start_unix_ns"] == sorted(m["step_start_unix_ns"])
    # at workers 0 the loop itself pays the planted cost of every batch (4 images x 3 ms)
    assert min(m["data_times_s"]) >= 0.012
    assert all(d < s for d, s in zip(m["data_times_s"], m["step_times_s"], strict=True))
    assert m["profile_steps"] == [1, 3] and m["trace_file"] == "convnet_rank0.pt.trace.json.gz"

    with gzip.open(tmp_path / "convnet_rank0.pt.trace.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    marks = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    # torch's own marks only: the profiler's steps, the DataLoader's and the optimizer's
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= marks
    torch_own = ("ProfilerStep#", "enumerate(DataLoader)", "Optimizer.")
    assert all(n.startswith(torch_own) for n in marks)
    assert any(n.startswith("Optimizer.step#SGD.step") for n in marks)
    assert any("convolution" in e["name"] for e in events if e.get("cat") == "cpu_op")


def test_an_image_costs_at_least_its_planted_time_and_is_deterministic() -> None:
    mod = load_module()
    fast, slow = mod.SyntheticImages(8, 32, 10, 0.0), mod.SyntheticImages(8, 32, 10, 25.0)
    t0 = time.perf_counter()
    image, label = slow[3]
    assert time.perf_counter() - t0 >= 0.025  # a lower bound by construction
    again, label_again = fast[3]
    assert torch.equal(image, again) and int(label) == int(label_again)
    assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 32, 32)


def test_windows_past_the_last_step_are_refused() -> None:
    out = run("--steps", "3", "--cuda-profiler-window", "2:5")
    assert out.returncode == 2 and "--cuda-profiler-window 2:5" in out.stderr
    out = run("--steps", "3", "--profile-steps", "3:2")
    assert out.returncode == 2 and "START < END" in out.stderr
