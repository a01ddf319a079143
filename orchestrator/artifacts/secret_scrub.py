"""The last step of a job with secrets (`workload.secret_env`): no file gh-run collects from the
run folder may hold a secret's value. Copied into the run folder and run there by the job's
`secrets_post.sh` after the reports are exported (`python3 secret_scrub.py RUN_DIR NAME...`,
the values in its environment): the standard library only, since gh-run need not be installed
on the compute nodes.

Why it is needed although the values never reach nsys's own environment (the job moves them
into a private file before anything runs, and a launcher hands them to the workload only):
measured with nsys 2023.4 on a CPU capture, nsys records in the report, and `nsys export` in
`StringIds`, the environment block of every process it can read on the node (its parents, and
any other process of the user), and, with `--trace=osrt`, the environment passed to every
`execve` of the profiled tree, the launcher's own included; the `.nsys-rep` holds some of them
compressed, so no byte search of it can prove it clean.

So, for every regular file under the run folder (links are never followed):
- an SQLite file (an nsys export): every cell holding a value gets `<secret NAME>` in its place,
  the database is rewritten whole (`VACUUM INTO`: the old text is not left in free pages) and
  checked again;
- an `.nsys-rep` whose bytes hold a value, or whose export held one: removed (it cannot be
  cleaned; its export, cleaned, stays for `gh-run analyze`);
- a gzip file holding a value once decompressed: removed;
- any other file: each value overwritten in place by as many `*` (logs, CSV summaries).
What was done is said on stderr, by name only. A file that cannot be cleaned is removed.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
import sys
from pathlib import Path

CHUNK = 1 << 20
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
SECRETS_FILE = ".secrets"


def say(text: str) -> None:
    print(f"gh-run: secrets: {text}", file=sys.stderr)


def holds(path: Path, needles: dict[str, bytes]) -> list[str]:
    """The names whose value is in the file's bytes (read in chunks that overlap by the longest
    value, so a value across two chunks is found)."""
    longest = max(len(v) for v in needles.values())
    found: set[str] = set()
    tail = b""
    with path.open("rb") as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            data = tail + block
            found |= {n for n, v in needles.items() if v in data}
            tail = data[-(longest - 1) :] if longest > 1 else b""
    return sorted(found)


def gzip_holds(path: Path, needles: dict[str, bytes]) -> list[str]:
    longest = max(len(v) for v in needles.values())
    found: set[str] = set()
    tail = b""
    try:
        with gzip.open(path, "rb") as fh:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                data = tail + block
                found |= {n for n, v in needles.items() if v in data}
                tail = data[-(longest - 1) :] if longest > 1 else b""
    except (OSError, EOFError):
        return sorted(needles)  # unreadable: it cannot be shown clean
    return sorted(found)


def overwrite(path: Path, needles: dict[str, bytes]) -> None:
    """Each value overwritten in place by as many `*` (the file keeps its size: a log still
    being appended to stays consistent)."""
    longest = max(len(v) for v in needles.values())
    with path.open("r+b") as fh:
        pos = 0
        while True:
            fh.seek(pos)
            data = fh.read(CHUNK + longest)
            if not data:
                break
            for v in needles.values():
                at = data.find(v)
                while at >= 0:
                    fh.seek(pos + at)
                    fh.write(b"*" * len(v))
                    data = data[:at] + b"*" * len(v) + data[at + len(v) :]
                    at = data.find(v, at + len(v))
            if len(data) <= CHUNK:
                break
            pos += CHUNK


def scrub_sqlite(path: Path, needles: dict[str, bytes]) -> None:
    """Every cell of every table that holds a value, with `<secret NAME>` in its place; the file
    rewritten whole (VACUUM INTO), so no old page keeps the text."""
    conn = sqlite3.connect(path)
    conn.text_factory = bytes
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith(b"sqlite_")
        ]
        for raw in tables:
            table = raw.decode()
            cols = [r[1].decode() for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for col in cols:
                for name, v in needles.items():
                    rows = conn.execute(
                        f'SELECT rowid, typeof("{col}"), CAST("{col}" AS BLOB) FROM "{table}"'
                        f' WHERE instr(CAST("{col}" AS BLOB), ?) > 0',
                        (v,),
                    ).fetchall()
                    for rowid, kind, blob in rows:
                        new = blob.replace(v, f"<secret {name}>".encode())
                        cast = "TEXT" if kind == b"text" else "BLOB"
                        conn.execute(
                            f'UPDATE "{table}" SET "{col}" = CAST(? AS {cast}) WHERE rowid = ?',
                            (new, rowid),
                        )
        conn.commit()
        tmp = path.with_name(path.name + ".scrubbed")
        if tmp.exists():
            tmp.unlink()
        conn.execute("VACUUM INTO ?", (str(tmp),))
    finally:
        conn.close()
    if holds(tmp, needles):
        tmp.unlink()
        raise ValueError("a value is still there after the rewrite")
    os.replace(tmp, path)


def scrub(run_dir: Path, needles: dict[str, bytes]) -> int:
    """Clean every file of the run folder (see the module docstring); the number of files
    changed or removed."""
    changed = 0
    files = sorted(
        p for p in run_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != SECRETS_FILE
    )  # fmt: skip
    tainted_exports: set[Path] = set()
    # the exports first: an export that held a value condemns its .nsys-rep
    for p in sorted(files, key=lambda f: f.suffix != ".sqlite"):
        if not p.exists():
            continue
        names = holds(p, needles)
        with p.open("rb") as fh:
            head = fh.read(16)
        if not names and head.startswith(GZIP_MAGIC):
            names = gzip_holds(p, needles)
        rep_of_tainted = p.suffix == ".nsys-rep" and p.with_suffix(".sqlite") in tainted_exports
        if not names and not rep_of_tainted:
            continue
        shown = ", ".join(names) or "a secret (in its SQLite export)"
        changed += 1
        if head == SQLITE_MAGIC:
            tainted_exports.add(p)
            try:
                scrub_sqlite(p, {n: needles[n] for n in names})
                say(f"{p.relative_to(run_dir)}: the value of {shown} replaced (nsys records the"
                    " environment of the processes it sees)")  # fmt: skip
                continue
            except (sqlite3.Error, ValueError, OSError) as exc:
                say(f"{p.relative_to(run_dir)}: could not be cleaned ({exc}): removed")
        elif p.suffix == ".nsys-rep" or head.startswith(GZIP_MAGIC):
            say(f"{p.relative_to(run_dir)}: held the value of {shown}, which cannot be cleaned"
                " from it: removed (its SQLite export is kept, cleaned)")  # fmt: skip
        else:
            try:
                overwrite(p, {n: needles[n] for n in names})
                say(f"{p.relative_to(run_dir)}: the value of {shown} overwritten with *")
                continue
            except OSError as exc:
                say(f"{p.relative_to(run_dir)}: could not be cleaned ({exc}): removed")
        p.unlink(missing_ok=True)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python3 secret_scrub.py RUN_DIR NAME...", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    needles = {n: os.environ[n].encode() for n in argv[1:] if os.environ.get(n)}
    if not needles:
        return 0
    n = scrub(run_dir, needles)
    left = [p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()
            and p.name != SECRETS_FILE and holds(p, needles)]  # fmt: skip
    for p in left:  # never expected: removed rather than collected
        say(f"{p.relative_to(run_dir)}: still held a value: removed")
        p.unlink(missing_ok=True)
    if n:
        say(f"{n} file(s) of the run folder cleaned or removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
