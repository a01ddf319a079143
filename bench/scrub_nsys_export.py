"""Remove what a committed nsys export (or a workload metrics.json beside it) says about the
machine it was recorded on: absolute paths under /work, /root, /home and /tmp, and the values of
the profiled process's environment (nsys 2023.4 records all of it in META_DATA_CAPTURE and
StringIds, secrets included), the host's name; in every other table's text columns, the paths
alone. The rank variables the reader uses (`RANK_VARS`) and values that are small numbers
(ranks, world sizes, ports) are kept, so rank identity from the trace still works; timings,
names and ids are untouched.

    .venv/bin/python bench/scrub_nsys_export.py FILE.sqlite|metrics.json|TRACE.json.gz ...

Rewrites each file in place (SQLite: then VACUUM).
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import sys
from pathlib import Path

from orchestrator.analysis.readers.nsys_ranks import RANK_VARS

PATH = re.compile(r"(?:/work|/root|/home|/tmp)(?:/[^\s\"':;,]*)?")
NUMBER = re.compile(r"\d{1,7}")
ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
HOST_FIELDS = {
    "TARGET_INFO_SYSTEM_ENV": ("Hostname",),
    "META_DATA_CAPTURE": ("DEVICE_DISPLAY_NAME",),
    "META_DATA_EXPORT": ("EXPORT_HOST",),
}
TEXT_TABLES = (
    "StringIds",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "TARGET_INFO_SYSTEM_ENV",
)


def scrub_text(value: str) -> str:
    """One text: an environment entry keeps its name (and its value for a rank variable), also
    inside a `;`- or NUL-separated list of them (`DeviceEnvironment`); any other text loses its
    machine paths."""
    parts = re.split(r"([;\x00])", value)
    if len(parts) > 1 and all(ENV.match(p) for p in parts[::2] if p):
        return "".join(scrub_text(p) if i % 2 == 0 and p else p for i, p in enumerate(parts))
    m = ENV.match(value)
    # small numbers (ranks, world sizes, local ids, ports) say nothing of the machine or a secret
    keep = m is not None and (m.group(1) in RANK_VARS or NUMBER.fullmatch(m.group(2).strip('"')))
    if m and "\n" not in value and not keep:
        quote = '"' if m.group(2).startswith('"') else ""
        return f"{m.group(1)}={quote}<scrubbed>{quote}"
    return PATH.sub("<path>", value)


def scrub_sqlite(path: Path) -> int:
    con = sqlite3.connect(path)
    changed = 0
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table in TEXT_TABLES:
        if table not in tables:
            continue
        cols = [c[1] for c in con.execute(f'PRAGMA table_info("{table}")')]
        if "value" not in cols:
            continue
        key = "id" if "id" in cols else "rowid"
        rows = con.execute(
            f"SELECT {key}, value FROM \"{table}\" WHERE typeof(value) = 'text'"
        ).fetchall()
        for rid, value in rows:
            new = scrub_text(value)
            if new != value:
                con.execute(f'UPDATE "{table}" SET value = ? WHERE {key} = ?', (new, rid))
                changed += 1
    # The machine's name, where nsys writes it (the rank rules do not read it)
    for table in set(HOST_FIELDS) & tables:
        for name in HOST_FIELDS[table]:
            cur = con.execute(
                f'UPDATE "{table}" SET value = ? WHERE name = ? AND value != ?',
                ("<host>", name, "<host>"),
            )
            changed += cur.rowcount
    # Any other text column may name a path too (nsys 2024.2: ANALYSIS_FILE.filename, the
    # DIAGNOSTIC_EVENT texts that point at the session's stdout log): paths only, no env logic.
    for table in sorted(tables - set(TEXT_TABLES)):
        for _, col, *_ in con.execute(f'PRAGMA table_info("{table}")').fetchall():
            try:
                rows = con.execute(
                    f'SELECT rowid, "{col}" FROM "{table}" WHERE typeof("{col}") = ?', ("text",)
                ).fetchall()
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: none in nsys exports
                raise SystemExit(f"{path}: {table} has no rowid; scrub it by hand") from None
            for rid, value in rows:
                new = PATH.sub("<path>", value)
                if new != value:
                    con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (new, rid))
                    changed += 1
    con.commit()
    con.execute("VACUUM")
    con.close()
    return changed


def scrub_json(path: Path) -> int:
    text = path.read_text()
    doc = json.loads(text)
    count = 0

    def walk(v: object) -> object:
        nonlocal count
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            new = PATH.sub("<path>", v)
            count += new != v
            return new
        return v

    new_doc = walk(doc)
    if count:
        path.write_text(json.dumps(new_doc, indent=2) + ("\n" if text.endswith("\n") else ""))
    return count


def scrub_trace_gz(path: Path) -> int:
    """A gzipped Kineto trace: the paths replaced in its text as torch wrote it (no
    re-serialising, so the layout that gh-run's fast Kineto scan reads stays as it was), then
    checked to still parse as JSON."""
    text = gzip.decompress(path.read_bytes()).decode()
    new, count = PATH.subn("<path>", text)
    if count:
        json.loads(new)
        path.write_bytes(gzip.compress(new.encode(), compresslevel=9, mtime=0))
    return count


def main(argv: list[str]) -> None:
    for name in argv:
        p = Path(name)
        if p.suffix == ".sqlite":
            n = scrub_sqlite(p)
        elif p.name.endswith(".json.gz"):
            n = scrub_trace_gz(p)
        else:
            n = scrub_json(p)
        print(f"{p}: {n} values scrubbed")


if __name__ == "__main__":
    main(sys.argv[1:])
