"""Collecting what a run produced into the artifact store, verified and bounded.

An artifact counts as collected only after it was copied to the store, read back whole, and
its size and sha256 matched the source: then it is recorded in the run's `manifest.json` and
in the state store. Sources are never modified.

What a job left behind is not trusted:
- every source is opened without following links, on every path component below the run
  folder (`open_beneath`: O_NOFOLLOW), and the opened file itself is checked (fstat: a regular
  file); all reads go through that one descriptor, so a job still running cannot swap a file
  for a link between a check and the open;
- a file over the per-file limit, or one that would take the run past its per-run limit, is
  refused and listed, never copied (`SizeLimits`; site defaults in the cluster file's
  `artifacts:`, flags on `gh-run fetch`);
- holes of sparse files are kept (SEEK_DATA/SEEK_HOLE), so a sparse file costs in the store
  what it costs at the source;
- concurrent collections of one run each copy through a temporary file of their own.

The pieces a transport (such as SSH) needs are separate: `SizeLimits.check`, `Digest`,
`digest_fd`, `copy_verified_fd`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.artifacts.left_reports import (
    RECORD_SUFFIX,
    LeftReport,
    Mode,
    digest_in_record,
    mismatches,
    split,
)
from orchestrator.artifacts.secret_scrub import ATTESTATION
from orchestrator.core.base import Strict
from orchestrator.core.errors import RuntimeFailure
from orchestrator.core.memory_files import MEMORY_DIR, is_memory_file
from orchestrator.core.relpaths import inside
from orchestrator.site.limits import SizeLimits as SizeLimits  # re-exported: its old home
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import ArtifactRecord, Run, Store

CHUNK = 1 << 20


class Refusal(Strict):
    path: str
    reason: str


class Manifest(Strict):
    run_id: str
    collected_at: float
    files: list[ArtifactRecord]
    refused: list[Refusal]
    # reports kept on the cluster (artifacts.reports: leave), size and sha256 computed there
    left: list[LeftReport] = []
    # what collection did besides copying (a job with secrets: its folder cleaned here)
    notes: list[str] = []


@dataclass(frozen=True)
class Digest:
    size: int
    sha256: str


class SourceRefused(Exception):
    """A source that must not be read (a link, not a regular file); the reason is the text."""


def digest_fd(fd: int) -> Digest:
    """Size and sha256 of everything an open file holds, read through this descriptor."""
    h = hashlib.sha256()
    size = 0
    while chunk := os.pread(fd, CHUNK, size):
        h.update(chunk)
        size += len(chunk)
    return Digest(size, h.hexdigest())


def sha256_of(path: Path) -> tuple[int, str]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        d = digest_fd(fd)
    finally:
        os.close(fd)
    return d.size, d.sha256


@contextlib.contextmanager
def open_beneath(root: Path, rel: Path) -> Iterator[tuple[int, os.stat_result]]:
    """Open `root/rel` for reading without following a link on any component below `root`,
    and check what was opened is a regular file; yields (fd, its stat)."""
    parts = rel.parts
    if not parts or any(p in ("", ".", "..") for p in parts) or rel.is_absolute():
        raise SourceRefused("a path outside the run folder")
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fds: list[int] = []
    try:
        fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
        for part in parts[:-1]:
            fds.append(os.open(part, dir_flags, dir_fd=fds[-1]))
        # O_NONBLOCK: a FIFO planted by the job must not hang the open.
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1])
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SourceRefused("a symbolic link (links are never followed)") from None
        raise
    finally:
        for d in fds:
            os.close(d)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceRefused("not a regular file")
        os.set_blocking(fd, True)
        yield fd, st
    finally:
        os.close(fd)


def _data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the regions holding data; the rest are holes. A file system without
    SEEK_DATA reports all of it as data."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                return
            if exc.errno == errno.EINVAL:
                yield pos, size
                return
            raise
        end = min(size, os.lseek(fd, start, os.SEEK_HOLE))
        yield start, end
        pos = end


def copy_data(fin: int, fout: int, size: int) -> None:
    """Copy `size` bytes, writing only the data regions: holes stay holes in the copy."""
    for start, end in _data_extents(fin, size):
        pos = start
        while pos < end:
            chunk = os.pread(fin, min(CHUNK, end - pos), pos)
            if not chunk:
                break  # the source shrank under us: the read-back check will say so
            os.pwrite(fout, chunk, pos)
            pos += len(chunk)
    os.ftruncate(fout, size)


def copy_verified_fd(
    fin: int, dest: Path, copy: Callable[[int, int, int], None] | None = None
) -> Digest:
    """Copy an open source to `dest` through a temporary file of this process's own; read the
    copy back; rename it into place only when its size and sha256 match the source's."""
    source = digest_fd(fin)
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        try:
            (copy or copy_data)(fin, fd, source.size)
            os.fsync(fd)
            copied = digest_fd(fd)
        finally:
            os.close(fd)
        if copied != source:
            raise RuntimeFailure(
                f"{dest.name}: the copy does not match the source (size {copied.size} vs "
                f"{source.size}, sha256 {'differs' if copied.sha256 != source.sha256 else 'same'}"
                "); the source changed or is being written: fetch again once the job is done"
            )
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise RuntimeFailure(
                f"no space left on the device holding {dest.parent} while copying {dest.name}; "
                "free space there (the source is untouched) and run `gh-run fetch` again"
            ) from None
        raise RuntimeFailure(f"copying to {dest} failed: {exc.strerror}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return source


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def select_sources(run_dir: Path, spec: JobSpec) -> tuple[dict[str, Path], list[Refusal]]:
    """relpath-in-store → source file, plus what was refused (links, outside the run).
    Links are refused again when opened (`open_beneath`): this is only the first look."""
    art_dir = run_dir / "artifacts"
    chosen: dict[str, Path] = {}
    refused: list[Refusal] = []
    if art_dir.is_dir() and not art_dir.is_symlink():
        for pattern in spec.artifacts.include:
            # a pattern ending in ** matches folders only (not links to them), as on the cluster
            # side (remote_collect.select) and in Python 3.11-3.12; 3.13's pathlib also yields
            # files and links there
            folders_only = pattern.rstrip("/").rsplit("/", 1)[-1] == "**"
            for src in sorted(art_dir.glob(pattern)):
                if folders_only and (src.is_symlink() or not src.is_dir()):
                    continue
                rel = src.relative_to(art_dir).as_posix()
                if src.is_symlink():
                    refused.append(Refusal(path=rel, reason="a symbolic link (never followed)"))
                elif not _inside(src, art_dir):
                    refused.append(Refusal(path=rel, reason="outside the run's artifacts folder"))
                elif src.is_file():
                    chosen[f"artifacts/{rel}"] = src
                elif not src.is_dir():
                    refused.append(Refusal(path=rel, reason="not a regular file"))
        # the job's analysis of its reports (records) comes back whatever the patterns say
        for src in sorted(art_dir.rglob("*" + RECORD_SUFFIX)):
            if src.is_file() and not src.is_symlink() and _inside(src, art_dir):
                chosen.setdefault(f"artifacts/{src.relative_to(art_dir).as_posix()}", src)
        # and so do the memory hook's dumps (profile.memory)
        for src in sorted((art_dir / MEMORY_DIR).glob("*")):
            rel = src.relative_to(art_dir).as_posix()
            if is_memory_file(rel) and src.is_file() and not src.is_symlink():
                chosen.setdefault(f"artifacts/{rel}", src)
    if spec.artifacts.logs:
        for log in sorted(run_dir.glob("*_log.out")) + sorted(run_dir.glob("*_log.err")):
            if log.is_file() and not log.is_symlink():
                chosen[f"logs/{log.name}"] = log
        for extra in (
            "job.sbatch",
            "spec.lock.yaml",
            "exit_code",
            "task.sh",
            "nsys_post.sh",
            "analysis_post.sh",
        ):
            p = run_dir / extra
            if p.is_file() and not p.is_symlink():
                chosen[f"run/{extra}"] = p
    # what a job with secrets vouched for when it cleaned its folder (secret_guard.py)
    vouch = run_dir / ATTESTATION
    if vouch.is_file() and not vouch.is_symlink():
        chosen[f"run/{ATTESTATION}"] = vouch
    return chosen, refused


# A manifest lists a run's files: a few hundred bytes each.
MAX_MANIFEST_BYTES = 64 << 20


def store_dir(home: Path, run_id: str) -> Path:
    return home / "artifacts" / run_id


def collect_order(rel: str) -> tuple[bool, str]:
    # The run's own files and logs first: they are small and say what happened, so a run over
    # its limit still keeps them.
    return (rel.startswith("artifacts/"), rel)


def collect(
    store: Store,
    run: Run,
    spec: JobSpec,
    home: Path,
    limits: SizeLimits | None = None,
    refused_before: Sequence[Refusal] = (),
    reports: Mode | None = None,
    left_before: Sequence[LeftReport] = (),
) -> Manifest:
    """Copy, verify and record the run's artifacts; idempotent (unchanged files are skipped).
    Records of earlier collections whose sources are gone are verified too (`verify`).
    `refused_before`: what was refused before the files got here (a remote run's links and
    files over the limits, never copied from the cluster), listed in the manifest too.
    `reports`: fetch or leave the reports the job analysed (default: the spec's
    artifacts.reports, else the cluster's, `limits.reports`); `left_before`: those a remote run
    left on the cluster. Fetching reports that were left checks them against the sizes and
    sha256 listed when they were left."""
    limits = limits or SizeLimits()
    run_dir = Path(run.run_dir)
    dest_root = store_dir(home, run.run_id)
    mode = reports or spec.artifacts.reports or limits.reports
    from orchestrator.artifacts import secret_guard

    # a job with secrets: nothing is stored that is not shown clean (secret_guard.py)
    gate = secret_guard.open_gate(run_dir, spec, local=not run.transport)
    chosen, refused = select_sources(run_dir, spec)
    sources, left_src = split(chosen, mode)
    refused = [*refused_before, *refused]
    left = [*left_before, *_left_here(run_dir, left_src)]
    prior = _prior_left(dest_root)
    known = {a.relpath: a for a in store.artifacts(run.run_id)}
    records: list[ArtifactRecord] = []
    taken = 0
    now = time.time()
    for rel in sorted(sources, key=collect_order):
        src = sources[rel]
        shown = rel.removeprefix("artifacts/")
        try:
            with open_beneath(run_dir, src.relative_to(run_dir)) as (fd, st):
                why = limits.check(st.st_size, taken)
                if why:
                    refused.append(Refusal(path=shown, reason=why))
                    continue
                record = _collect_one(fd, dest_root / rel, known.get(rel), run, rel, src, now)
            if gate is not None:
                why = gate.refusal(
                    str(src.relative_to(run_dir)), dest_root / rel, record.size, record.sha256
                )
                if why is not None:
                    (dest_root / rel).unlink(missing_ok=True)
                    refused.append(Refusal(path=shown, reason=why))
                    continue
        except SourceRefused as exc:
            refused.append(Refusal(path=shown, reason=str(exc)))
            continue
        except FileNotFoundError:
            continue  # removed since it was listed
        taken += record.size
        records.append(record)
    brought = {r.relpath: (r.size, r.sha256) for r in records}
    wrong = mismatches([p for p in prior if p.relpath not in {x.relpath for x in left}], brought)
    if mode == "fetch" and prior and wrong:
        raise RuntimeFailure(
            f"run {run.run_id}: {'; '.join(wrong[:3])}; nothing was recorded: the analysis"
            " made of the left report no longer describes it"
        )
    manifest = Manifest(
        run_id=run.run_id,
        collected_at=now,
        files=records,
        refused=refused,
        left=left,
        notes=gate.notes if gate is not None else [],
    )
    dest_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=dest_root, prefix=".manifest.json.", suffix=".partial")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(manifest.model_dump(), indent=2) + "\n")
    os.replace(tmp, dest_root / "manifest.json")
    store.record_artifacts(run.run_id, records, now)
    problems = verify(store, run, home, skip={r.relpath for r in records})
    if problems:
        raise RuntimeFailure(
            f"run {run.run_id}: {len(problems)} collected cop{'y' if len(problems) == 1 else 'ies'}"
            f" no longer match their records ({'; '.join(problems[:3])}); their sources are no "
            f"longer in {run_dir}, so restore them there and fetch again, or discard the run"
        )
    return manifest


