"""A CPU-only stand-in for a training loop, for profiling without a GPU (the smoke_profiled job).

It does what the analysis looks for in a real run, with nothing but the standard library and
the `nvtx` package (0.2.11 in the test image; later releases are not recorded by nsys 2022.4 or
2023.4):
- one NVTX range per step (`train_step <i>`), pushed and popped on the main thread, with a
  nested `data_wait` range while the step waits for its batch;
- a loader thread named `ghr-loader` (an OS thread name, which nsys records; Python's own thread
  names are not) that produces batches and hands them over through a `threading.Condition`, so
  the main thread blocks in semaphore/condition waits (OS-runtime rows);
- CPU work in both threads (GIL hand-over: `pthread_cond_timedwait`).

    python3 cpu_steps.py [--steps N] [--step-ms MS] [--exit-code CODE] [--out DIR]

Prints one line per step and writes `steps_rank<RANK>.json` into --out (default: the job's
$GH_RUN_ARTIFACTS, when set): what it did, whether NVTX was available, the rank variables it
saw. Exits with --exit-code after the last step (tests: exit codes pass through the container
and the profiler).

With --trace it also records its own ranges (each step, its data wait, each batch the loader
made) as `cpu_steps_rank<RANK>.pt.trace.json` in --out: the Chrome trace-event format that
PyTorch's profiler writes, so `gh-run analyze` reads it without nsys or torch. The recorder is
this script (time.perf_counter_ns around each range), not a profiler: it sees no GPU, no
operator and no OS call, only the ranges it times; the trace says so (`traceName`). `gh-run
init`'s starter job runs it, so that a fresh install has a trace to analyse.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PR_SET_NAME = 15


def set_os_thread_name(name: str) -> bool:
    """Name the calling OS thread (15 bytes at most, the kernel's limit)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def nvtx_calls() -> tuple[Callable[[str], Any], Callable[[], Any], str | None]:
    """push, pop and the nvtx version (None: no nvtx, the ranges are no-ops)."""
    try:
        import nvtx  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return (lambda _name: None), (lambda: None), None
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("nvtx")
    except PackageNotFoundError:
        found = "unknown"
    return nvtx.push_range, nvtx.pop_range, found


def spin(seconds: float) -> int:
    """Busy CPU work for about `seconds` (holds the GIL in slices)."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += sum(i * i for i in range(200))
    return n


class Recorder:
    """The ranges this script times, per OS thread, written as Chrome trace events."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.origin_ns = time.time_ns() - time.perf_counter_ns()
        self.events: list[dict[str, Any]] = []
        self.threads: dict[int, str] = {}
        self._lock = threading.Lock()

    def span(self, name: str, start_ns: int) -> None:
        if not self.on:
            return
        end = time.perf_counter_ns()
        tid = threading.get_native_id()
        with self._lock:
            self.threads.setdefault(tid, threading.current_thread().name)
            self.events.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": name,
                    "pid": os.getpid(),
                    "tid": tid,
                    "ts": (self.origin_ns + start_ns) / 1000.0,
                    "dur": (end - start_ns) / 1000.0,
                    "args": {},
                }
            )

    def write(self, path: Path, rank: int, world: int) -> None:
        meta = [
            {"ph": "M", "name": "thread_name", "pid": os.getpid(), "tid": tid, "args": {"name": n}}
            for tid, n in sorted(self.threads.items())
        ]
        doc = {
            "schemaVersion": 1,
            "traceName": "ranges timed by workloads/cpu_steps.py itself (no profiler, no GPU)",
            "distributedInfo": {"rank": rank, "world_size": world, "backend": "none"},
            "traceEvents": [*meta, *sorted(self.events, key=lambda e: e["ts"])],
        }
        tmp = path.with_name(path.name + ".partial")
        tmp.write_text(json.dumps(doc) + "\n")
        tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--step-ms", type=float, default=60.0)
    ap.add_argument("--exit-code", type=int, default=0)
    artifacts = os.environ.get("GH_RUN_ARTIFACTS")
    ap.add_argument("--out", type=Path, default=Path(artifacts) if artifacts else None)
    ap.add_argument(
        "--trace",
        action="store_true",
        help="also write the ranges it timed as cpu_steps_rank<RANK>.pt.trace.json in --out",
    )
    args = ap.parse_args(argv)
    if args.trace and args.out is None:
        ap.error("--trace writes into --out (or $GH_RUN_ARTIFACTS); give --out DIR")
    rec = Recorder(args.trace)
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    push, pop, nvtx_version = nvtx_calls()
    step_s = args.step_ms / 1000.0

    ready = threading.Condition()
    batches: list[int] = []
    stop = threading.Event()

    def loader() -> None:
        set_os_thread_name("ghr-loader")
        for i in range(args.steps):
            t0 = time.perf_counter_ns()
            spin(step_s / 2)  # "reading and collating" a batch
            rec.span("load_batch", t0)
            with ready:
                batches.append(i)
                ready.notify()
            if stop.is_set():
                return

    worker = threading.Thread(target=loader, name="ghr-loader", daemon=True)
    worker.start()
    for step in range(args.steps):
        t_step = time.perf_counter_ns()
        push(f"train_step {step}")
        push("data_wait")
        with ready:
            while not batches:
                ready.wait(timeout=5.0)  # blocks: sem/cond waits in the OS-runtime trace
            batches.pop(0)
        pop()
        rec.span("data_wait", t_step)
        t_work = time.perf_counter_ns()
        spin(step_s / 2)  # "forward and backward"
        rec.span("forward_backward", t_work)
        pop()
        rec.span(f"train_step {step}", t_step)
        print(f"rank {rank} step {step} done", flush=True)
    stop.set()
    worker.join()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        report = {
            "rank": rank,
            "steps": args.steps,
            "nvtx": nvtx_version,
            "env": {k: os.environ.get(k) for k in ("RANK", "SLURM_PROCID", "WORLD_SIZE")},
        }
        (args.out / f"steps_rank{rank}.json").write_text(json.dumps(report) + "\n")
        if args.trace:
            world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
            rec.write(args.out / f"cpu_steps_rank{rank}.pt.trace.json", rank, world)
    return int(args.exit_code)


if __name__ == "__main__":
    raise SystemExit(main())
