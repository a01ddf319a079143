"""A report analysed where it lies: one input's analysis (`FileResult`: its source, the
ranks it claims, the metrics of each entry with what the cross-rank view needs, and what it
records about its capture) written beside it as `<report>.gh-run.json` (`record_files`:
where; `write_records`: the writing), and read back in its place.

A profiled job writes these on the compute nodes (its analysis step, templates/sbatch/
analysis_post.sh.j2); so do the map tasks of `gh-run analyze --on-cluster`. The reduce
(`loader._metrics`: ranks, the cross-rank view, settings, the run's own files) runs wherever
the records are read, on exactly what a local read of the reports would have given it, so the
output is the same byte for byte (tests/integration/test_in_job_analysis.py compares them).

What a record holds is path-free where the reader recomputes a path locally: the input's path
and its run folder's spec.lock.yaml are taken from where the record is read; strings that name
the report's folder (the source, how to open the timeline) name it as the record was written
and are moved to the folder it is read from.

A record is evidence about one file, and must prove it (issue 42, class 3). It carries the
sha256 of its report (and of the .nsys-rep the export came from, when one was beside it),
computed where it was written; it stands for a report here only when:
- it was written by this gh-run version in this format, for a report of this name;
- it is owned by the report's owner (by a user gh-run trusts when the report is not here);
- the report here has that sha256 (`report_digest`: cached by the file's size, times and
  inode, so reading a folder of records again costs one `fstat` per report);
- where the export is not here but its .nsys-rep is, the .nsys-rep has the sha256 the record
  names for it;
- it reads whole as a record (a damaged one is never a traceback).
Otherwise the report is read here, and the analysis says why the record was not used (a note
of its source); with the report not here either, one sentence names the record and the fix.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from orchestrator import __version__
from orchestrator.analysis import captures, rank_metrics, report_digest
from orchestrator.analysis.families import communication
from orchestrator.analysis.metrics import RankMetrics, Source
from orchestrator.analysis.readers.nsys_gpu_metrics import Samples
from orchestrator.analysis.record_files import NSYS_REP as NSYS_REP
from orchestrator.analysis.record_files import REPORT_SUFFIXES as REPORT_SUFFIXES
from orchestrator.analysis.record_files import SUFFIX as SUFFIX
from orchestrator.analysis.record_files import is_record as is_record
from orchestrator.analysis.record_files import record_path as record_path
from orchestrator.analysis.record_files import rep_beside as rep_beside
from orchestrator.analysis.record_files import report_of as report_of
from orchestrator.analysis.record_files import reports_in as reports_in
from orchestrator.analysis.timeline import ranks
from orchestrator.analysis.timeline.ranks import rank_from_name
from orchestrator.core.errors import UserError

FORMAT = "gh-run.report-analysis/2"
# A record is a few megabytes at most (its collectives grow with the trace); a file far past
# this beside a report is not one gh-run wrote.
MAX_RECORD_BYTES = 256 << 20


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
    st, digest = report_digest.of_path(path)
    return st.st_size, digest


def encode(
    result: FileResult,
    report: Path,
    digest: tuple[int, str],
    rep: tuple[str, int, str] | None = None,
) -> bytes:
    """A `FileResult` of `report` as a record; `rep`: the name, size and sha256 of the
    .nsys-rep the export was made from, when it is beside it."""
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
        "rep": {"name": rep[0], "size": rep[1], "sha256": rep[2]} if rep else None,
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
    name = _list(d.get("name"), "collectives.name")
    names = [str(x) for x in _list(d.get("names"), "collectives.names")]
    n = len(name)
    step = _list(d.get("step"), "collectives.step", max(n - 1, 0))
    dur = _list(d.get("dur"), "collectives.dur", n)
    start = np.empty(n, dtype=np.int64)
    if n:
        start[0] = _int(d.get("first"), "collectives.first")
        np.cumsum(np.asarray(step, dtype=np.int64), out=start[1:])
        start[1:] += start[0]
    end = start + np.asarray(dur, dtype=np.int64).reshape(n)
    picked = []
    for i in name:
        k = _int(i, "collectives.name", 0)
        if k >= len(names):
            raise Damaged(f"collectives.name {k} names none of {len(names)} names")
        picked.append(names[k])
    return communication.Collectives(start, end, picked)


class Unusable(Exception):
    """A record that cannot stand for its report here (the reason is the message)."""


def read_raw(record: Path) -> dict[str, Any]:
    """A record's contents, read without following a link and bounded in size."""
    data, _ = _read_record(record)
    return data


