"""A job that died of GPU out-of-memory, told from its log (orchestrator/core/gpu_oom.py): PyTorch's
messages as its versions have written them (each line below is as users posted it in public
issues, quoted for the format: the URLs say where), the local executor's reading of a failed
run folder, and how `status` shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import run_view
from orchestrator.core import gpu_oom
from orchestrator.executors.local import LocalExecutor
from orchestrator.store.db import Run

# (log line, the reason's words)
REAL = [
    # torch >= 2.3 (pytorch/pytorch#16417, a comment of 2024)
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has"
        " a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch"
        " memory, this process has 23.60 GiB memory in use.",
        "tried to allocate 22.00 MiB; 11.06 MiB free of 23.65 GiB on GPU 0",
    ),
    # torch 2.1 spelled it "capacty" (wxian3/NeuroLens#2)
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 55.57 GiB. GPU 0 has"
        " a total capacty of 12.00 GiB of which 9.02 GiB is free. Of the allocated memory",
        "tried to allocate 55.57 GiB; 9.02 GiB free of 12.00 GiB on GPU 0",
    ),
    # torch.OutOfMemoryError (torch >= 2.5), "0 bytes" (carolchenyx/MGFN.#35 wording)
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a"
        " total capacity of 6.00 GiB of which 0 bytes is free.",
        "tried to allocate 1.70 GiB; 0 bytes free of 6.00 GiB on GPU 0",
    ),
    # torch < 2.1 (pytorch/pytorch#59778)
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total"
        " capacity; 781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by"
        " PyTorch)",
        "tried to allocate 2.26 GiB; 3.03 GiB free of 6.00 GiB on GPU 0",
    ),
    ("RuntimeError: CUDA error: out of memory", "CUDA error: out of memory"),
]


@pytest.mark.parametrize(("line", "words"), REAL)
def test_pytorchs_messages(line: str, words: str) -> None:
    got = gpu_oom.match(["Traceback ...\n  File x.py\n" + line + "\n"])
    assert got is not None and got.startswith("GPU out of memory: ") and words in got, got
    assert gpu_oom.is_gpu_oom(got)


def test_other_failures_are_not_out_of_memory() -> None:
    assert gpu_oom.match(["ValueError: Expected a torch.device with a specified index"]) is None
    assert gpu_oom.match(["slurmstepd: error: Exceeded job memory limit"]) is None
    assert gpu_oom.match([]) is None
    assert not gpu_oom.is_gpu_oom(None)


def _run(folder: Path, state: str, reason: str | None) -> Run:
    return Run(
        run_id="r1", name="n", job_name="j", spec_path="s", spec_json="{}", cluster="c",
        partition="p",
        executor="local", run_dir=str(folder), state=state, reason=reason,
    )  # fmt: skip


def test_the_local_executor_reads_it_from_the_logs(tmp_path: Path) -> None:
    (tmp_path / "local_0_log.err").write_text("noise\n" + REAL[0][0] + "\n")
    (tmp_path / "local_exit").write_text("1\n")
    status = LocalExecutor._status_from_exit("1", tmp_path)
    assert status.state == "FAILED" and status.exit_code == 1
    assert status.reason is not None and status.reason.startswith("GPU out of memory")
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "local_0_log.err").write_text("ValueError: no\n")
    assert LocalExecutor._status_from_exit("1", clean).reason is None


def test_status_shows_it(tmp_path: Path) -> None:
    reason = gpu_oom.match([REAL[0][0]])
    run = _run(tmp_path, "FAILED", reason)
    assert run_view.state_label(run) == "FAILED (GPU OOM)"
    assert "gh-run analyze r1" in run_view.end_line(run)
    assert run_view.state_label(_run(tmp_path, "FAILED", "exit code 1")) == "FAILED"
