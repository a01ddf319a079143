"""Bringing runs' files back from a cluster reached over SSH, verified, before they are
collected into the artifact store like the files of a local run.

For any number of runs on one cluster, three sessions on the shared connection: a listing of
the run folders, the cluster side's manifest (size and sha256 of each file to bring back), and
one rsync into this machine's mirror of the run folders (paths.mirror_root). Each copy is then
hashed here and must match the manifest; only then does `artifacts.collect` copy it into the
store (verified again, and recorded). An interrupted rsync leaves its partial data in a
`.rsync-partial` folder, so the next `gh-run fetch` resumes where it stopped; nothing is
recorded before every file of the run matched.

Which files: the same rule as artifacts.select_sources, applied to the cluster side's listing
(`glob_match` follows pathlib's glob: `*` within one name, hidden names included, `**` any
number of folders). Links are never followed: a link that matches is refused, as locally.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.artifacts import collect as artifacts
from orchestrator.artifacts.collect import Refusal, SizeLimits
from orchestrator.artifacts.left_reports import (
    RECORD_SUFFIX,
    LeftReport,
    Mode,
    digest_in_record,
    split,
)
from orchestrator.artifacts.secret_scrub import ATTESTATION
from orchestrator.core.errors import GhRunError, RuntimeFailure
from orchestrator.core.memory_files import is_memory_file
from orchestrator.core.paths import mirror_root
from orchestrator.core.relpaths import inside
from orchestrator.executors.base import Warn
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import Run, Store
from orchestrator.transport.ssh import PARTIAL_DIR, SshTransport, script

RUN_FILES = (
    "job.sbatch",
    "spec.lock.yaml",
    "exit_code",
    "task.sh",
    "nsys_post.sh",
    "analysis_post.sh",
)


@dataclass(frozen=True)
class Entry:
    """One entry of a run folder on the cluster side (find -printf %y %Y %s %p)."""

    kind: str  # f: file, l: link, p/s/b/c: FIFO, socket, device; x: the run folder is absent
    target: str  # for a link: what it points at (f, d, N for nothing)
    size: int
    path: str  # from the runs root: <run>/artifacts/...


def glob_match(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """Whether a file's path (its parts) matches a glob (its parts) as Path.glob would find it."""
    if not pattern:
        return not parts
    if not parts:
        return False
    head = pattern[0]
    if head == "**":
        # Zero folders, or one more folder (never the file's own name).
        return glob_match(pattern[1:], parts) or (len(parts) > 1 and glob_match(pattern, parts[1:]))
    return fnmatch.fnmatchcase(parts[0], head) and glob_match(pattern[1:], parts[1:])


def select(
    entries: Sequence[Entry], name: str, spec: JobSpec
) -> tuple[dict[str, str], list[Refusal]]:
    """What artifacts.select_sources would choose in run folder `name`: store key → path from
    the runs root; and the refused matches (links, whatever they point at; FIFOs, sockets and
    devices: not regular files, as locally)."""
    prefix = f"{name}/"
    files = {e.path[len(prefix) :]: e for e in entries if e.path.startswith(prefix)}
    arts = {
        rel.removeprefix("artifacts/"): e
        for rel, e in files.items()
        if rel.startswith("artifacts/")
    }
    chosen: dict[str, str] = {}
    refused: list[Refusal] = []
    seen: set[str] = set()
    for pattern in spec.artifacts.include:
        parts = PurePosixPath(pattern).parts
        for rel in sorted(arts):
            if not glob_match(parts, rel.split("/")):
                continue
            entry = arts[rel]
            if entry.kind != "f":  # as a local run refuses them (artifacts.select_sources)
                if rel not in seen:
                    seen.add(rel)
                    why = "a symbolic link (never followed)" if entry.kind == "l" else (
                        "not a regular file"
                    )  # fmt: skip
                    refused.append(Refusal(path=rel, reason=why))
                continue
            chosen[f"artifacts/{rel}"] = f"{prefix}artifacts/{rel}"
    for rel, entry in sorted(arts.items()):  # the job's analysis of its reports, always
        if rel.endswith(RECORD_SUFFIX) and entry.kind == "f":
            chosen.setdefault(f"artifacts/{rel}", f"{prefix}artifacts/{rel}")
    for rel, entry in sorted(arts.items()):  # and the memory hook's dumps (profile.memory)
        if is_memory_file(rel) and entry.kind == "f":
            chosen.setdefault(f"artifacts/{rel}", f"{prefix}artifacts/{rel}")
    if spec.artifacts.logs:
        for suffix in ("_log.out", "_log.err"):
            for rel, entry in sorted(files.items()):
                if "/" not in rel and rel.endswith(suffix) and entry.kind == "f":
                    chosen[f"logs/{rel}"] = prefix + rel
        for extra in RUN_FILES:
            found = files.get(extra)
            if found is not None and found.kind == "f":
                chosen[f"run/{extra}"] = prefix + extra
    vouch = files.get(ATTESTATION)  # what a job with secrets vouched for (secret_guard.py)
    if vouch is not None and vouch.kind == "f":
        chosen[f"run/{ATTESTATION}"] = prefix + ATTESTATION
    return chosen, refused


