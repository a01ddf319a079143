"""What `analyze RUN` reads of a run's artifacts (orchestrator/runs/inputs.py): a run whose job
recorded only PyTorch's memory history (`profile.memory` with `profile.tool: none`, the way a
job that runs out of GPU memory is recorded) has something to analyse; a folder with nothing
analysis reads has not."""

from __future__ import annotations

from pathlib import Path

from orchestrator.runs.inputs import _readable


def test_a_hook_dump_is_something_to_analyse(tmp_path: Path) -> None:
    mem = tmp_path / "artifacts" / "memory"
    mem.mkdir(parents=True)
    for name in ("memory.rank0.pickle", "memory-oom.rank3.pickle"):
        (mem / name).write_bytes(b"\x80\x04N.")
        assert _readable(mem / name), name


def test_other_pickles_and_metrics_are_not(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "model.pickle").write_bytes(b"\x80\x04N.")
    (tmp_path / "memory.rank0.pickle").write_bytes(b"\x80\x04N.")  # not in a memory/ folder
    (tmp_path / "metrics.json").write_text('{"steps": 3}')
    assert not _readable(mem / "model.pickle")
    assert not _readable(tmp_path / "memory.rank0.pickle")
    assert not _readable(tmp_path / "metrics.json")
