"""Ask an nsys binary what it takes (`nsys_versions.Capabilities`), once per binary.

Three questions, each a few hundred milliseconds: `--version`, `profile --help` (its long
options and `--trace` APIs), `export --help` (its `--type` values) and `stats --help-reports`
(its reports; it exits 1 after listing them, so the list is the answer, whatever the status).
The answers are cached in `$GH_RUN_HOME/cache/nsys-probe/`, keyed by the program's real path,
size and modification time (an upgraded nsys in the same place is asked again), or, for an nsys
inside an image (`argv` prefix: `apptainer exec IMAGE`), by the image's path, size and time.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from orchestrator.core import tools
from orchestrator.core.paths import gh_run_home
from orchestrator.nsys import versions as nv


def _key(path: str, prefix: list[str]) -> str | None:
    """The cache key of one nsys (None: its files cannot be seen from here)."""
    parts = [*prefix, path]
    seen = [Path(path)] if not prefix else [Path(p) for p in prefix if p.endswith(".sif")]
    stamps = []
    for p in seen:
        try:
            st = p.resolve().stat()
        except OSError:
            return None
        stamps.append(f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\0".join(parts + stamps).encode()).hexdigest()[:24]


def _cache_dir() -> Path:
    return gh_run_home(None) / "cache" / "nsys-probe"


def probe(path: str, prefix: list[str] | None = None) -> nv.Capabilities | None:
    """What the nsys at `path` (run through `prefix`, e.g. a container's exec argv) answers
    about itself; None when it does not answer `--version` with a version."""
    prefix = prefix or []
    key = _key(path, prefix)
    cached = _cache_dir() / f"{key}.json" if key else None
    if cached is not None and cached.is_file():
        try:
            return nv.Capabilities.model_validate_json(cached.read_text())
        except ValueError:
            pass  # a damaged cache entry is asked again
    argv = [*prefix, path]
    rc, text = tools.output_of([*argv, "--version"], timeout=60)
    try:
        version = nv.NsysVersion.parse(text) if rc == 0 else None
    except ValueError:
        version = None
    if version is None:
        return None
    _, profile_help = tools.output_of([*argv, "profile", "--help"], timeout=60)
    _, export_help = tools.output_of([*argv, "export", "--help"], timeout=60)
    _, reports = tools.output_of([*argv, "stats", "--help-reports"], timeout=60)
    options, apis = nv.parse_profile_help(profile_help)
    caps = nv.Capabilities(
        version=str(version),
        options=options,
        trace_apis=apis,
        export_types=nv.parse_export_types(export_help),
        reports=nv.parse_reports(reports),
        help=nv.parse_option_help(profile_help),
    )
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(caps.model_dump(), indent=1))
            tmp.replace(cached)
        except OSError:
            pass  # a home that cannot be written: asked again next time
    return caps


def cached_for(version: nv.NsysVersion) -> nv.Capabilities | None:
    """The answers of a binary of exactly this version probed earlier on this machine (the
    newest entry), or None."""
    folder = _cache_dir()
    if not folder.is_dir():
        return None
    found: list[tuple[float, nv.Capabilities]] = []
    for f in folder.glob("*.json"):
        try:
            caps = nv.Capabilities.model_validate_json(f.read_text())
            got = nv.NsysVersion.parse(caps.version)
            when = f.stat().st_mtime
        except (OSError, ValueError):
            continue
        # a version written YEAR.MINOR matches any release of it
        same = got == version or (
            version.patch is None and (got.year, got.minor) == (version.year, version.minor)
        )
        if same:
            found.append((when, caps))
    return max(found, key=lambda t: t[0])[1] if found else None
