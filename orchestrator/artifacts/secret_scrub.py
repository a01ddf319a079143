"""The last step of a job with secrets (`workload.secret_env`): no file gh-run collects from the
run folder may hold a secret's value. Copied into the run folder and run there by the job's
`secrets_post.sh` when the job ends, whichever way it ends (the batch script's EXIT trap: after
the tasks and the reports' post-processing, on a failure, on SIGTERM from `scancel` or the time
limit): `python3 secret_scrub.py RUN_DIR NAME...`, the values in its environment. The standard
library only (gh-run need not be installed on the compute nodes), Python 3.7 and later. gh-run
runs the same code at collection when the values are set there
(orchestrator/artifacts/secret_guard.py).

Why it is needed although the values never reach nsys's own environment (the job moves them
into a private file before anything runs, and a launcher hands them to the workload only):
measured with nsys 2023.4 on a CPU capture, nsys records in the report, and `nsys export` in
`StringIds`, the environment block of every process it can read on the node (its parents, and
any other process of the user), and, with `--trace=osrt`, the environment passed to every
`execve` of the profiled tree, the launcher's own included; the `.nsys-rep` holds some of them
compressed, so no byte search of it can prove it clean.

A value is looked for in every encoding it takes in what jobs write (`encodings`): as is, JSON
string-escaped (ASCII-only or not, `\\/` or `/`, lower- or upper-case `\\u` escapes, once or
twice), Python's repr, inside shell single quotes (`'\\''`) or backslash-escaped (`set -x`,
`printf %q`), percent-encoded (URLs), HTML-escaped, and UTF-16LE.

So, for every regular file under the run folder (links are never followed, folders are walked
without following them):
- an SQLite file (an nsys export): every text or blob cell holding a value gets
  `<secret NAME>` in its place (an integer or real cell is never touched: its type stays, and a
  short numeric value matching the digits of a timestamp changes nothing), the database is
  rewritten whole from a private copy (`VACUUM INTO`: the old text is not left in free pages),
  checked again cell by cell, and put in the file's place by rename;
- an `.nsys-rep` whose bytes hold a value, whose export held one, or which has no export beside
  it (it may hold the values compressed and nothing shows it clean): removed (its export,
  cleaned, stays for `gh-run analyze`);
- a gzip file holding a value once decompressed: removed;
- any other file: each value overwritten in place by as many `*` (logs, CSV summaries), only
  when the file has one name (a hard link's other name may lie outside the run folder: the
  name in the run folder gets a cleaned copy instead, and the other is left as it was).
What was done is said on stderr, by name only. A file that cannot be cleaned is removed (its
name: never through a link). Last, every file left is read again (a file still holding a value
is removed) and the folder's state is written to `.gh-run-scrubbed.json` (each file's size and
sha256): what collection checks when the values are not set where it runs.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import html
import json
import os
import re
import shutil
import sqlite3
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus

CHUNK = 1 << 20
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
SECRETS_FILE = ".secrets"
ATTESTATION = ".gh-run-scrubbed.json"
ATTESTATION_FORMAT = "gh-run.secrets-scrubbed/1"
SKIP = (SECRETS_FILE, ATTESTATION)
if TYPE_CHECKING:  # the job's python3 may be older than gh-run's: typing at check time only
    from collections.abc import Iterable
    from hashlib import _Hash as Hash

    Needles = dict[str, list[bytes]]  # name -> its encodings, longest first


def say(text: str) -> None:
    print("gh-run: secrets: " + text, file=sys.stderr, flush=True)


def _json(value: str, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)[1:-1]


def encodings(value: str) -> list[bytes]:
    """The forms the value takes in what a job writes, as bytes, longest first."""
    forms = {value}
    for ascii_only in (True, False):
        j = _json(value, ascii_only)
        forms.update({j, j.replace("/", "\\/")})
        upper = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), j)
        forms.add(upper)
        forms.add(_json(j, ascii_only))  # a JSON string inside a JSON string
    forms.add(repr(value)[1:-1])
    forms.add(value.replace("'", "'\\''"))
    forms.add(re.sub(r"([^A-Za-z0-9_./:=@%+,-])", r"\\\1", value))
    forms.update({quote(value, safe=""), quote_plus(value, safe=""), quote(value)})
    forms.add(html.escape(value, quote=True))
    out = {f.encode("utf-8", "surrogateescape") for f in forms if f}
    out.add(value.encode("utf-16-le", "surrogatepass"))
    return sorted(out, key=lambda b: (-len(b), b))


def needles_of(values: dict[str, str]) -> Needles:
    return {name: encodings(v) for name, v in values.items() if v}


def _all(needles: Needles) -> list[bytes]:
    return sorted({b for forms in needles.values() for b in forms}, key=lambda b: (-len(b), b))


def _longest(needles: Needles) -> int:
    return max(len(b) for forms in needles.values() for b in forms)


def _open(path: Path, flags: int = os.O_RDONLY) -> int:
    """A file of the run folder opened without following a link at its last component."""
    return os.open(str(path), flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))


def _found(data: bytes, needles: Needles) -> set[str]:
    return {n for n, forms in needles.items() if any(f in data for f in forms)}


def holds(path: Path, needles: Needles, digest: Hash | None = None) -> list[str]:
    """The names whose value (in any encoding) is in the file's bytes, read in chunks that
    overlap by the longest encoding; `digest` (a hashlib object) is fed the bytes on the way."""
    longest = _longest(needles)
    found: set[str] = set()
    tail = b""
    fd = _open(path)
    with os.fdopen(fd, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            if digest is not None:
                digest.update(block)
            data = tail + block
            found |= _found(data, needles)
            tail = data[-(longest - 1) :] if longest > 1 else b""
    return sorted(found)


def gzip_holds(path: Path, needles: Needles) -> list[str]:
    longest = _longest(needles)
    found: set[str] = set()
    tail = b""
    try:
        fd = _open(path)
        with os.fdopen(fd, "rb") as raw, gzip.GzipFile(fileobj=raw) as fh:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                data = tail + block
                found |= _found(data, needles)
                tail = data[-(longest - 1) :] if longest > 1 else b""
    except (OSError, EOFError):
        return sorted(needles)  # unreadable: it cannot be shown clean
    return sorted(found)


def _stars(data: bytes, needles: Needles) -> bytes:
    for form in _all(needles):
        data = data.replace(form, b"*" * len(form))
    return data


def overwrite(path: Path, needles: Needles) -> str:
    """Each value overwritten by as many `*`: in place (the file keeps its size: a log still
    being appended to stays consistent) when the file has one name; a file with other names
    (hard links, maybe outside the run folder) is never written through: its name here gets a
    cleaned copy. Returns how."""
    longest = _longest(needles)
    fd = _open(path, os.O_RDWR)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_nlink > 1:
            _replace_with_clean_copy(path, fd, needles)
            return "a cleaned copy put in its place (it has other names; they were left alone)"
        pos = 0
        while True:
            data = os.pread(fd, CHUNK + longest, pos)
            if not data:
                break
            clean = _stars(data, needles)
            if clean != data:
                os.pwrite(fd, clean, pos)
            if len(data) <= CHUNK:
                break
            pos += CHUNK
        return "overwritten with *"
    finally:
        os.close(fd)


def _replace_with_clean_copy(path: Path, fd: int, needles: Needles) -> None:
    """The file's bytes copied (through its open descriptor) to a private file beside it, the
    values overwritten there, and the copy renamed over the name: no other name of the file
    is written."""
    tmp_fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name + ".")
    try:
        with os.fdopen(os.dup(fd), "rb") as src, os.fdopen(tmp_fd, "wb") as dst:
            src.seek(0)
            shutil.copyfileobj(src, dst, CHUNK)
        overwrite(Path(tmp), needles)  # one name: written in place
        os.replace(tmp, str(path))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _text_columns(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(table, column) of every table of the database."""
    out = []
    for (raw,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        name = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
        if name.startswith("sqlite_"):
            continue
        quoted = name.replace('"', '""')
        for row in conn.execute('PRAGMA table_info("' + quoted + '")'):
            col = row[1].decode("utf-8", "surrogateescape") if isinstance(row[1], bytes) else row[1]
            out.append((quoted, col.replace('"', '""')))
    return out


def _cells_holding(
    conn: sqlite3.Connection, table: str, col: str, forms: list[bytes]
) -> list[tuple[int, bytes, bytes]]:
    """Rows (rowid, type, bytes) of the text and blob cells of a column holding a form: one scan
    of the column, an integer or real cell never looked at."""
    tests = " OR ".join('instr(CAST("' + col + '" AS BLOB), ?) > 0' for _ in forms)
    sql = (
        'SELECT rowid, typeof("' + col + '"), CAST("' + col + '" AS BLOB) FROM "' + table + '"'
        ' WHERE typeof("' + col + "\") IN ('text', 'blob') AND (" + tests + ")"
    )
    return conn.execute(sql, forms).fetchall()


def scrub_sqlite(path: Path, needles: Needles) -> None:
    """Every text or blob cell of every table holding a value, with `<secret NAME>` in its place
    (the cell keeps its type; integers and reals are never touched); done on a private copy,
    rewritten whole (VACUUM INTO, so no old page keeps the text), checked cell by cell, and put
    in the file's place by rename: the file itself (and any other name it has) is never
    written."""
    fd = _open(path)
    work_fd, work = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name + ".work.")
    final = work + ".clean"
    try:
        with os.fdopen(fd, "rb") as src, os.fdopen(work_fd, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        conn = sqlite3.connect(work)
        conn.text_factory = bytes
        try:
            for table, col in _text_columns(conn):
                for name, forms in needles.items():
                    for rowid, kind, blob in _cells_holding(conn, table, col, forms):
                        new = blob
                        for form in forms:
                            new = new.replace(form, ("<secret " + name + ">").encode())
                        cast = "TEXT" if kind == b"text" else "BLOB"
                        conn.execute(
                            'UPDATE "' + table + '" SET "' + col + '" = CAST(? AS ' + cast + ")"
                            " WHERE rowid = ?",
                            (new, rowid),
                        )
            conn.commit()
            conn.execute("VACUUM INTO ?", (final,))
        finally:
            conn.close()
        check = sqlite3.connect(final)
        check.text_factory = bytes
        try:
            every = _all(needles)
            if any(_cells_holding(check, t, c, every) for t, c in _text_columns(check)):
                raise ValueError("a value is still there after the rewrite")
        finally:
            check.close()
        os.chmod(final, stat.S_IMODE(os.stat(str(path), follow_symlinks=False).st_mode))
        os.replace(final, str(path))
    finally:
        for leftover in (work, final):
            if os.path.exists(leftover):
                os.unlink(leftover)


def files_of(run_dir: Path) -> list[Path]:
    """Every regular file under the run folder (no link followed, folders included), but the
    job's own secrets file and the attestation."""
    out = []
    for folder, dirs, names in os.walk(str(run_dir), followlinks=False):
        dirs.sort()
        for name in sorted(names):
            p = Path(folder) / name
            if folder == str(run_dir) and name in SKIP:
                continue
            try:
                if stat.S_ISREG(os.lstat(str(p)).st_mode):
                    out.append(p)
            except OSError:
                continue
    return out


def _head(path: Path) -> bytes:
    fd = _open(path)
    try:
        return os.read(fd, 16)
    finally:
        os.close(fd)


def scrub(run_dir: Path, needles: Needles) -> int:
    """Clean every file of the run folder (see the module docstring); the number of files
    changed or removed."""
    changed = 0
    files = files_of(run_dir)
    tainted_exports: set[Path] = set()
    # the exports first: an export that held a value condemns its .nsys-rep
    for p in sorted(files, key=lambda f: f.suffix != ".sqlite"):
        rel = p.relative_to(run_dir)
        try:
            names = holds(p, needles)
            head = _head(p)
        except OSError:
            continue  # gone, or became something else since it was listed
        if not names and head.startswith(GZIP_MAGIC):
            names = gzip_holds(p, needles)
        export = p.with_suffix(".sqlite")
        rep_of_tainted = p.suffix == ".nsys-rep" and export in tainted_exports
        rep_alone = p.suffix == ".nsys-rep" and not names and not export.is_file()
        if not names and not rep_of_tainted and not rep_alone:
            continue
        shown = ", ".join(names) or "a secret (in its SQLite export)"
        changed += 1
        if head == SQLITE_MAGIC:
            tainted_exports.add(p)
            try:
                scrub_sqlite(p, {n: needles[n] for n in names})
                say(str(rel) + ": the value of " + shown + " replaced (nsys records the"
                    " environment of the processes it sees)")  # fmt: skip
                continue
            except (sqlite3.Error, ValueError, OSError) as exc:
                say(str(rel) + ": could not be cleaned (" + str(exc) + "): removed")
        elif rep_alone:
            say(str(rel) + ": a report of a job with secrets without its SQLite export: it may"
                " hold a value compressed, and nothing shows it clean: removed")  # fmt: skip
        elif p.suffix == ".nsys-rep" or head.startswith(GZIP_MAGIC):
            say(str(rel) + ": held the value of " + shown + ", which cannot be cleaned"
                " from it: removed (its SQLite export is kept, cleaned)")  # fmt: skip
        else:
            try:
                how = overwrite(p, {n: needles[n] for n in names})
                say(str(rel) + ": the value of " + shown + ": " + how)
                continue
            except OSError as exc:
                say(str(rel) + ": could not be cleaned (" + str(exc) + "): removed")
        if os.path.lexists(str(p)):
            p.unlink()
    return changed


def sqlite_holds(path: Path, needles: Needles) -> list[str]:
    """The names whose value (in any encoding) is in a text or blob cell of the database: what
    a database holds of a value. Its raw bytes are no test: a short value (a few digits) is in
    any file's bytes by chance (an integer's encoding, the schema's text)."""
    conn = sqlite3.connect("file:" + str(path) + "?mode=ro", uri=True)
    conn.text_factory = bytes
    try:
        columns = _text_columns(conn)
        return sorted(
            name
            for name, forms in needles.items()
            if any(_cells_holding(conn, t, c, forms) for t, c in columns)
        )
    finally:
        conn.close()


def shows(path: Path, needles: Needles, digest: Hash | None = None) -> list[str]:
    """The names whose value the file holds, as what the file is reads it: an SQLite database
    cell by cell, a gzip file decompressed too, anything else byte by byte (`digest` fed the
    file's bytes); a database that cannot be read holds them all (nothing shows it clean)."""
    names = holds(path, needles, digest)
    head = _head(path)
    if head == SQLITE_MAGIC:
        try:
            return sqlite_holds(path, needles) if names else []
        except sqlite3.Error:
            return sorted(needles)
    if not names and head.startswith(GZIP_MAGIC):
        return gzip_holds(path, needles)
    return names


def attest(run_dir: Path, needles: Needles) -> dict[str, list[object]]:
    """Read every file left once more: one still holding a value is removed; the others' sizes
    and sha256 are what the job vouches for (written to the attestation)."""
    state: dict[str, list[object]] = {}
    for p in files_of(run_dir):
        rel = str(p.relative_to(run_dir))
        h = hashlib.sha256()
        try:
            left = shows(p, needles, h) if needles else _digest_only(p, h)
            size = os.lstat(str(p)).st_size
        except OSError:
            continue
        if left:  # never expected: removed rather than collected
            say(rel + ": still held a value: removed")
            p.unlink()
            continue
        state[rel] = [size, h.hexdigest()]
    return state


def _digest_only(path: Path, h: Hash) -> list[str]:
    fd = _open(path)
    with os.fdopen(fd, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                return []
            h.update(block)


def write_attestation(run_dir: Path, names: Iterable[str], state: dict[str, list[object]]) -> None:
    body = {"format": ATTESTATION_FORMAT, "names": sorted(names), "files": state}
    dest = run_dir / ATTESTATION
    fd, tmp = tempfile.mkstemp(dir=str(run_dir), prefix="." + ATTESTATION + ".")
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh, indent=0, sort_keys=True)
    os.replace(tmp, str(dest))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python3 secret_scrub.py RUN_DIR NAME...", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    names = argv[1:]
    values = {n: os.environ[n] for n in names if os.environ.get(n)}
    needles = needles_of(values)
    if not needles:  # every value empty: nothing to look for, every file vouched for
        write_attestation(run_dir, names, attest(run_dir, {}))
        return 0
    n = scrub(run_dir, needles)
    if n:
        say(str(n) + " file(s) of the run folder cleaned or removed")
    write_attestation(run_dir, names, attest(run_dir, needles))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