def list_remote(transport: SshTransport, root: str, names: Sequence[str]) -> list[Entry]:
    res = transport.run_bytes(["sh", "-c", script("list.sh"), "sh", root, *names], timeout=120)
    if res.returncode != 0:
        why = " ".join(res.stderr.decode("utf-8", "replace").split()) or f"exit {res.returncode}"
        raise RuntimeFailure(f"listing run folders in {transport.where}:{root} failed: {why}")
    return list_entries(res.stdout)


def list_entries(data: bytes) -> list[Entry]:
    """list.sh's records: type, target type, size and path, tab-separated, NUL-terminated."""
    out = []
    for record in data.split(b"\0"):
        if not record:
            continue
        kind, target, size, path = record.decode("utf-8", "surrogateescape").split("\t", 3)
        if inside(path) is None:
            continue  # a name that would leave the runs root: never joined to a local folder
        out.append(Entry(kind, target, int(size) if size.isdigit() else 0, path))
    return out


def manifest_remote(
    transport: SshTransport, root: str, paths: Sequence[str]
) -> dict[str, tuple[int, str]]:
    """The cluster side's size and sha256 of each path (from the runs root)."""
    if not paths:
        return {}
    res = transport.run(["sh", "-c", script("sha256.sh"), "sh", root, *paths], timeout=600)
    lines = res.stdout.splitlines()
    if res.returncode != 0 or len(lines) != len(paths):
        why = " ".join(res.stderr.split()) or f"exit {res.returncode}"
        raise RuntimeFailure(f"hashing files in {transport.where}:{root} failed: {why}")
    out: dict[str, tuple[int, str]] = {}
    for path, line in zip(paths, lines, strict=True):
        size, _, sha = line.partition(" ")
        if size.isdigit() and len(sha) == 64:
            out[path] = (int(size), sha)
    return out


def _verify(mirror: Path, chosen: dict[str, str], expected: dict[str, tuple[int, str]]) -> None:
    """Each copy must match the cluster's manifest; a copy that does not is removed (so that
    the next fetch copies it again) and nothing of the run is collected."""
    for path in chosen.values():
        local = mirror.parent / path
        if path not in expected:
            raise RuntimeFailure(
                f"{path} disappeared on the cluster while it was being fetched; fetch again"
            )
        try:
            got = artifacts.sha256_of(local)
        except OSError as exc:
            raise RuntimeFailure(f"{local}: the copy cannot be read ({exc.strerror})") from None
        if got != expected[path]:
            local.unlink(missing_ok=True)
            raise RuntimeFailure(
                f"{local}: the copy does not match the cluster's sha256 (size {got[0]} vs "
                f"{expected[path][0]}); the file changed on the cluster during the copy: "
                "fetch again once the job is done"
            )


def _drop_strays(mirror: Path, spec: JobSpec, chosen: dict[str, str]) -> None:
    """Files in the mirror the cluster no longer has (or never sent) must not be collected."""
    local, _ = artifacts.select_sources(mirror, spec)
    for key, path in local.items():
        if key not in chosen and PARTIAL_DIR not in path.parts:
            path.unlink(missing_ok=True)


def _partial_bytes(local_root: Path, paths: Sequence[str]) -> int:
    """Bytes an interrupted rsync left for these files (what the next copy starts from)."""
    total = 0
    for path in paths:
        rel = PurePosixPath(path)
        partial = local_root / rel.parent / PARTIAL_DIR / rel.name
        if partial.is_file():
            total += partial.stat().st_size
    return total


@dataclass(frozen=True)
class Fetched:
    """A run's files in its mirror folder, what was not brought (links, over the limits), and
    the reports left on the cluster (artifacts.reports: leave)."""

    mirror: Path
    refused: list[Refusal]
    left: list[LeftReport]


def within_limits(
    chosen: dict[str, str], sizes: dict[str, int], limits: SizeLimits
) -> tuple[dict[str, str], list[Refusal]]:
    """The chosen files the size limits let through, in collection order (the run's own files
    and logs first), as `artifacts.collect` applies them: refused ones never cross the wire."""
    kept: dict[str, str] = {}
    refused: list[Refusal] = []
    taken = 0
    for key in sorted(chosen, key=artifacts.collect_order):
        size = sizes.get(chosen[key], 0)
        why = limits.check(size, taken)
        if why:
            refused.append(Refusal(path=key.removeprefix("artifacts/"), reason=why))
            continue
        taken += size
        kept[key] = chosen[key]
    return kept, refused


