"""Collecting what a run produced into the artifact store, verified.

An artifact counts as collected only after it was copied to the store, read back whole, and
its size and sha256 matched the source: then it is recorded in the run's `manifest.json` and
in the state store. Sources are never modified. Patterns cannot reach outside the run's
artifacts folder, and symbolic links that point outside it are refused.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from orchestrator.base import Strict
from orchestrator.errors import RuntimeFailure
from orchestrator.spec import JobSpec
from orchestrator.store import ArtifactRecord, Run, Store

CHUNK = 1 << 20


class Manifest(Strict):
    run_id: str
    collected_at: float
    files: list[ArtifactRecord]
    refused: list[str]


def sha256_of(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def select_sources(run_dir: Path, spec: JobSpec) -> tuple[dict[str, Path], list[str]]:
    """relpath-in-store → source file, plus the list of refused matches (outside the run)."""
    art_dir = run_dir / "artifacts"
    chosen: dict[str, Path] = {}
    refused: list[str] = []
    if art_dir.is_dir():
        for pattern in spec.artifacts.include:
            for src in sorted(art_dir.glob(pattern)):
                if not src.is_file():
                    continue
                if src.is_symlink() or not _inside(src, art_dir):
                    refused.append(str(src.relative_to(art_dir)))
                    continue
                chosen[f"artifacts/{src.relative_to(art_dir).as_posix()}"] = src
    if spec.artifacts.logs:
        for log in sorted(run_dir.glob("*_log.out")) + sorted(run_dir.glob("*_log.err")):
            if log.is_file() and not log.is_symlink():
                chosen[f"logs/{log.name}"] = log
        for extra in ("job.sbatch", "spec.lock.yaml", "exit_code", "task.sh", "nsys_post.sh"):
            p = run_dir / extra
            if p.is_file() and not p.is_symlink():
                chosen[f"run/{extra}"] = p
    return chosen, refused


def _copy_verified(src: Path, dest: Path) -> tuple[int, str]:
    """Copy through a temporary name; read the copy back; rename only when it matches."""
    src_size, src_sha = sha256_of(src)
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(f".{dest.name}.partial")
    try:
        with src.open("rb") as fin, tmp.open("wb") as fout:
            shutil.copyfileobj(fin, fout, CHUNK)
            fout.flush()
            os.fsync(fout.fileno())
        size, sha = sha256_of(tmp)
        if size != src_size or sha != src_sha:
            raise RuntimeFailure(
                f"{src}: the copy does not match the source (size {size} vs {src_size}); "
                "the source changed or is being written: fetch again once the job is done"
            )
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise RuntimeFailure(
                f"no space left on the device holding {dest.parent} while copying {src.name}; "
                "free space there (the source is untouched) and run `gh-run fetch` again"
            ) from None
        raise RuntimeFailure(f"copying {src} to {dest} failed: {exc.strerror}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size, sha


def store_dir(home: Path, run_id: str) -> Path:
    return home / "artifacts" / run_id


def collect(store: Store, run: Run, spec: JobSpec, home: Path) -> Manifest:
    """Copy, verify and record the run's artifacts; idempotent (unchanged files are skipped)."""
    run_dir = Path(run.run_dir)
    dest_root = store_dir(home, run.run_id)
    sources, refused = select_sources(run_dir, spec)
    known = {a.relpath: a for a in store.artifacts(run.run_id)}
    records: list[ArtifactRecord] = []
    now = time.time()
    for rel, src in sorted(sources.items()):
        dest = dest_root / rel
        prior = known.get(rel)
        if prior and dest.is_file():
            size, sha = sha256_of(src)
            if size == prior.size and sha == prior.sha256 and sha256_of(dest) == (size, sha):
                records.append(prior)
                continue
        size, sha = _copy_verified(src, dest)
        records.append(
            ArtifactRecord(
                run_id=run.run_id,
                relpath=rel,
                size=size,
                sha256=sha,
                source=str(src),
                collected_at=now,
            )
        )
    manifest = Manifest(run_id=run.run_id, collected_at=now, files=records, refused=refused)
    dest_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest_root / ".manifest.json.partial"
    tmp.write_text(json.dumps(manifest.model_dump(), indent=2) + "\n")
    os.replace(tmp, dest_root / "manifest.json")
    store.record_artifacts(run.run_id, records, now)
    return manifest


def verify(store: Store, run: Run, home: Path) -> list[str]:
    """Problems with the collected copies (missing or changed files); empty when all is well."""
    problems = []
    root = store_dir(home, run.run_id)
    for rec in store.artifacts(run.run_id):
        path = root / rec.relpath
        if not path.is_file():
            problems.append(f"{rec.relpath}: missing from {root}")
        elif sha256_of(path) != (rec.size, rec.sha256):
            problems.append(f"{rec.relpath}: size or sha256 differs from the manifest")
    return problems
