"""Finding and loading gh-run's compiled parts (setup.py builds them beside this file as
optional extensions; each is loaded with ctypes and each has a Python path that serves without
it). GH_RUN_NO_NATIVE_SCAN=1 turns all of them off: what a machine without a C compiler runs."""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
from pathlib import Path


def library_path(stem: str) -> Path | None:
    """The built extension `stem` (e.g. "_kineto_scan") beside this file, if the install built
    it."""
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        f = here / f"{stem}{suffix}"
        if f.is_file():
            return f
    return None


def load(stem: str) -> ctypes.CDLL | None:
    """The built extension `stem`, loaded; None when it is not built, does not load, or
    GH_RUN_NO_NATIVE_SCAN is set."""
    f = library_path(stem)
    if f is None or os.environ.get("GH_RUN_NO_NATIVE_SCAN"):
        return None
    try:
        return ctypes.CDLL(str(f))
    except OSError:
        return None
