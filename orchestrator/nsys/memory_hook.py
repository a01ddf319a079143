"""The in-job memory hook (`profile.memory: timeline | snapshot`; docs/profiling.md, "Memory").

gh-run copies this file into the run folder as `memory_hook/gh_run_memory_hook.py`, beside its
loader (`memory_sitecustomize.py`, copied as `memory_hook/sitecustomize.py`), and task.sh puts
that folder first on `PYTHONPATH` with `GH_RUN_MEMORY` set, only for a job that asks. The
workload's own code is never changed: every Python process of the task imports the loader at
start-up, and the loader imports this file only when `GH_RUN_MEMORY` says so.

What it does, in a process that imports torch:
- when that process first initialises CUDA (`torch.cuda._lazy_call`: a process that never uses
  CUDA, a data-loader worker or torchrun's launcher, records nothing), it turns on PyTorch's
  allocator history, `torch.cuda.memory._record_memory_history(enabled="all", max_entries=N)`,
  with the Python stack of each allocation (`snapshot`) or without stacks (`timeline`:
  cheaper, categories from the step phase and the lifetime alone). `max_entries` is the cap
  (`GH_RUN_MEMORY_MAX_EVENTS`): the allocator keeps the last N events, a ring;
- it marks the phases of each training step on the same clock as the allocator's `time_us`
  (Unix microseconds): the first module call of a step (a global forward pre-hook, armed once
  per step), `torch.autograd.backward` (begin and end, outermost call only), and every
  optimizer's `step()` (torch's global optimizer hooks). Nothing the workload computes changes;
- it writes `torch.cuda.memory._snapshot()` with those marks under the key `gh_run` (plain
  data: lists, dicts, numbers, strings) to `GH_RUN_MEMORY_DIR/memory.rank<R>.pickle` when the
  capture window ends (`GH_RUN_MEMORY_DUMP_AT=profiler-stop`: the first
  `torch.cuda.profiler.stop()`, the cudaProfilerApi window's end; recording stops there) or,
  otherwise, when the process exits; and, above all, when the allocator runs out of memory
  (PyTorch's out-of-memory observer): `oom.rank<R>.json` first (small: what was asked, what
  CUDA said was free), then `memory-oom.rank<R>.pickle`.

Whatever fails here is said in one line on stderr and the workload runs on unrecorded: the hook
must never be why a job fails. Standard library only (and the workload's torch): it runs under
whatever Python the job's image has, 3.8 on.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pickle
import sys
import threading
import time
from typing import Any

FORMAT = "gh-run.memory/1"
ENV_MODE = "GH_RUN_MEMORY"
ENV_DIR = "GH_RUN_MEMORY_DIR"
ENV_MAX_EVENTS = "GH_RUN_MEMORY_MAX_EVENTS"
ENV_DUMP_AT = "GH_RUN_MEMORY_DUMP_AT"
# the GPU memory of the partition the job was rendered for (the cluster file's gpu_mem), bytes
ENV_PARTITION = "GH_RUN_MEMORY_PARTITION_GPU_BYTES"
MODES = ("timeline", "snapshot")
DUMP_AT = ("exit", "profiler-stop")
DEFAULT_MAX_EVENTS = 100_000
# the marks kept at most (a few per step): a run of a million steps still holds a bounded list
MAX_MARKS = 200_000
# the names of what the hook writes, in GH_RUN_MEMORY_DIR
DUMP_NAME = "memory.rank{rank}.pickle"
OOM_DUMP_NAME = "memory-oom.rank{rank}.pickle"
OOM_NOTE_NAME = "oom.rank{rank}.json"


def now_us() -> int:
    """Unix time in microseconds: the clock of the allocator's `time_us`."""
    return time.time_ns() // 1000


def _say(text: str) -> None:
    try:
        sys.stderr.write(f"gh-run memory hook: {text}\n")
        sys.stderr.flush()
    except Exception:  # a closed stderr: nothing to tell it with
        pass