def _left_here(run_dir: Path, left: dict[str, Path]) -> list[LeftReport]:
    """Manifest entries of reports left in a run folder this machine reaches (the cluster's
    file system): size and sha256 read there, through the same no-links open as a copy."""
    out = []
    for rel, src in sorted(left.items()):
        try:
            with open_beneath(run_dir, src.relative_to(run_dir)) as (fd, st):
                sha = _recorded_digest(run_dir, src, st.st_size)
                d = Digest(st.st_size, sha) if sha else digest_fd(fd)
        except (SourceRefused, FileNotFoundError):
            continue
        out.append(LeftReport(relpath=rel, size=d.size, sha256=d.sha256, source=str(src)))
    return out


def _recorded_digest(run_dir: Path, src: Path, size: int) -> str | None:
    """The sha256 the job computed of a report it analysed (`left_reports.digest_in_record`)."""
    record = src.with_name(src.name + RECORD_SUFFIX)
    try:
        with open_beneath(run_dir, record.relative_to(run_dir)) as (fd, st):
            if st.st_size > (64 << 20):
                return None  # not a record gh-run wrote
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read()
    except (SourceRefused, OSError):
        return None
    return digest_in_record(data, size)


def _prior_left(dest_root: Path) -> list[LeftReport]:
    """The reports the last collection left on the cluster (its manifest.json)."""
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

    try:
        data = load_json(dest_root / "manifest.json", MAX_MANIFEST_BYTES)
        return [LeftReport.model_validate(x) for x in data.get("left", [])]
    except (SideInputError, ValueError, AttributeError, TypeError):
        return []


