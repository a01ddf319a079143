"""Whose files gh-run acts on: cluster files, template folders, settings and homes owned by
another user, or writable by every user, are refused (issue 26, class 3).

A cluster file's `setup:` lines and an admin template become shell in the user's jobs; a run
row in a home becomes a process gh-run signals. So, as git refuses a repository owned by
someone else (`safe.directory`) and OpenSSH refuses a key file others can write, gh-run uses
such a file only when it is owned by a trusted user and no user outside them can change it.

Trusted: root, the user running gh-run, and the owner of the installed gh-run package itself
(a site venv installed by a software account: whoever owns gh-run's own code can already make
it do anything, so trusting their files adds no risk). Group-writable files are accepted:
Debian and Red Hat give each user a private group, and a team that shares a project through a
group has chosen to.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from pathlib import Path

from orchestrator.core.errors import UserError


@functools.cache
def trusted_uids() -> frozenset[int]:
    uids = {0, os.geteuid()}
    with contextlib.suppress(OSError):
        uids.add(os.stat(Path(__file__).parent).st_uid)
    return frozenset(uids)


def owner_name(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _who() -> str:
    return "root" if os.geteuid() == 0 else "you or root"


def problem(path: Path, *, by_name: bool = False) -> str | None:
    """Why `path` (a file or a folder) cannot be trusted, or None when it can.

    `by_name`: the folder is searched for files by name (cluster files, templates), so a
    world-writable one is refused even with the sticky bit (/tmp's): anyone could add a name.
    Otherwise a sticky world-writable folder (the parent of a file) is fine, since nobody but
    the file's owner may replace it there."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # what does not exist is looked for elsewhere, or reported by its reader
    return stat_problem(st, by_name=by_name)


def stat_problem(st: os.stat_result, *, by_name: bool = False) -> str | None:
    """`problem` of what a stat (of a path, or of an open descriptor) says."""
    if st.st_uid not in trusted_uids():
        return f"owned by {owner_name(st.st_uid)}, not by {_who()}"
    sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and not by_name
    if st.st_mode & stat.S_IWOTH and not sticky_dir:
        return f"writable by every user (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def file_problem(path: Path) -> tuple[Path, str] | None:
    """The first untrusted part of a file's place: the file itself (through links) or the
    folder holding it (as named, and as the link resolves), with the reason."""
    candidates = [path]
    real = path.resolve()
    if real != path.absolute():
        candidates.append(real)
    for p in candidates:
        for what, by_name in ((p, False), (p.absolute().parent, False)):
            why = problem(what, by_name=by_name)
            if why:
                return what, why
    return None


def check_file(path: Path, kind: str, fix: str) -> None:
    """Refuse a file whose owner is not trusted, or which others can change.

    `kind` names it for the user ("cluster file"), `fix` says what to do instead."""
    found = file_problem(path)
    if found:
        where, why = found
        raise UserError(
            f"{where}: {why}; gh-run does not use a {kind} that another user owns or can "
            f"change: {fix_for(where, why, fix)}"
        )


class Untrusted(UserError):
    """A file gh-run will not use (another user's, or others can change it): one sentence."""


def read_checked(path: Path, kind: str, fix: str, limit: int) -> bytes:
    """The bytes of a file gh-run will act on (a cluster file of an `extends:` chain, a
    template, a settings file), checked on what is read, never on a second lookup of the path:
    the folder holding the file (as its links resolve) is opened and checked by `fstat` of that
    descriptor, the file is opened beneath it without following a link (`O_NOFOLLOW`, a FIFO
    not waited on) and checked by `fstat` of its own descriptor, and read through it. A link
    flipped between the look and the read can no longer swap another file in (issue 42, class
    2). The folder as named (a link to the file elsewhere) is checked too, as `file_problem`
    does. At most `limit` bytes: a larger file is refused by its reader."""
    import errno

    named_parent = path.absolute().parent
    real = path.resolve()
    flags = os.O_RDONLY | os.O_CLOEXEC
    try:
        dfd = os.open(real.parent, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        if real.parent != named_parent and named_parent.resolve() != real.parent:
            why = problem(named_parent)
            if why:
                raise _untrusted(named_parent, why, kind, fix)
        why = stat_problem(os.fstat(dfd))
        if why:
            raise _untrusted(real.parent, why, kind, fix)
        try:
            fd = os.open(real.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the name became a link since it was resolved
                raise UserError(
                    f"{path}: it changed while it was opened (now a link); gh-run does not use"
                    f" a {kind} that moves under it: {fix}"
                ) from None
            raise _unreadable(path, exc) from None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path}: not a regular file; point gh-run at the {kind} itself")
        why = stat_problem(st)
        if why:
            raise _untrusted(real, why, kind, fix)
        chunks = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _untrusted(where: Path, why: str, kind: str, fix: str) -> Untrusted:
    return Untrusted(
        f"{where}: {why}; gh-run does not use a {kind} that another user owns or can change: "
        f"{fix_for(where, why, fix)}"
    )


def _unreadable(path: Path, exc: OSError) -> UserError:
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{path}: no such file; check the path")
    return UserError(f"{path}: cannot be read ({exc.strerror}); check its permissions")


def check_folder(path: Path, kind: str, fix: str) -> None:
    """Refuse a folder searched by name (cluster files, templates) that is untrusted."""
    why = problem(path, by_name=True)
    if why:
        raise UserError(
            f"{path}: {why}; gh-run does not look for {kind} in a folder that another user "
            f"owns or every user can write: {fix_for(path, why, fix)}"
        )


def fix_for(path: Path, why: str, fix: str) -> str:
    if why.startswith("writable"):
        return f"remove the write permission of others (chmod o-w {path}), or {fix}"
    return fix


def private_dir(path: Path) -> str | None:
    """Make `path` a folder only this user can enter (0700), or say why it is not one: a
    per-user cache must not be a folder another user made first, nor readable by others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be created ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.geteuid():
        return f"is owned by {owner_name(st.st_uid)}"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"is open to others (mode {stat.S_IMODE(st.st_mode):04o}; chmod 700 it)"
    return None