def _left_digests(
    transport: SshTransport,
    root: str,
    local_root: Path,
    left: dict[str, str],
    expected: dict[str, tuple[int, str]],
    entries: Sequence[Entry],
) -> list[LeftReport]:
    """The manifest entries of a run's left reports: the sha256 hashed there, or the one the
    job computed (its record, pulled into the mirror, while the listed size is unchanged); a
    report whose record does not vouch for it is hashed there now."""
    sizes = {e.path: e.size for e in entries if e.kind == "f"}
    out: dict[str, tuple[int, str]] = {p: expected[p] for p in left.values() if p in expected}
    for p in left.values():
        record = local_root / (p + RECORD_SUFFIX)
        if p in out or not record.is_file() or p not in sizes:
            continue
        sha = digest_in_record(record.read_bytes(), sizes[p])
        if sha is not None:
            out[p] = (sizes[p], sha)
    rest = [p for p in left.values() if p not in out]
    out.update(manifest_remote(transport, root, rest))
    return [
        LeftReport(relpath=key, size=out[p][0], sha256=out[p][1], source=p)
        for key, p in sorted(left.items())
        if p in out
    ]


def fetch(
    transport: SshTransport,
    runs: Sequence[Run],
    home: Path,
    warn: Warn | None = None,
    store: Store | None = None,
    limits: Callable[[Run], SizeLimits] | None = None,
    reports: Mode | None = None,
) -> dict[str, Fetched | GhRunError]:
    """Bring the runs' files into their mirror folders, verified: run id → the mirror folder
    to collect from and what was refused there, or why not. One listing, one manifest, one
    rsync per runs root. `limits`: each run's artifact size limits (files over them stay on
    the cluster). `reports`: fetch or leave the analysed reports (default: each run's spec, else
    its cluster's `limits(run).reports`); left ones are hashed there, never copied."""
    out: dict[str, Fetched | GhRunError] = {}
    refusals: dict[str, list[Refusal]] = {}
    left_of: dict[str, dict[str, str]] = {}
    by_root: dict[str, list[Run]] = {}
    for run in runs:
        by_root.setdefault(str(PurePosixPath(run.run_dir).parent), []).append(run)
    for root, group in by_root.items():
        names = [PurePosixPath(r.run_dir).name for r in group]
        entries = list_remote(transport, root, names)
        gone = {e.path for e in entries if e.kind == "x"}
        wanted: dict[str, dict[str, str]] = {}
        for run, name in zip(group, names, strict=True):
            if name in gone:
                out[run.run_id] = RuntimeFailure(
                    f"run folder {run.run_dir} does not exist on {transport.where} (removed?); "
                    "nothing to fetch"
                )
                continue
            spec = JobSpec.model_validate_json(run.spec_json)
            chosen, refused = select(entries, name, spec)
            run_limits = limits(run) if limits is not None else SizeLimits()
            chosen, left_of[run.run_id] = split(
                chosen, reports or spec.artifacts.reports or run_limits.reports
            )
            if limits is not None:
                sizes = {e.path: e.size for e in entries if e.kind == "f"}
                chosen, over = within_limits(chosen, sizes, limits(run))
                refused += over
            wanted[run.run_id] = chosen
            refusals[run.run_id] = refused
        paths = [p for chosen in wanted.values() for p in chosen.values()]
        # a left report with its record is hashed by the job already (its record's sha256);
        # the others (a .nsys-rep) are hashed there now
        pulled = set(paths)
        kept = [
            p for left in left_of.values() for p in left.values() if p + RECORD_SUFFIX not in pulled
        ]
        expected = manifest_remote(transport, root, paths + kept)
        local_root = mirror_root(home, group[0].cluster)
        partial = _partial_bytes(local_root, paths)
        stats = transport.pull(root, [p for p in paths if p in expected], local_root)
        for run, name in zip(group, names, strict=True):
            if run.run_id not in wanted:
                continue
            mirror = local_root / name
            try:
                _verify(mirror, wanted[run.run_id], expected)
                _drop_strays(mirror, JobSpec.model_validate_json(run.spec_json), wanted[run.run_id])
            except GhRunError as exc:
                out[run.run_id] = exc
                continue
            left = _left_digests(
                transport, root, local_root, left_of.get(run.run_id, {}), expected, entries
            )
            out[run.run_id] = Fetched(mirror, refusals.get(run.run_id, []), left)
            if partial and store is not None:
                store.update_run(
                    run.run_id,
                    event=f"resumed an interrupted copy from {transport.where}: {partial} "
                    f"bytes were here already; {stats.literal} bytes copied now, "
                    f"{stats.matched} reused",
                )
    return out
