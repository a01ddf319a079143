"""Relative paths read from gh-run's own records (a run's manifest.json, the artifact store's
rows, a cluster's file listing) that stay inside the folder they are relative to (issue 42,
class 3): `artifacts/../../x.sqlite` in a manifest made `analyze --on-cluster` read and write
outside the run folder. Such a path is refused where it is read, never joined."""

from __future__ import annotations

from pathlib import PurePosixPath


def inside(rel: str) -> PurePosixPath | None:
    """`rel` as a path that stays inside its folder: relative, no `..`, `.` or empty part, no
    NUL or backslash (another system's separator); None when it is not one."""
    if not isinstance(rel, str) or not rel or "\0" in rel or "\\" in rel:
        return None
    if rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
        return None
    return PurePosixPath(rel)


def problem(rel: str) -> str | None:
    """Why `rel` may not be joined to its folder (None: it stays inside)."""
    if inside(rel) is not None:
        return None
    return f"{rel!r} does not stay inside its folder (absolute, `..`, or an empty part)"
