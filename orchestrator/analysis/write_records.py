"""`--write-records`: each report analysed and its record written beside it, atomically
(records.py: what a record holds and how it is read back). Above the loader, which reads
records in place of their reports."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from orchestrator.analysis import loader
from orchestrator.analysis.record_files import record_path, rep_beside
from orchestrator.analysis.records import encode, sha256_file
from orchestrator.core.errors import UserError


def write(report: Path, max_trace_bytes: int | None = None) -> Path:
    """Analyse one report and write its record beside it (atomically), with the sha256 of the
    report (and of the .nsys-rep it was exported from, when that is beside it) as read here."""
    result = loader.analyze_file(report, max_trace_bytes)
    rep = rep_beside(report)
    rep_digest = None
    if rep is not None and rep.is_file():
        rep_digest = (rep.name, *sha256_file(rep))
    data = encode(result, report, sha256_file(report), rep_digest)
    dest = record_path(report)
    fd, tmp = tempfile.mkstemp(dir=report.parent, prefix=f".{dest.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return dest


def reports_to_record(paths: list[Path]) -> list[Path]:
    """The reports here among files and folders: nsys exports and PyTorch-profiler traces (a
    .nsys-rep through the export beside it, when there is one)."""
    out = []
    for f in loader.expand(paths):
        if not f.is_file():
            continue  # a report elsewhere, known here only by its record
        if loader._kind(f) == "nsys-rep":
            export = loader._export_of(f)
            if not export.is_file():
                raise UserError(
                    f"{f}: no SQLite export beside it; export it first (`nsys export --type"
                    f" sqlite --output={export} {f}`)"
                )
            f = export
        out.append(f)
    return out


def write_many(paths: list[Path], max_trace_bytes: int | None = None) -> int:
    """Write the record of every report among `paths` (`--write-records`); a report that cannot
    be analysed is named with why, and the others are still written. Returns the exit code."""
    import sys

    from orchestrator.core.errors import GhRunError

    failed = 0
    for f in reports_to_record(paths):
        try:
            print(write(f, max_trace_bytes), flush=True)
        except (GhRunError, OSError, ValueError) as exc:
            print(f"gh-run: {f}: not analysed: {exc}", file=sys.stderr, flush=True)
            failed = 1
    return failed
