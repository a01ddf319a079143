"""Remove what a committed nsys export (or a workload metrics.json beside it) says about the
machine it was recorded on: absolute paths under /work, /root, /home and /tmp, and the values of
the profiled process's environment (nsys 2023.4 records all of it in META_DATA_CAPTURE and
StringIds, secrets included). The rank variables the reader uses (`RANK_VARS`) and values that
are small numbers (ranks, world sizes, ports) are kept, so rank identity from the trace still
works; timings, names and ids are untouched.

    .venv/bin/python bench/scrub_nsys_export.py FILE.sqlite|metrics.json ...

Rewrites each file in place (SQLite: then VACUUM).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

from orchestrator.analysis.nsys_sqlite import RANK_VARS

PATH = re.compile(r"(?:/work|/root|/home|/tmp)(?:/[^\s\"':;,]*)?")
NUMBER = re.compile(r"\d{1,7}")
ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
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


def main(argv: list[str]) -> None:
    for name in argv:
        p = Path(name)
        n = scrub_sqlite(p) if p.suffix == ".sqlite" else scrub_json(p)
        print(f"{p}: {n} values scrubbed")


if __name__ == "__main__":
    main(sys.argv[1:])