def _env_rank(*names: str) -> int:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _module(name: str) -> Any:
    """A module of torch by its full name, None when this torch has none of that name."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


class Recorder:
    """One process's recording: the marks, the dumps, the out-of-memory observer."""

    def __init__(self, mode: str, out_dir: str, max_events: int, dump_at: str) -> None:
        self.mode = mode
        self.out_dir = out_dir
        self.max_events = max_events
        self.dump_at = dump_at
        self.rank = _env_rank("RANK", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK")
        self.local_rank = _env_rank("LOCAL_RANK", "SLURM_LOCALID")
        self.marks: list[list[Any]] = []
        self.torch: Any = None
        self.started = False
        self.stopped = False
        self.dumped = False
        self.oom_dumped = False
        self.ooms = 0
        self.steps_after_oom = 0
        self.backward_depth = 0
        self.optimizers: dict[int, int] = {}
        self.forward_hook: Any = None
        self.lock = threading.RLock()

    # ---- marks
    def mark(self, kind: str, value: int = 0) -> None:
        if self.started and not self.stopped and len(self.marks) < MAX_MARKS:
            self.marks.append([now_us(), kind, value])

    def _arm_forward(self) -> None:
        """A global forward pre-hook that fires once, at the step's first module call."""
        if self.forward_hook is not None or self.torch is None:
            return
        register = getattr(
            _module("torch.nn.modules.module"), "register_module_forward_pre_hook", None
        )
        if register is None:
            return

        def first_call(module: Any, args: Any) -> None:
            handle, self.forward_hook = self.forward_hook, None
            if handle is not None:
                handle.remove()
            self.mark("fwd_begin")

        self.forward_hook = register(first_call)

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.mark("opt_begin", self.optimizers.setdefault(id(optimizer), len(self.optimizers)))

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        index = self.optimizers.setdefault(id(optimizer), len(self.optimizers))
        self.mark("opt_end", index)
        if index == 0:
            if self.ooms:
                self.steps_after_oom += 1
            self._arm_forward()

    def _hook_steps(self, torch: Any) -> None:
        """Marks of the step's phases: forward (first module call), backward, optimizer."""
        optim = _module("torch.optim.optimizer")
        pre = getattr(optim, "register_optimizer_step_pre_hook", None)
        post = getattr(optim, "register_optimizer_step_post_hook", None)
        if pre is not None and post is not None:
            pre(self._optimizer_pre)
            post(self._optimizer_post)
        autograd: Any = getattr(torch, "autograd", None)
        original = getattr(autograd, "backward", None)
        if original is not None and not getattr(original, "_gh_run_memory", False):

            @functools.wraps(original)
            def backward(*args: Any, **kwargs: Any) -> Any:
                with self.lock:
                    self.backward_depth += 1
                    outer = self.backward_depth == 1
                if outer:
                    self.mark("bwd_begin")
                try:
                    return original(*args, **kwargs)
                finally:
                    with self.lock:
                        self.backward_depth -= 1
                    if outer:
                        self.mark("bwd_end")

            backward._gh_run_memory = True  # type: ignore[attr-defined]
            autograd.backward = backward

    # ---- torch arrives
    def on_torch(self, torch: Any) -> None:
        """torch was imported: recording starts when this process initialises CUDA."""
        self.torch = torch
        lazy = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
        if lazy is None:
            _say("this torch has no torch.cuda._lazy_call; memory is not recorded")
            return
        self._hook_steps(torch)
        lazy(self._start)
        atexit.register(self.at_exit)

    def _start(self) -> None:
        # runs inside torch.cuda's lazy initialisation: an exception here would fail the
        # workload's first CUDA call, so none leaves
        try:
            torch = self.torch
            history = torch.cuda.memory._record_memory_history
            history(
                enabled="all",
                context="all" if self.mode == "snapshot" else None,
                stacks="python",
                max_entries=self.max_events,
            )
            self.started = True
            self.mark("start", self.max_events)
            attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
            if attach is not None:
                attach(self.on_oom)
            else:
                _say("this torch has no out-of-memory observer; an OOM is recorded at exit only")
            if self.dump_at == "profiler-stop":
                self._wrap_profiler_stop(torch)
            self._arm_forward()
        except Exception as exc:  # an old torch, a custom allocator: record nothing
            self.started = False
            _say(f"allocator history could not start ({type(exc).__name__}: {exc})")

    def _wrap_profiler_stop(self, torch: Any) -> None:
        profiler = torch.cuda.profiler
        original = profiler.stop

        @functools.wraps(original)
        def stop(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            if not self.dumped:
                self.mark("window_end")
                self.dump("window-end")
                self.stop_recording()
            return out

        profiler.stop = stop

    def stop_recording(self) -> None:
        """After the window's dump: the rest of the run pays nothing."""
        try:
            self.torch.cuda.memory._record_memory_history(enabled=None)
        except Exception as exc:
            _say(f"allocator history could not be stopped ({type(exc).__name__}: {exc})")
        self.stopped = True

    # ---- out of memory
    def on_oom(self, device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        """PyTorch's out-of-memory observer: called by the allocator before it raises."""
        try:
            self.ooms += 1
            self.mark("oom", int(alloc))
            if self.ooms > 1:
                return
            note = {
                "format": FORMAT,
                "rank": self.rank,
                "pid": os.getpid(),
                "time_us": now_us(),
                "device": int(device),
                "requested_bytes": int(alloc),
                # the observer's own arguments, as PyTorch passes them
                "observer_device_allocated": int(device_allocated),
                "device_free_bytes": int(device_free),
                "devices": self._devices(),
                "steps": self._steps_done(),
            }
            self._write_json(OOM_NOTE_NAME.format(rank=self.rank), note)
            self.dump("oom", oom=note)
            self.oom_dumped = True
        except Exception as exc:
            _say(f"the out-of-memory dump failed ({type(exc).__name__}: {exc})")

    def _steps_done(self) -> int:
        return sum(1 for m in self.marks if m[1] == "opt_end" and m[2] == 0)

    # ---- dumps
    def at_exit(self) -> None:
        if not self.started or self.dumped:
            return
        if self.oom_dumped and self.steps_after_oom == 0:
            return  # the process ends of its out of memory: that dump is the story
        self.mark("exit")
        self.dump("exit")

    def _devices(self) -> list[dict[str, Any]]:
        cuda = self.torch.cuda
        out = []
        for i in range(cuda.device_count()):
            entry: dict[str, Any] = {"index": i}
            try:
                props = cuda.get_device_properties(i)
                entry["name"] = str(props.name)
                entry["total_memory"] = int(props.total_memory)
                fraction = getattr(cuda, "get_per_process_memory_fraction", None)
                if fraction is not None:
                    entry["memory_fraction"] = float(fraction(i))
                stats = cuda.memory_stats(i)
                entry["allocated_bytes"] = int(stats.get("allocated_bytes.all.current", 0))
                entry["reserved_bytes"] = int(stats.get("reserved_bytes.all.current", 0))
                entry["max_allocated_bytes"] = int(stats.get("allocated_bytes.all.peak", 0))
                entry["max_reserved_bytes"] = int(stats.get("reserved_bytes.all.peak", 0))
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
            out.append(entry)
        return out

    def dump(self, reason: str, oom: dict[str, Any] | None = None) -> None:
        """The allocator's snapshot with the marks, written whole or not at all."""
        with self.lock:
            if reason != "oom":
                if self.dumped:
                    return
                self.dumped = True
            began = time.perf_counter()
            try:
                snap = self.torch.cuda.memory._snapshot()
                took = time.perf_counter() - began
                try:
                    import resource

                    max_rss = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
                except Exception:
                    max_rss = None
                snap["gh_run"] = {
                    "format": FORMAT,
                    "reason": reason,
                    "mode": self.mode,
                    "max_events": self.max_events,
                    "rank": self.rank,
                    "local_rank": self.local_rank,
                    "pid": os.getpid(),
                    "time_us": now_us(),
                    "marks": [list(m) for m in self.marks],
                    "devices": self._devices(),
                    "torch": str(getattr(self.torch, "__version__", "")),
                    "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
                    or os.environ.get("PYTORCH_ALLOC_CONF"),
                    "snapshot_seconds": took,
                    "max_rss_bytes": max_rss,
                    "oom": oom,
                    "partition_gpu_bytes": _env_int(ENV_PARTITION),
                }
                name = (OOM_DUMP_NAME if reason == "oom" else DUMP_NAME).format(rank=self.rank)
                self._write(name, lambda fh: pickle.dump(snap, fh, protocol=4))
            except Exception as exc:
                _say(f"the {reason} snapshot failed ({type(exc).__name__}: {exc})")

    def _path(self, name: str) -> str:
        path = os.path.join(self.out_dir, name)
        if os.path.exists(path):  # two processes of one rank: the second keeps its own
            stem, dot, ext = name.rpartition(".")
            path = os.path.join(self.out_dir, f"{stem}.pid{os.getpid()}{dot}{ext}")
        return path

    def _write(self, name: str, write: Any) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        path = self._path(name)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        text = json.dumps(data, indent=1, sort_keys=True).encode()
        self._write(name, lambda fh: fh.write(text))


class _TorchWatcher:
    """A meta-path finder that lets torch import as usual, then hands the module over."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        loader: Any = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec
        recorder = self.recorder

        def exec_module(module: Any) -> None:
            run(module)
            try:
                recorder.on_torch(module)
            except Exception as exc:
                _say(f"not recording ({type(exc).__name__}: {exc})")

        loader.exec_module = exec_module  # this spec's own loader: torch's alone
        return spec


RECORDER: Recorder | None = None


def settings(env: dict[str, str]) -> tuple[str, str, int, str] | None:
    """(mode, folder, max events, when to dump) from the environment; None: not asked."""
    mode = env.get(ENV_MODE, "")
    if mode not in MODES:
        if mode not in ("", "off"):
            _say(f"{ENV_MODE}={mode!r} is not one of {', '.join(MODES)}; not recording")
        return None
    text = env.get(ENV_MAX_EVENTS, "")
    max_events = int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_EVENTS
    dump_at = env.get(ENV_DUMP_AT, "exit")
    return (
        mode,
        env.get(ENV_DIR, "") or os.getcwd(),
        max_events,
        (dump_at if dump_at in DUMP_AT else "exit"),
    )


def install() -> Recorder | None:
    """Called by the loader at interpreter start: watch for torch when the job asked."""
    global RECORDER
    found = settings(dict(os.environ))
    if found is None or RECORDER is not None:
        return RECORDER
    RECORDER = Recorder(*found)
    torch = sys.modules.get("torch")
    if torch is not None:
        RECORDER.on_torch(torch)
    else:
        sys.meta_path.insert(0, _TorchWatcher(RECORDER))
    return RECORDER
