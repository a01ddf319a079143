"""Leaving a finished command line without the interpreter's teardown.

When a command has done its work, Python's own exit still tears down every module and object
it loaded: 40-60 ms of CPU for a process that imported Pydantic, Jinja and Typer (measured with
bench/bench_cli.py: `render`, and even the bare import of those libraries), more than half of
what `render` costs beyond importing them. `leave` does what an exit must (the handlers
registered to run at exit: the SSH connection's close, temporary folders' removal, logging;
whatever was printed, flushed) and ends the process there. Where that cannot be known safe
(a thread still working, an interpreter without the hook) it exits as usual.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def leave(code: int) -> NoReturn:
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    working = [
        t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()
    ]
    if run_exit_handlers is None or working:
        sys.exit(code)
    try:
        run_exit_handlers()
    finally:
        for stream in (sys.stdout, sys.stderr):
            # A reader that went away (`| head`), or a stream already closed: nothing to do.
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
