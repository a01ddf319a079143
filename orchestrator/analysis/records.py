"""A report analysed where it lies: one input's analysis (`FileResult`: its source, the
ranks it claims, the metrics of each entry with what the cross-rank view needs, and what it
records about its capture) written beside it as `<report>.gh-run.json`, and read back in its
place.

A profiled job writes these on the compute nodes (its analysis step, templates/sbatch/
analysis_post.sh.j2); so do the map tasks of `gh-run analyze --on-cluster`. The reduce
(`loader._metrics`: ranks, the cross-rank view, settings, the run's own files) runs wherever
the records are read, on exactly what a local read of the reports would have given it, so the
output is the same byte for byte (tests/integration/test_in_job_analysis.py compares them).

What a record holds is path-free where the reader recomputes a path locally: the input's path
and its run folder's spec.lock.yaml are taken from where the record is read; strings that name
the report's folder (the source, how to open the timeline) name it as the record was written
and are moved to the folder it is read from. A record is used only when it was written by this
gh-run version in this format and, where the report is here too, for a report of its size;
otherwise the report is read again (or, when it is not here, the record's gh-run is named).
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from orchestrator import __version__
from orchestrator.analysis import captures, rank_metrics
from orchestrator.analysis.families import communication
from orchestrator.analysis.metrics import RankMetrics, Source
from orchestrator.analysis.readers.nsys_gpu_metrics import Samples
from orchestrator.analysis.record_files import REPORT_SUFFIXES as REPORT_SUFFIXES
from orchestrator.analysis.record_files import SUFFIX as SUFFIX
from orchestrator.analysis.record_files import is_record as is_record
from orchestrator.analysis.record_files import record_path as record_path
from orchestrator.analysis.record_files import report_of as report_of
from orchestrator.analysis.record_files import reports_in as reports_in
from orchestrator.analysis.timeline import ranks
from orchestrator.analysis.timeline.ranks import rank_from_name
from orchestrator.core.errors import UserError

FORMAT = "gh-run.report-analysis/2"


@dataclass
class FileResult:
    """What one input gives: its source record (rank fields set later), the claims of its
    ranks, per rank the metrics of its entries and the cross-rank inputs, and what it records
    about its capture (`captures.Capture`: which run it belongs to). A record is one of these,
    written down."""

    source: Source
    claims: list[ranks.Claim]
    entries: list[tuple[list[RankMetrics], list[rank_metrics.CrossRankInput]]]
    capture: captures.Capture
    # nsys GPU-metric samples and GPU UUIDs (for ranks whose node's sampler is another report)
    samples: Samples | None = None


def sha256_file(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def encode(result: Any, report: Path, digest: tuple[int, str]) -> bytes:
    """A `FileResult` of `report` as a record."""
    cap: captures.Capture = result.capture
    entries = []
    for rms, crs in result.entries:
        entries.append(
            {
                "ranks": [r.model_dump(mode="json") for r in rms],
                "cross": [
                    {
                        "rank": c.rank,
                        "devices": c.devices,
                        "collectives": _collectives(c.collectives),
                        "steps": [list(s) for s in c.steps],
                    }
                    for c in crs
                ],
            }
        )
    body = {
        "format": FORMAT,
        "gh_run": __version__,
        "report": {"name": report.name, "size": digest[0], "sha256": digest[1]},
        "folder": str(report.parent),
        "source": result.source.model_dump(mode="json"),
        "claims": [
            {
                "by_trace": list(c.by_trace) if c.by_trace else None,
                "process": c.process,
                "processes": c.processes,
            }
            for c in result.claims
        ],
        "entries": entries,
        "capture": {
            "kind": cap.kind,
            "window": list(cap.window) if cap.window else None,
            "host": cap.host,
            "command": list(cap.command) if cap.command is not None else None,
            "job": cap.job,
            "world": list(cap.world) if cap.world else None,
            "ranks": cap.ranks,
            "rank_rule": cap.rank_rule,
        },
    }
    return orjson.dumps(body)


def _collectives(c: communication.Collectives) -> dict[str, Any]:
    """An entry's collectives, compact: they are most of a record, and grow with the trace.
    Starts as their first value and the differences (a few digits each, not 19), ends as
    durations, names as indexes into the distinct names. Exact: integers both ways."""
    start = np.asarray(c.start, dtype=np.int64)
    end = np.asarray(c.end, dtype=np.int64)
    names = sorted(set(c.name))
    index = {n: i for i, n in enumerate(names)}
    return {
        "first": int(start[0]) if start.size else 0,
        "step": np.diff(start).tolist(),
        "dur": (end - start).tolist(),
        "names": names,
        "name": [index[n] for n in c.name],
    }


def _collectives_of(d: dict[str, Any]) -> communication.Collectives:
    n = len(d["name"])
    start = np.empty(n, dtype=np.int64)
    if n:
        start[0] = int(d["first"])
        np.cumsum(np.asarray(d["step"], dtype=np.int64), out=start[1:])
        start[1:] += start[0]
    end = start + np.asarray(d["dur"], dtype=np.int64).reshape(n)
    names = [str(x) for x in d["names"]]
    return communication.Collectives(start, end, [names[int(i)] for i in d["name"]])


class Unusable(Exception):
    """A record that cannot stand for its report here (the reason is the message)."""


def read_raw(record: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(record.read_bytes())
    except (OSError, ValueError) as exc:
        raise Unusable(f"{record}: not readable ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise Unusable(f"{record}: not a {FORMAT} record")
    return data


def usable(report: Path) -> dict[str, Any] | None:
    """The record that may stand for `report` here, or None (then the report is read)."""
    rec = record_path(report)
    if not rec.is_file():
        return None
    try:
        data = read_raw(rec)
    except Unusable:
        return None
    if data.get("gh_run") != __version__:
        if report.is_file():
            return None
        raise UserError(
            f"{rec}: written by gh-run {data.get('gh_run')}, this is {__version__}, and its"
            f" report is not here; `gh-run fetch RUN --reports` brings it, or `gh-run analyze"
            " --on-cluster RUN` analyses it again where it lies"
        )
    if report.is_file():
        with contextlib.suppress(OSError):
            if report.stat().st_size != data["report"]["size"]:
                return None
    return data


def _moved(text: bytes, old: str, new: str) -> bytes:
    """Strings naming the record's folder as written, naming the folder it is read from."""
    if old == new:
        return text
    o, n = orjson.dumps(old.rstrip("/") + "/")[1:-1], orjson.dumps(new.rstrip("/") + "/")[1:-1]
    return text.replace(o, n)


