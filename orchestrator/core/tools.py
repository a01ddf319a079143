"""The external programs gh-run runs on this machine, and where it looks for them.

First the PATH, then gh-run's tools prefix: `$GH_RUN_TOOLS` (default /opt/gh-run), where
scripts/install-tools.sh puts the Nsight Systems CLI (`bin/nsys`, `bin/nsys-2022.4`, ...),
Apptainer (`bin/apptainer`, `bin/singularity`) and the test image (`images/`). Only the PATH's
absolute folders count: a relative entry (`.`, `bin`) would find a program in whatever folder
gh-run runs in, e.g. a project just cloned. A program a job file names (`profile.nsys_path`) is
run here only from these places or from a path the site's or user's configuration names
(`runnable`): a project's files are data, never a program to run (issue 42, class 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

DEFAULT_PREFIX = Path("/opt/gh-run")


def tools_prefix() -> Path:
    return Path(os.environ.get("GH_RUN_TOOLS") or DEFAULT_PREFIX)


def search_path() -> str:
    """The PATH's absolute folders (a relative one names the working folder's contents)."""
    parts = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and os.path.isabs(p))


def places() -> list[Path]:
    """The folders gh-run runs programs from: the PATH's absolute ones, then the prefix's bin/."""
    return [*(Path(p) for p in search_path().split(os.pathsep) if p), tools_prefix() / "bin"]


def find(name: str) -> Path | None:
    """`name` on the PATH, else in the tools prefix's bin/; None when neither has it."""
    found = shutil.which(name, path=search_path())
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
    for p in [shutil.which("nsys", path=search_path()), bindir / "nsys", *versioned]:
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


def runnable(program: str, configured: Sequence[str] = ()) -> tuple[Path | None, str]:
    """The file gh-run would run here for `program` (a name, or an absolute path), or None and
    why not: a name is looked for in `places()`; a path is run only when it lies in one of
    them (the folder it is named in) or is one that `configured` names (paths the site's or the
    user's own configuration gives, e.g. a site cluster file's `nsys.path`)."""
    if not program.startswith("/"):
        found = find(program) if "/" not in program else None
        if found is None:
            return None, f"no {program} on the PATH or in {tools_prefix() / 'bin'}"
        return found, str(found)
    path = Path(program)
    if not path.is_file():
        return None, f"no {program} on this machine"
    # the folder it is named in (a link there is the folder owner's choice, as the PATH's are)
    allowed = {p.resolve() for p in places() if p.is_dir()}
    if path.parent.resolve() in allowed or any(
        Path(c).resolve() == path.resolve() for c in configured if c
    ):
        return path, str(path)
    return None, (
        f"{program} is not in a folder gh-run runs programs from (the PATH's folders, "
        f"{tools_prefix() / 'bin'}) nor the path the site's or your cluster file names, so it"
        " was not run"
    )


def output_of(argv: list[str], timeout: float = 20.0) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a short command; 127 when it cannot be started."""
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, errors="replace"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return res.returncode, res.stdout + res.stderr
