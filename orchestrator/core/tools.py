"""The external programs gh-run runs on this machine, and where it looks for them.

First the PATH, then gh-run's tools prefix: `$GH_RUN_TOOLS` (default /opt/gh-run), where
scripts/install-tools.sh puts the Nsight Systems CLI (`bin/nsys`, `bin/nsys-2022.4`, ...),
Apptainer (`bin/apptainer`, `bin/singularity`) and the test image (`images/`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DEFAULT_PREFIX = Path("/opt/gh-run")


def tools_prefix() -> Path:
    return Path(os.environ.get("GH_RUN_TOOLS") or DEFAULT_PREFIX)


def find(name: str) -> Path | None:
    """`name` on the PATH, else in the tools prefix's bin/; None when neither has it."""
    found = shutil.which(name)
    if found:
        return Path(found)
    candidate = tools_prefix() / "bin" / name
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def nsys_programs() -> list[Path]:
    """Every nsys this machine has: the one on the PATH, the prefix's `nsys` and its versioned
    `nsys-YYYY.N` siblings; one entry per real program."""
    out: list[Path] = []
    seen: set[Path] = set()
    bindir = tools_prefix() / "bin"
    versioned = sorted(bindir.glob("nsys-20*")) if bindir.is_dir() else []
    for p in [shutil.which("nsys"), bindir / "nsys", *versioned]:
        if p is None:
            continue
        path = Path(p)
        if not (path.is_file() and os.access(path, os.X_OK)):
            continue
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out


def output_of(argv: list[str], timeout: float = 20.0) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a short command; 127 when it cannot be started."""
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, errors="replace"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return res.returncode, res.stdout + res.stderr