def decode(data: dict[str, Any], report: Path) -> FileResult:
    """A record read back as the `FileResult` a read of `report` gives here."""
    old = str(data["folder"])
    here = str(report.parent)
    raw = orjson.loads(_moved(orjson.dumps(data), old, here)) if old != here else data
    source = Source.model_validate(raw["source"])
    claims = [
        ranks.Claim(
            report,
            (int(c["by_trace"][0]), str(c["by_trace"][1])) if c["by_trace"] else None,
            int(c["process"]),
            int(c["processes"]),
        )
        for c in raw["claims"]
    ]
    entries = []
    for e in raw["entries"]:
        rms = [RankMetrics.model_validate(r) for r in e["ranks"]]
        crs = [
            rank_metrics.CrossRankInput(
                rank=int(c["rank"]),
                devices=[int(d) for d in c["devices"]],
                collectives=_collectives_of(c["collectives"]),
                steps=[(str(n), int(s), int(d)) for n, s, d in c["steps"]],
            )
            for c in e["cross"]
        ]
        entries.append((rms, crs))
    c = raw["capture"]
    capture = captures.Capture(
        path=report,
        kind=str(c["kind"]),
        window=(int(c["window"][0]), int(c["window"][1])) if c["window"] else None,
        host=c["host"],
        command=tuple(c["command"]) if c["command"] is not None else None,
        job={str(k): str(v) for k, v in c["job"].items()},
        world=(int(c["world"][0]), str(c["world"][1])) if c["world"] else None,
        ranks=[int(r) for r in c["ranks"]],
        rank_rule=c["rank_rule"],
    )
    capture.name_rank = rank_from_name(report)
    captures.find_spec(capture, report.parent)
    return FileResult(source, claims, entries, capture)