def _read_record(record: Path) -> tuple[dict[str, Any], os.stat_result]:
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise Unusable(f"not readable ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unusable("not a regular file")
        if st.st_size > MAX_RECORD_BYTES:
            raise Unusable(f"larger than {MAX_RECORD_BYTES >> 20} MiB, not a record gh-run wrote")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = orjson.loads(raw)
    except ValueError as exc:
        raise Unusable(f"not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise Unusable(f"not a {FORMAT} record")
    return data, st


@dataclass(frozen=True)
class Checked:
    """What a report's record may do here: `data`, the record to read in the report's place;
    or `why` it may not (the report is then read, and its analysis says why); both None when
    there is no record."""

    data: dict[str, Any] | None = None
    why: str | None = None


def _digest_of(entry: Any) -> tuple[str, int, str] | None:
    if not isinstance(entry, dict):
        return None
    name, size, sha = entry.get("name"), entry.get("size"), entry.get("sha256")
    if isinstance(name, str) and isinstance(size, int) and isinstance(sha, str) and len(sha) == 64:
        return name, size, sha
    return None


def _same_content(path: Path, want: tuple[str, int, str], what: str) -> str | None:
    """Why `path` is not the file the record names (None: it is)."""
    if path.name != want[0]:
        return f"it was written for {want[0]!r}, not {path.name!r}"
    try:
        st, digest = report_digest.of_path(path)
    except OSError as exc:
        return f"the {what} cannot be read to check it ({exc})"
    if st.st_size != want[1]:
        return f"the {what} has {st.st_size} bytes, the record was made from {want[1]}"
    if digest != want[2]:
        return f"the {what}'s content (sha256) is not the one the record was made from"
    return None


def check(report: Path) -> Checked:
    """May the record beside `report` stand for it here? (See the module docstring.)"""
    from orchestrator.core import trust

    rec = record_path(report)
    if not rec.exists() and not rec.is_symlink():
        return Checked()
    try:
        data, rst = _read_record(rec)
        if not isinstance(data.get("gh_run"), str):
            raise Unusable("it names no gh-run version")
    except Unusable as exc:
        if not report.exists():
            raise UserError(
                f"{rec}: {exc}, and its report is not here; remove the record, or bring the "
                "report (`gh-run fetch RUN --reports`)"
            ) from None
        return Checked(why=f"{rec.name} not used: {exc}")
    if data.get("gh_run") != __version__:
        if report.is_file():
            return Checked(why=f"{rec.name} not used: written by gh-run {data.get('gh_run')}")
        raise UserError(
            f"{rec}: written by gh-run {data.get('gh_run')}, this is {__version__}, and its"
            f" report is not here; `gh-run fetch RUN --reports` brings it, or `gh-run analyze"
            " --on-cluster RUN` analyses it again where it lies"
        )
    want = _digest_of(data.get("report"))
    why: str | None = None
    if want is None:
        why = "it names no sha256 of its report"
    elif report.is_file():
        owner = report.stat().st_uid
        if rst.st_uid != owner:
            why = (
                f"it is owned by {trust.owner_name(rst.st_uid)}, the report by "
                f"{trust.owner_name(owner)}"
            )
        else:
            why = _same_content(report, want, "report")
    else:
        if rst.st_uid not in trust.trusted_uids():
            why = f"it is owned by {trust.owner_name(rst.st_uid)} and its report is not here"
        else:
            rep = rep_beside(report)
            if rep is not None and rep.is_file():
                vouched = _digest_of(data.get("rep"))
                if vouched is None:
                    why = f"it names no sha256 of {rep.name}, which is here without its export"
                else:
                    why = _same_content(rep, vouched, rep.name)
    if why is None:
        return Checked(data=data)
    if not report.is_file() and not _rep_here(report):
        raise UserError(
            f"{rec}: not used ({why}), and its report is not here; remove the record, or "
            "bring the report (`gh-run fetch RUN --reports`)"
        )
    return Checked(why=f"{rec.name} not used: {why}")


def _rep_here(report: Path) -> bool:
    rep = rep_beside(report)
    return rep is not None and rep.is_file()


def usable(report: Path) -> dict[str, Any] | None:
    """The record that may stand for `report` here, or None (then the report is read)."""
    return check(report).data


def _moved(text: bytes, old: str, new: str) -> bytes:
    """Strings naming the record's folder as written, naming the folder it is read from."""
    if old == new:
        return text
    o, n = orjson.dumps(old.rstrip("/") + "/")[1:-1], orjson.dumps(new.rstrip("/") + "/")[1:-1]
    return text.replace(o, n)


class Damaged(ValueError):
    """A record whose contents are not what gh-run writes (the reason is the message)."""


_I64 = (-(1 << 63), (1 << 63) - 1)


def _int(v: Any, what: str, lo: int = _I64[0]) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= _I64[1]:
        raise Damaged(f"{what} is {str(v)[:40]!r}, not an integer of 64 bits")
    return v


def _list(v: Any, what: str, n: int | None = None) -> list[Any]:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise Damaged(f"{what} is not a list" + (f" of {n}" if n is not None else ""))
    return v


def _dict(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise Damaged(f"{what} is not a mapping")
    return v


def _opt_str(v: Any, what: str) -> str | None:
    if v is not None and not isinstance(v, str):
        raise Damaged(f"{what} is not text")
    return v


def decode(data: dict[str, Any], report: Path) -> FileResult:
    """A record read back as the `FileResult` a read of `report` gives here. Every
    field is checked for the type and shape gh-run writes (`Damaged` otherwise: the report is
    then read instead): a record is read as evidence, never trusted to be well formed."""
    old = _opt_str(data.get("folder"), "folder")
    if old is None:
        raise Damaged("it names no folder")
    here = str(report.parent)
    raw = orjson.loads(_moved(orjson.dumps(data), old, here)) if old != here else data
    source = Source.model_validate(raw.get("source"))
    claims = []
    for c in _list(raw.get("claims"), "claims"):
        c = _dict(c, "a claim")
        by = c.get("by_trace")
        processes = _int(c.get("processes"), "claims.processes", 1)
        process = _int(c.get("process"), "claims.process", 0)
        if process >= processes:
            raise Damaged(f"claims.process {process} is not below processes {processes}")
        if by is not None:
            by = _list(by, "claims.by_trace", 2)
            if not isinstance(by[1], str):
                raise Damaged("claims.by_trace names no rule")
        trace = (_int(by[0], "claims.by_trace", 0), by[1]) if by else None
        claims.append(ranks.Claim(report, trace, process, processes))
    entries = []
    for e in _list(raw.get("entries"), "entries"):
        e = _dict(e, "an entry")
        rms = [RankMetrics.model_validate(r) for r in _list(e.get("ranks"), "entries.ranks")]
        crs = []
        for c in _list(e.get("cross"), "entries.cross", len(rms)):
            c = _dict(c, "entries.cross")
            steps = []
            for st in _list(c.get("steps"), "cross.steps"):
                n, s0, d0 = _list(st, "a step", 3)
                if not isinstance(n, str):
                    raise Damaged("a step's name is not text")
                steps.append((n, _int(s0, "a step's start"), _int(d0, "a step's duration")))
            crs.append(
                rank_metrics.CrossRankInput(
                    rank=_int(c.get("rank"), "cross.rank"),
                    devices=[_int(d, "cross.devices") for d in _list(c.get("devices"), "devices")],
                    collectives=_collectives_of(_dict(c.get("collectives"), "collectives")),
                    steps=steps,
                )
            )
        entries.append((rms, crs))
    if len(claims) != len(entries):
        raise Damaged(f"{len(claims)} claims for {len(entries)} entries")
    c = _dict(raw.get("capture"), "capture")
    window = c.get("window")
    world = c.get("world")
    command = c.get("command")
    if world is not None and not isinstance(_list(world, "capture.world", 2)[1], str):
        raise Damaged("capture.world names no rule")
    if command is not None and not all(isinstance(w, str) for w in _list(command, "command")):
        raise Damaged("capture.command holds what is not text")
    capture = captures.Capture(
        path=report,
        kind=str(c.get("kind")),
        window=(
            (_int(window[0], "window"), _int(window[1], "window"))
            if window is not None and _list(window, "capture.window", 2)
            else None
        ),
        host=_opt_str(c.get("host"), "capture.host"),
        command=tuple(command) if command is not None else None,
        job={str(k): str(v) for k, v in _dict(c.get("job"), "capture.job").items()},
        world=(_int(world[0], "capture.world", 0), world[1]) if world else None,
        ranks=[_int(r, "capture.ranks") for r in _list(c.get("ranks"), "capture.ranks")],
        rank_rule=_opt_str(c.get("rank_rule"), "capture.rank_rule"),
    )
    capture.name_rank = rank_from_name(report)
    captures.find_spec(capture, report.parent)
    return FileResult(source, claims, entries, capture)
