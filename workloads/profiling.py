"""Profiling hooks: named ranges (NVTX + torch.profiler), the Kineto trace window, and the
CUDA-profiler window that `nsys --capture-range=cudaProfilerApi` keys on.

Range names (what analysis looks for): `step_N` around each training step (N from 0) and, nested
in it, the phases `data`, `forward`, `backward`, `optimizer`. They are NVTX ranges when the run
is on CUDA and always `torch.profiler.record_function` user annotations, so a Kineto trace carries
them on CPU as well. torch.profiler adds its own `ProfilerStep#N` ranges in the trace window.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

PHASES: tuple[str, ...] = ("data", "forward", "backward", "optimizer")


def step_range_name(step: int) -> str:
    return f"step_{step}"


def trace_file_name(rank: int) -> str:
    """The Kineto trace's file name; one per rank."""
    return f"sft_rank{rank}.pt.trace.json.gz"


class Annotator:
    """Opens a named range: a record_function, plus an NVTX range when `nvtx` is set; nothing at
    all when `enabled` is off (the run then looks like a script nobody annotated: torch's own
    `ProfilerStep#N` and library ranges are all a trace holds)."""

    def __init__(self, nvtx: bool, enabled: bool = True) -> None:
        self.nvtx = nvtx and enabled
        self.enabled = enabled

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        with record_function(name):
            if self.nvtx:
                torch.cuda.nvtx.range_push(name)  # type: ignore[no-untyped-call]  # untyped in torch
            try:
                yield
            finally:
                if self.nvtx:
                    torch.cuda.nvtx.range_pop()  # type: ignore[no-untyped-call]  # untyped in torch


class TorchProfileWindow:
    """torch.profiler over steps [start, end), written gzipped as `trace_file_name(rank)`.

    Call `step()` once at the end of every training step, profiled or not.
    """

    def __init__(
        self,
        directory: str | None,
        window: tuple[int, int],
        cuda: bool,
        rank: int,
        profile_memory: bool = False,
    ) -> None:
        self.path: Path | None = None
        self._prof: profile | None = None
        if directory is None:
            return
        start, end = window
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / trace_file_name(rank)
        activities = [ProfilerActivity.CPU]
        if cuda:
            activities.append(ProfilerActivity.CUDA)
        warmup = 1 if start >= 1 else 0
        with warnings.catch_warnings():
            # a window from step 0 has no step before it to warm up on; torch warns about that
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            self._prof = profile(
                activities=activities,
                schedule=schedule(
                    skip_first=start - warmup, wait=0, warmup=warmup, active=end - start, repeat=1
                ),
                on_trace_ready=self._write,
                record_shapes=False,
                profile_memory=profile_memory,
                with_stack=False,
            )

    def _write(self, prof: profile) -> None:
        assert self.path is not None
        prof.export_chrome_trace(str(self.path))  # a .gz path is gzipped by torch

    def __enter__(self) -> TorchProfileWindow:
        if self._prof is not None:
            self._prof.__enter__()  # type: ignore[no-untyped-call]  # untyped in torch
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prof is not None:
            self._prof.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # untyped in torch

    def step(self) -> None:
        if self._prof is not None:
            self._prof.step()


class CudaProfilerWindow:
    """cudaProfilerStart before step `start` and cudaProfilerStop after step `end - 1`."""

    def __init__(self, window: tuple[int, int] | None, cuda: bool) -> None:
        self.window = window if cuda else None
        self.active = False

    def before_step(self, step: int) -> None:
        if self.window is not None and step == self.window[0]:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]  # untyped in torch
            self.active = True

    def after_step(self, step: int) -> None:
        if self.window is not None and self.active and step == self.window[1] - 1:
            self.close()

    def close(self) -> None:
        if self.active:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]  # untyped in torch
            self.active = False
