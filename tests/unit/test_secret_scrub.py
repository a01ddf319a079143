"""The last step of a job with secrets (`orchestrator/artifacts/secret_scrub.py`): every file of a
run folder cleaned of the values, whatever holds them (an export's text with NUL-separated
environment blocks as nsys writes them, free pages, a report, gzip, a log across read chunks),
by name on stderr, never by value. The real profiled job: tests/integration/
test_secrets_profiled.py."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest

from orchestrator.artifacts import secret_scrub as S

VALUE = "hf_s3cr3t 'q' \"d\"\\end\n2nd line"


def _folder(tmp: Path) -> Path:
    run = tmp / "run"
    art = run / "artifacts"
    art.mkdir(parents=True)
    db = sqlite3.connect(art / "r.sqlite")
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    env = f"_=/usr/bin/env\0HF_TOKEN={VALUE}\0LANG=C"
    db.execute("INSERT INTO StringIds VALUES (1, ?)", (env,))
    db.execute("INSERT INTO StringIds VALUES (2, 'kernel')")
    db.execute("CREATE TABLE META (name TEXT, value BLOB)")
    db.execute("INSERT INTO META VALUES ('env', ?)", (f'HF_TOKEN="{VALUE}"'.encode(),))
    # a deleted row: its text stays in a free page unless the file is rewritten
    db.execute("CREATE TABLE gone (v TEXT)")
    db.execute("INSERT INTO gone VALUES (?)", (VALUE * 50,))
    db.commit()
    db.execute("DELETE FROM gone")
    db.commit()
    db.close()
    assert VALUE.encode() in (art / "r.sqlite").read_bytes()
    (art / "r.nsys-rep").write_bytes(b"NVIDIA report ... compressed stream, no plain value")
    (art / "other.nsys-rep").write_bytes(b"clean report")
    clean = sqlite3.connect(art / "other.sqlite")  # its export, holding no value
    clean.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    clean.commit()
    clean.close()
    # a report without its export (a job stopped before the export): nothing shows it clean
    (art / "alone.nsys-rep").write_bytes(b"report of a stopped job")
    (art / "t.json.gz").write_bytes(gzip.compress(f'{{"a": "{VALUE}"}}'.encode()))
    (art / "r_osrt_sum.csv").write_text("name,calls\nread,3\n")
    (run / "7_0_log.out").write_bytes(b"x" * 100 + VALUE.encode() + b" tail\n")
    (run / S.SECRETS_FILE).write_text(f"export HF_TOKEN='{VALUE}'\n")
    return run


def test_every_file_is_cleaned_or_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _folder(tmp_path)
    monkeypatch.setattr(S, "CHUNK", 64)  # the log's value straddles two reads
    log_size = (run / "7_0_log.out").stat().st_size
    monkeypatch.setenv("HF_TOKEN", VALUE)
    assert S.main([str(run), "HF_TOKEN"]) == 0
    err = capsys.readouterr().err
    art = run / "artifacts"
    # the export: kept, every cell cleaned, no old text in free pages, still a database
    db = sqlite3.connect(art / "r.sqlite")
    rows = dict(db.execute("SELECT id, value FROM StringIds"))
    assert rows[2] == "kernel" and "HF_TOKEN=<secret HF_TOKEN>\0LANG=C" in rows[1]
    assert db.execute("SELECT typeof(value) FROM META").fetchone()[0] == "blob"
    db.close()
    # its report: removed (it may hold the value compressed); another report with its clean
    # export: kept; a report without its export: removed
    assert not (art / "r.nsys-rep").exists() and (art / "other.nsys-rep").exists()
    assert not (art / "alone.nsys-rep").exists() and "alone.nsys-rep" in err
    assert not (art / "t.json.gz").exists()
    # the log: same size, the value overwritten
    assert (run / "7_0_log.out").stat().st_size == log_size
    assert (run / "7_0_log.out").read_bytes().endswith(b"*" * len(VALUE.encode()) + b" tail\n")
    assert (art / "r_osrt_sum.csv").read_text() == "name,calls\nread,3\n"
    for p in run.rglob("*"):
        if p.is_file() and p.name != S.SECRETS_FILE:
            assert VALUE.encode() not in p.read_bytes(), p
    # what is left is vouched for, file by file
    import hashlib
    import json

    state = json.loads((run / S.ATTESTATION).read_text())["files"]
    assert state == {
        str(p.relative_to(run)): [p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest()]
        for p in run.rglob("*")
        if p.is_file() and p.name not in S.SKIP
    }
    # said by name, never by value
    assert "HF_TOKEN" in err and "r.nsys-rep" in err and VALUE not in err


def test_nothing_to_do_without_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _folder(tmp_path)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert S.main([str(run), "HF_TOKEN"]) == 0
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != S.ATTESTATION}
    assert before == after
