"""The sha256 of a report, remembered by what its file is now (issue 42, class 3).

A record beside a report (`records.py`) stands for it only while the report's content is the
one it was made from: its sha256 is computed where the report is written and checked where the
record is read. Hashing a large export costs a read of it (about 1 s a GiB), so each answer is
kept in the user's cache, keyed by the file's device, inode, size, modification and change
times (`st_ctime` cannot be set back by the file's owner, as `st_mtime` can with `touch -d`):
a file changed in any way is hashed again, an unchanged one costs one `fstat`. gh-run seeds the
cache where it hashes a file anyway (writing a record, collecting an artifact).

The cache is a private folder of the user's own (`trust.private_dir`); when it cannot be one,
every check hashes the report (nothing else changes).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from pathlib import Path

CHUNK = 1 << 20


@functools.cache
def cache_dir() -> Path | None:
    from orchestrator.core import trust
    from orchestrator.core.paths import user_cache_dir

    folder = user_cache_dir() / "report-sha256"
    return folder if trust.private_dir(folder) is None else None


def _key(st: os.stat_result) -> str:
    stamp = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:40]


def _cached(st: os.stat_result) -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    try:
        text = (folder / _key(st)).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def _remember(st: os.stat_result, digest: str) -> None:
    folder = cache_dir()
    if folder is None:
        return
    dest = folder / _key(st)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        tmp.write_text(digest + "\n")
        os.replace(tmp, dest)
    with contextlib.suppress(OSError):
        tmp.unlink()


def of_fd(fd: int) -> tuple[os.stat_result, str]:
    """(fstat, sha256) of an open regular file: the cached answer when the file is as it was,
    else read whole from its start (and remembered when it did not change meanwhile)."""
    st = os.fstat(fd)
    got = _cached(st)
    if got is not None:
        return st, got
    h = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, CHUNK, offset):
        h.update(chunk)
        offset += len(chunk)
    digest = h.hexdigest()
    after = os.fstat(fd)
    if _key(after) == _key(st) and offset == st.st_size:
        _remember(st, digest)
    return after, digest


def of_path(path: Path) -> tuple[os.stat_result, str]:
    """`of_fd` of a file opened without following a link at its last component."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return of_fd(fd)
    finally:
        os.close(fd)


def remember(path: Path, digest: str) -> None:
    """Seed the cache for a file whose sha256 was just computed elsewhere (a copy verified
    as it was written)."""
    with contextlib.suppress(OSError):
        _remember(os.stat(path, follow_symlinks=False), digest)
