"""A `.nsys-rep` into the SQLite export the readers take, with this machine's nsys, once.

`sqlite_for(report)` returns, in this order:
1. the export beside the report (`NAME.sqlite`, what the job's own post-processing writes) when
   it is complete (it has the export-metadata table);
2. an export made earlier by gh-run, under the same rules (beside the report when its folder is
   writable, else in `$GH_RUN_HOME/cache/nsys-export/`);
3. a new export: `nsys export --type=sqlite` with the newest local nsys first (an older nsys
   cannot read a newer report: 2022.4 refuses 2023.4's with "Version number is invalid"),
   written under a temporary name and renamed, so a half-written file is never read.
Without any nsys it refuses in one sentence that says what to install or which export to bring.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

# nsys_versions and tools (and hashlib, tempfile) are imported where a report is exported:
# `analyze` of a trace or of an export imports this module for SUFFIX alone.
from orchestrator.core import tools
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.core.paths import gh_run_home

if TYPE_CHECKING:
    from orchestrator.nsys import versions as nv

SUFFIX = ".nsys-rep"


def _complete(sqlite: Path) -> bool:
    """A finished export: it has the export-metadata table, which nsys writes last. (Not
    compared by time with the report: collecting copies both, in either order.)"""
    try:
        conn = sqlite3.connect(f"file:{sqlite.resolve()}?mode=ro", uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except (OSError, sqlite3.DatabaseError):
        return False
    from orchestrator.nsys import versions as nv

    return any(t in names for t in nv.EXPORT_META_TABLES)


def _cache_path(report: Path) -> Path:
    import hashlib

    home = gh_run_home(None)
    key = hashlib.sha256(str(report.resolve()).encode()).hexdigest()[:16]
    return home / "cache" / "nsys-export" / key / (report.name[: -len(SUFFIX)] + ".sqlite")


def _newest_first(programs: list[Path]) -> list[tuple[Path, str]]:
    from orchestrator.nsys import versions as nv

    found: list[tuple[nv.NsysVersion, Path, str]] = []
    for p in programs:
        rc, text = tools.output_of([str(p), "--version"])
        try:
            v = nv.NsysVersion.parse(text) if rc == 0 else None
        except ValueError:
            v = None
        if v is not None:
            found.append((v, p, str(v)))
    found.sort(key=lambda t: t[0], reverse=True)
    return [(p, s) for _, p, s in found]


def sqlite_for(report: Path) -> Path:
    """The SQLite export of `report`, reused or made (see the module docstring)."""
    if not report.is_file():
        raise UserError(f"{report}: no such file; pass an existing .nsys-rep")
    beside = report.with_name(report.name[: -len(SUFFIX)] + ".sqlite")
    cached = _cache_path(report)
    for candidate in (beside, cached):
        if candidate.is_file() and _complete(candidate):
            return candidate
    programs = _newest_first(tools.nsys_programs())
    if not programs:
        raise UserError(
            f"{report}: reading a .nsys-rep needs the Nsight Systems CLI to export it, and this "
            f"machine has no nsys (on PATH or in {tools.tools_prefix()}/bin); install it "
            f"(bash scripts/install-nsys.sh) or bring the job's export {beside.name} beside it"
        )
    target = beside if os.access(report.parent, os.W_OK) else cached
    target.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    import tempfile

    for program, version in programs:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.stem}.", suffix=".sqlite", dir=target.parent
        )
        os.close(fd)
        tmp = Path(tmp_name)
        rc, text = tools.output_of(
            [
                str(program),
                "export",
                "--type=sqlite",
                f"--output={tmp}",
                "--force-overwrite=true",
                str(report),
            ],
            timeout=1800,
        )
        if rc == 0 and _complete(tmp):
            tmp.replace(target)
            return target
        tmp.unlink(missing_ok=True)
        last = [line for line in text.splitlines() if line.strip() and "%" not in line][-1:]
        errors.append(f"nsys {version}: {last[0].strip() if last else f'exit {rc}'}")
    raise RuntimeFailure(
        f"{report}: no local nsys could export it ({'; '.join(errors)}); a report from a newer "
        "nsys needs that nsys or newer, or bring the job's export "
        f"{beside.name} beside it"
    )
