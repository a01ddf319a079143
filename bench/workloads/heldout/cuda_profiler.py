"""cudaProfilerStart/Stop for the held-out workloads (each run as a script from this folder):
through torch's cudart, else the CUDA runtime library found by name; nothing where neither is."""

from __future__ import annotations

import ctypes
from typing import Any

import torch


def profiler(start: bool) -> None:
    lib: Any = None
    try:
        lib = torch.cuda.cudart()
    except Exception:
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
    if lib is not None:
        (lib.cudaProfilerStart if start else lib.cudaProfilerStop)()