def _collect_one(
    fd: int, dest: Path, prior: ArtifactRecord | None, run: Run, rel: str, src: Path, now: float
) -> ArtifactRecord:
    """The record of one source: the prior one when source and copy still match it (by
    sha256), else a fresh verified copy."""
    if prior is not None and dest.is_file():
        same = Digest(prior.size, prior.sha256)
        if digest_fd(fd) == same and Digest(*sha256_of(dest)) == same:
            return prior
    got = copy_verified_fd(fd, dest)
    if rel.endswith((".sqlite", ".json", ".json.gz", ".nsys-rep")):
        # the copy was read back whole: its sha256 stands for a record's check of it later
        from orchestrator.analysis import report_digest

        report_digest.remember(dest, got.sha256)
    return ArtifactRecord(
        run_id=run.run_id,
        relpath=rel,
        size=got.size,
        sha256=got.sha256,
        source=str(src),
        collected_at=now,
    )


def verify(store: Store, run: Run, home: Path, skip: set[str] | None = None) -> list[str]:
    """Problems with the collected copies (missing, or size or sha256 not as recorded); empty
    when all is well. Part of every collection, for the records it did not just write."""
    problems = []
    root = store_dir(home, run.run_id)
    for rec in store.artifacts(run.run_id):
        if skip and rec.relpath in skip:
            continue
        if inside(rec.relpath) is None:
            problems.append(f"{rec.relpath!r}: not a path inside {root}")
            continue
        path = root / rec.relpath
        if not path.is_file():
            problems.append(f"{rec.relpath}: missing from {root}")
        elif Digest(*sha256_of(path)) != Digest(rec.size, rec.sha256):
            problems.append(f"{rec.relpath}: size or sha256 differs from the manifest")
    return problems
