"""Reports left on the cluster (`artifacts.reports: leave`): which of a run's files stay where
the job wrote them, and their manifest entries (size and sha256 computed there).

A report stays only when the job analysed it there: its record (`REPORT.gh-run.json`,
orchestrator/analysis/records.py) is among the run's files and comes back in its place. The
.nsys-rep of such an export stays with it. Its sha256 is the one the job computed
when it analysed it (the record's, while the report keeps its size), so collection does not read
the reports again; a .nsys-rep is hashed there. A report without a record (gh-run could not run
on the node, or the analysis failed) comes back as with `fetch`: analysis falls back to this
machine, nothing is lost. `gh-run fetch RUN --reports` brings the left reports later, each
checked against the size and sha256 listed when it was left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from pydantic import field_validator

from orchestrator.core.base import Strict

RECORD_SUFFIX = ".gh-run.json"  # orchestrator.analysis.records.SUFFIX, without its imports
NSYS_REP = ".nsys-rep"

Mode = Literal["fetch", "leave"]
V = TypeVar("V")


class LeftReport(Strict):
    """A report kept on the cluster: its store key, size and sha256 (computed there), and where
    it is there."""

    relpath: str
    size: int
    sha256: str
    source: str

    @field_validator("relpath")
    @classmethod
    def _stays_inside(cls, v: str) -> str:
        from orchestrator.core.relpaths import problem

        why = problem(v)
        if why is not None:
            raise ValueError(why)
        return v


def mode_of(spec_reports: Mode | None, cluster_default: Mode) -> Mode:
    return spec_reports or cluster_default


def split(chosen: Mapping[str, V], mode: Mode) -> tuple[dict[str, V], dict[str, V]]:
    """(brought back, left there) among a run's chosen files (store key -> source): with leave,
    every report whose record is chosen too, and the .nsys-rep of each such export."""
    if mode == "fetch":
        return dict(chosen), {}
    left = {
        key for key in chosen if not key.endswith(RECORD_SUFFIX) and key + RECORD_SUFFIX in chosen
    }
    for key in list(left):
        if key.endswith(".sqlite"):
            rep = key.removesuffix(".sqlite") + NSYS_REP
            if rep in chosen:
                left.add(rep)
    return (
        {k: v for k, v in chosen.items() if k not in left},
        {k: v for k, v in chosen.items() if k in left},
    )


def digest_in_record(record: bytes, size: int) -> str | None:
    """The sha256 the job computed of a report when it analysed it (its record's), when the
    report still has the size it had then; None otherwise (then it is hashed again there). A
    report changed since at the same size is caught when fetched (`mismatches`)."""
    import orjson

    try:
        data = orjson.loads(record)
        rep = data["report"]
        sha = str(rep["sha256"])
        return sha if int(rep["size"]) == size and len(sha) == 64 else None
    except (ValueError, KeyError, TypeError):
        return None


def mismatches(left: list[LeftReport], got: Mapping[str, tuple[int, str]]) -> list[str]:
    """What `fetch --reports` brought that is not what was left (size, sha256)."""
    out = []
    for rep in left:
        now = got.get(rep.relpath)
        if now is None:
            out.append(f"{rep.relpath}: not brought back (gone from {rep.source}?)")
        elif now != (rep.size, rep.sha256):
            out.append(
                f"{rep.relpath}: {now[0]} bytes now, {rep.size} when the job left it; it changed"
                " on the cluster since"
            )
    return out
