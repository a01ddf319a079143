"""A pickle read as plain data, never as code: PyTorch's memory snapshot is a pickle
(`torch.cuda.memory._dump_snapshot`), and a file a job wrote is evidence to check, not a program
to run.

- Only the opcodes that build plain data do anything: the unpickler's `find_class` refuses every
  global (so no class is made, no function is called: `REDUCE`, `BUILD`, `NEWOBJ`, `INST` and
  `OBJ` all need one), `persistent_load` refuses every persistent id, and an extension code has
  no registry entry. A real snapshot holds dicts, lists, tuples, strings, numbers, booleans and
  None; what else a pickle asks for is refused in one sentence.
- Bounded: the file's size against a ceiling before anything is read (`max_bytes`: pickles
  build at most about a dozen bytes of objects per byte of file, so the ceiling bounds the
  memory), the whole file one pickle (bytes after its end are refused), and what is built is
  walked by the snapshot reader at fixed depth, each list capped (`torch_snapshot`).
- The C unpickler does the work (`pickle.Unpickler` subclassed only in `find_class` and
  `persistent_load`), with the cycle collector paused (`no_gc`): a million events load faster
  than `pickle.load` does with it running (bench/bench_memory_snapshot.py).
"""

from __future__ import annotations

import contextlib
import gc
import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.core.errors import UserError

DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB: a snapshot of ~30 M events with stacks


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cycle collector paused while millions of containers are built: it would walk the
    growing heap again and again (pickle.load of a million events spends most of its time
    there); plain data has no cycles to collect. Restored as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _PlainData(pickle.Unpickler):
    """An unpickler that builds plain data only."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it asks for {module}.{name}, which is code, not data")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it refers to an object outside the file (a persistent id)")


def load(path: Path, max_bytes: int | None = None, what: str = "memory snapshot") -> Any:
    """The plain data in a pickle file, or a UserError that says in one sentence why not."""
    ceiling = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror}); pass a readable file") from None
    if size > ceiling:
        raise UserError(
            f"{path}: {size} bytes, over the {ceiling}-byte ceiling for a {what}; raise it with"
            " --max-trace-size, or record fewer events (profile.memory_max_events)"
        )
    try:
        raw = path.read_bytes()  # under the ceiling; the C unpickler reads memory fastest
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror}); pass a readable file") from None
    try:
        with no_gc():
            fh = io.BytesIO(raw)
            # the unpickler stops right after the pickle's STOP (pickles may follow one another
            # in a file): what is left is not part of it
            data = _PlainData(fh).load()
            rest = fh.tell() < len(raw)
    except pickle.UnpicklingError as exc:
        raise UserError(f"{path}: refused as a {what}: {_why(exc)}") from None
    except EOFError:
        raise UserError(
            f"{path}: refused as a {what}: the pickle ends early (a truncated file); take the"
            " snapshot again"
        ) from None
    except MemoryError:
        raise UserError(f"{path}: refused as a {what}: it builds more than memory holds") from None
    except RecursionError:
        raise UserError(f"{path}: refused as a {what}: it nests deeper than data does") from None
    except Exception as exc:  # any other malformed opcode stream: not a pickle of plain data
        raise UserError(f"{path}: refused as a {what}: {_why(exc)}") from None
    if rest:
        raise UserError(
            f"{path}: refused as a {what}: bytes follow the pickle's end (not one snapshot)"
        )
    return data


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    if "asks for" in text or "persistent id" in text:
        return text + "; gh-run reads snapshots as plain data only"
    return f"not a pickle of plain data ({text})"
