"""Whose run rows: a row of the state store is a fact about a run this user made in this home,
proved by a seal, never an instruction read from a file (issue 42, class 1).

A project's `.gh-run` may come with the project: a clone's files all belong to the person who
cloned it, so the ownership checks of `trust.py` pass, yet a row committed there was written by
someone else. Acting on such a row would run their choices here: `status` resubmitting the
row's `job.sbatch` as a retry, or opening an SSH connection with the row's recorded options
(`ProxyCommand` is a program OpenSSH runs), or `cancel` signalling the row's process.

So every row gh-run writes carries a seal: HMAC-SHA256, under a key only this user holds
(`key_path()`: 32 random bytes, 0600, in the per-user gh-run folder, never in a project), of the
fields that say what runs, where and how (executor, run folder, transport, job name, spec, the
sha256 of the job script written for it, ...), of the home's real path and of the user's id. A
row whose seal does not verify (written by another user, in another home, by a gh-run before
seals, or edited since) is shown as recorded and never acted on: not polled, retried,
repaired, cancelled, collected, and no transport is built from it. `gh-run adopt RUN` binds such
a row to this home after saying what it would run (the user's explicit command). The state,
job id and times of a row change as the run goes and are not sealed.

Why a keyed hash rather than a check of the file's owner or place: a clone, a copy and a
`git pull` all give files the user owns in a folder the user owns; only a secret the other
person never had tells the user's own rows from theirs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KEY_NAME = "row-seal.key"
KEY_FOLDER = "keys"
KEY_BYTES = 32
# The sealed fields of a run row (store.Run), in this order; the state, the job id and the
# times change as the run goes and are not sealed, nor is the SLURM cluster it went to (it
# only ever makes gh-run refuse a controller: cluster_identity.check_run).
RUN_FIELDS = (
    "run_id",
    "name",
    "job_name",
    "spec_path",
    "spec_json",
    "cluster",
    "partition",
    "executor",
    "run_dir",
    "campaign_id",
    "variant",
    "created_at",
    "transport",
    "clusters_option",
    "script_sha256",
)
# The sealed fields of a campaign group (campaign.records.GroupRecord): its script is sent.
GROUP_FIELDS = ("campaign_id", "group_index", "job_name", "script", "size", "is_array")
# Words of the refusal, shared by every command that declines to act on such a row.
NOT_READ = "it was not read from this home's state store"


class KeyUnavailable(Exception):
    """The user's key cannot be read or made (the reason is the message)."""


def key_path() -> Path:
    """The user's sealing key: in a folder of its own (0700) inside the per-user gh-run folder
    ($XDG_DATA_HOME/gh-run, else ~/.local/share/gh-run), which no project carries. Not in that
    folder itself: it is also the default gh-run home, made with the user's umask (0755 as a
    rule) by earlier versions and by any first command, and a key must not depend on it."""
    from orchestrator.core.paths import user_home

    return user_home() / KEY_FOLDER / KEY_NAME


_KEY: dict[Path, bytes] = {}


def _read_key(path: Path) -> bytes | None:
    """The key at `path`, or None when there is none; KeyUnavailable when a file is there that
    is not this user's private key file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyUnavailable(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise KeyUnavailable(f"{path}: not a file of your own")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise KeyUnavailable(f"{path}: open to others (mode {stat.S_IMODE(st.st_mode):04o})")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise KeyUnavailable(f"{path}: not a key gh-run wrote ({len(data)} bytes)")
    return data


def user_key(create: bool = False) -> bytes | None:
    """This user's key; made (atomically: two processes make one key) when `create` and there
    is none. None when there is none and `create` is False: nothing was sealed by this user."""
    path = key_path()
    if path in _KEY:
        return _KEY[path]
    key = _read_key(path)
    if key is None and create:
        from orchestrator.core import trust

        why = trust.private_dir(path.parent)
        if why is not None:
            raise KeyUnavailable(f"{path.parent} {why}")
        tmp = path.with_name(f".{KEY_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails when another process made the key first: theirs stands
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        key = _read_key(path)
    if key is not None:
        _KEY[path] = key
    return key


def forget() -> None:
    """Drop the remembered key (tests that move the per-user folder)."""
    _KEY.clear()


def home_key(home: Path) -> str:
    """What a seal says of its home: the home's real path."""
    return str(home.resolve())


def _message(kind: str, home: str, fields: tuple[str, ...], row: Mapping[str, Any]) -> bytes:
    # floats as their repr (exact, as SQLite keeps a REAL); every other value as JSON has it
    values = [repr(v) if isinstance(v, float) else v for v in (row.get(f) for f in fields)]
    body = [kind, home, os.geteuid(), *values]
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()


def seal(kind: str, home: str, fields: tuple[str, ...], row: Mapping[str, Any]) -> str:
    """The seal of a row of this user in the home `home` (`home_key`); the key is made if need
    be."""
    key = user_key(create=True)
    assert key is not None
    return hmac.new(key, _message(kind, home, fields, row), hashlib.sha256).hexdigest()


def problem(kind: str, home: str, fields: tuple[str, ...], row: Mapping[str, Any]) -> str | None:
    """Why the row may not be acted on, in words; None when its seal verifies."""
    given = row.get("seal")
    if not given:
        return (
            "it carries no seal of yours: it was recorded by a gh-run before rows were sealed, "
            "or written into this store by something else (a state store committed with a "
            "project?)"
        )
    try:
        key = user_key()
    except KeyUnavailable as exc:
        return f"your sealing key cannot be read ({exc})"
    if key is None:
        return "you have no sealing key here, so the row was not recorded by you"
    want = hmac.new(key, _message(kind, home, fields, row), hashlib.sha256).hexdigest()
    if hmac.compare_digest(want, str(given)):
        return None
    return (
        "its seal is not yours for this home: it was recorded by another user, in another "
        "home (a state store copied or committed with a project?), or changed since"
    )


def run_problem(home: str, row: Mapping[str, Any]) -> str | None:
    return problem("run", home, RUN_FIELDS, row)


def seal_run(home: str, row: Mapping[str, Any]) -> str:
    return seal("run", home, RUN_FIELDS, row)


def group_problem(home: str, row: Mapping[str, Any]) -> str | None:
    return problem("group", home, GROUP_FIELDS, row)


def seal_group(home: str, row: Mapping[str, Any]) -> str:
    return seal("group", home, GROUP_FIELDS, row)


def file_sha256(path: Path) -> str | None:
    """The sha256 of a job script gh-run wrote (None when it cannot be read): sealed with its
    row, checked before the script is submitted again."""
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with contextlib.closing(os.fdopen(fd, "rb")) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def refusal(run_id: str, why: str, doing: str) -> str:
    """One sentence: what was not done to a row, why, and the fix."""
    return (
        f"run {run_id} is not bound to this home and you: {why}; {doing}: gh-run acts only on "
        f"runs you recorded here (`gh-run adopt {run_id}` binds it after showing what it "
        "would run)"
    )
