"""Where a report's analysis record lies: beside the report, as `<report>.gh-run.json`
(`records.py` writes and reads it). Paths only, so that anything that names reports (run
labels, the loader's inputs) finds records without the analysis's imports."""

from __future__ import annotations

from pathlib import Path

SUFFIX = ".gh-run.json"
# Reports a record can stand for: nsys exports and PyTorch-profiler traces (a .nsys-rep is
# read through its export, whose record stands for both).
REPORT_SUFFIXES = (".sqlite", ".json", ".json.gz")
NSYS_REP = ".nsys-rep"


def record_path(report: Path) -> Path:
    return report.with_name(report.name + SUFFIX)


def is_record(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


def report_of(record: Path) -> Path:
    return record.with_name(record.name[: -len(SUFFIX)])


def reports_in(folder: Path) -> list[Path]:
    """The reports a folder's records stand for (whether or not the reports are here)."""
    return sorted(
        report_of(r)
        for r in folder.rglob("*" + SUFFIX)
        if r.is_file() and report_of(r).name.endswith(REPORT_SUFFIXES)
    )


def rep_beside(report: Path) -> Path | None:
    """The .nsys-rep an export was made from, by name (x.sqlite <- x.nsys-rep); None for a
    report that is no export."""
    if not report.name.endswith(".sqlite"):
        return None
    return report.with_name(report.name[: -len(".sqlite")] + NSYS_REP)
