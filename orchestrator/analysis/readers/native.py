"""Finding and loading gh-run's compiled parts (setup.py builds them beside this file as
optional extensions; each is loaded with ctypes and each has a Python path that serves without
it). GH_RUN_NO_NATIVE_SCAN=1 turns all of them off: what a machine without a C compiler runs.

Each reader declares its C functions' signatures as data (`Signature`), applied here when the
library loads: tests/unit/test_native_boundary.py compares every one with the C prototype
(argument count, order, widths, signedness, pointers), since ctypes trusts them blindly.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Signature:
    """A C function as ctypes must call it: its return type and its argument types, in order
    (ctypes types, or numpy's `ndpointer` classes)."""

    restype: Any
    argtypes: tuple[Any, ...]


def library_path(stem: str) -> Path | None:
    """The built extension `stem` (e.g. "_kineto_scan") beside this file, if the install built
    it."""
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        f = here / f"{stem}{suffix}"
        if f.is_file():
            return f
    return None


def load(stem: str, signatures: Mapping[str, Signature]) -> ctypes.CDLL | None:
    """The built extension `stem`, loaded, each function of `signatures` declared; None when it
    is not built, does not load (or lacks a declared function), or GH_RUN_NO_NATIVE_SCAN is
    set."""
    f = library_path(stem)
    if f is None or os.environ.get("GH_RUN_NO_NATIVE_SCAN"):
        return None
    try:
        lib = ctypes.CDLL(str(f))
        for name, sig in signatures.items():
            fn = getattr(lib, name)
            fn.restype = sig.restype
            fn.argtypes = list(sig.argtypes)
    except (OSError, AttributeError):  # a stale build without a function: the Python path
        return None
    return lib
