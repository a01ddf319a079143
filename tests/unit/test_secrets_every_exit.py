"""Issue 42, class 5: a secret is scrubbed on every way a job can end, in every encoding its value
takes, without changing other cells' types, never through links; and collection refuses to
store what is not shown clean. Real local jobs (the local executor runs the very batch script
SLURM would: its EXIT trap cleans the run folder however the job ends) and real files; the
profiled job on the real dev cluster is tests/integration/test_secrets_profiled.py, and
scancel / the SLURM time limit tests/integration/test_secrets_ended.py."""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from orchestrator.artifacts import secret_scrub as S

REPO = Path(__file__).resolve().parents[2]
SAXPY = REPO / "tests" / "data" / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"

VALUES = {
    "quotes and backslash": "hf_a'b\"c\\d",
    "non-ASCII": "pässwörd-Ωμέγα",
    "emoji and slash": "tok/🔑/end",
    "markup and percent": "<x&y>%41 z",
    "newline and tab": "line1\nline2\tend",
}


def _writers(value: str) -> dict[str, bytes]:
    """The same value as jobs write it: in logs, JSON (the workload's, Kineto's args, both
    escapes), a JSON string inside a JSON string, a shell trace, a URL, HTML, Python's repr,
    UTF-16."""
    from urllib.parse import quote

    return {
        "log.txt": f"token={value} end\n".encode(),
        "ascii.json": json.dumps({"env": {"TOKEN": value}}).encode(),
        "utf8.json": json.dumps({"env": value}, ensure_ascii=False).encode(),
        "slashes.json": json.dumps({"v": value}).replace("/", "\\/").encode(),
        "nested.json": json.dumps({"args": json.dumps({"TOKEN": value})}).encode(),
        "trace.log": ("+ curl -H 'Authorization: " + value.replace("'", "'\\''") + "'\n").encode(),
        "url.txt": f"GET https://hf.co/api?token={quote(value, safe='')}\n".encode(),
        "page.html": f"<td>{html.escape(value)}</td>".encode(),
        "repr.txt": repr({"token": value}).encode(),
        "utf16.bin": value.encode("utf-16-le"),
    }


def _sqlite_with(path: Path, value: str) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO StringIds VALUES (1, ?)", (json.dumps({"TOKEN": value}),))
    db.execute("INSERT INTO StringIds VALUES (2, ?)", (f"HF_TOKEN={value}\0LANG=C",))
    db.execute("INSERT INTO StringIds VALUES (3, 'kernel')")
    db.commit()
    db.close()


def _still_there(run: Path, value: str) -> list[str]:
    """Files of the folder holding any encoding of the value (SQLite files cell by cell)."""
    forms = S.encodings(value)
    out = []
    for p in S.files_of(run):
        data = p.read_bytes()
        if data.startswith(S.SQLITE_MAGIC):
            db = sqlite3.connect(p)
            db.text_factory = bytes
            cells = b"\0".join(
                r[0] for r in db.execute("SELECT CAST(value AS BLOB) FROM StringIds") if r[0]
            )
            db.close()
            data = cells
        if any(f in data for f in forms):
            out.append(str(p.relative_to(run)))
    return out


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_encoding_of_a_value_is_scrubbed(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = VALUES[name]
    run = tmp_path / "run"
    (run / "artifacts").mkdir(parents=True)
    for fname, data in _writers(value).items():
        (run / "artifacts" / fname).write_bytes(b"head " + data + b" tail")
    _sqlite_with(run / "artifacts" / "r.sqlite", value)
    assert len(_still_there(run, value)) == len(_writers(value)) + 1  # the plant is seen
    monkeypatch.setenv("GHT_SECRET", value)
    assert S.main([str(run), "GHT_SECRET"]) == 0
    assert _still_there(run, value) == []
    db = sqlite3.connect(run / "artifacts" / "r.sqlite")
    assert db.execute("SELECT value FROM StringIds WHERE id = 3").fetchone() == ("kernel",)


def test_a_short_numeric_secret_changes_no_cells_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret "12": every integer cell of a real export keeps its type and value (its digits
    are not the secret), the kernels all stay, text cells holding "12" are scrubbed."""
    run = tmp_path / "run"
    (run / "artifacts").mkdir(parents=True)
    f = run / "artifacts" / "x.sqlite"
    shutil.copyfile(SAXPY, f)

    def shape(path: Path) -> list[tuple[object, ...]]:
        db = sqlite3.connect(path)
        got = db.execute(
            "SELECT count(*), sum(typeof(start) = 'integer'), sum(typeof(\"end\") = 'integer'),"
            ' sum(start), sum("end") FROM CUPTI_ACTIVITY_KIND_KERNEL'
        ).fetchall()
        db.close()
        return got

    before = shape(f)
    monkeypatch.setenv("GHT_SECRET", "12")
    assert S.main([str(run), "GHT_SECRET"]) == 0
    assert f.exists() and shape(f) == before
    db = sqlite3.connect(f)
    texts = [v for (v,) in db.execute("SELECT value FROM StringIds") if isinstance(v, str)]
    assert texts and not any("12" in t for t in texts)
    assert any("<secret GHT_SECRET>" in t for t in texts)


def test_the_scrub_never_writes_through_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = "s3cr3t-Wert"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(f"mine: {value}\n")
    _sqlite_with(outside / "mine.sqlite", value)
    (outside / "link-target.txt").write_text(f"also mine: {value}\n")
    kept = {p.name: p.read_bytes() for p in outside.iterdir()}
    run = tmp_path / "run"
    art = run / "artifacts"
    art.mkdir(parents=True)
    os.link(outside / "notes.txt", art / "notes.txt")  # a hard link: two names, one file
    os.link(outside / "mine.sqlite", art / "mine.sqlite")
    (art / "sym.txt").symlink_to(outside / "link-target.txt")
    monkeypatch.setenv("GHT_SECRET", value)
    assert S.main([str(run), "GHT_SECRET"]) == 0
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == kept
    assert value.encode() not in (art / "notes.txt").read_bytes()
    assert os.stat(art / "notes.txt").st_ino != os.stat(outside / "notes.txt").st_ino
    assert _still_there(run, value) == []
    assert (art / "sym.txt").is_symlink()  # a link is never followed (nor collected)


# ---- every way a job ends, through the real CLI and the local executor ----------------------


def _job(tmp_path: Path, script: str, time_limit: str = "00:02:00") -> Path:
    spec = {
        "name": "sec",
        "cluster": str(REPO / "clusters" / "dev.yaml"),
        "partition": "gh",
        "resources": {"nodes": 1, "cpus_per_task": 1, "mem": "256M", "time": time_limit},
        "container": {"runtime": "none"},
        "workload": {
            "kind": "command",
            "command": "bash",
            "args": ["-c", script],
            "secret_env": ["GHT_SECRET"],
        },
        "artifacts": {"include": ["*.txt", "*.json"]},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


LEAK = (
    'printf \'%s\' "$GHT_SECRET" > "$GH_RUN_ARTIFACTS/leak.txt";'
    ' python3 -c \'import json,os; print(json.dumps({"t": os.environ["GHT_SECRET"]}))\''
    ' > "$GH_RUN_ARTIFACTS/leak.json"; echo "token=$GHT_SECRET"; '
)


def gh(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "GH_RUN_HOME": str(home), "NO_COLOR": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _nowhere(home: Path, value: str) -> list[str]:
    return [
        str(p)
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != S.SECRETS_FILE
        and any(f in p.read_bytes() for f in S.encodings(value))
    ]  # fmt: skip


ENDS = {
    "completed": (LEAK, "00:02:00", None),
    "failed": (LEAK + "exit 3", "00:02:00", None),
    "cancelled": (LEAK + "sleep 60", "00:02:00", "cancel"),
    "time limit": (LEAK + "sleep 60", "00:00:04", None),
}


@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_secret_is_scrubbed_however_the_job_ends(tmp_path: Path, end: str) -> None:
    script, limit, action = ENDS[end]
    value = "v4lue'with\"quotes\\é"
    home = tmp_path / "home"
    job = _job(tmp_path, script, limit)
    sub = gh(["submit", str(job), "-x", "local"], home, GHT_SECRET=value)
    assert sub.returncode == 0, sub.stderr
    if action == "cancel":
        leak = next((home / "runs").glob("*/artifacts")) / "leak.json"
        for _ in range(200):  # the workload has written its files
            if leak.exists() and leak.stat().st_size:
                break
            time.sleep(0.05)
        assert gh(["cancel", "last"], home).returncode == 0
    res = gh(["wait", "last"], home, GHT_SECRET=value)
    assert res.returncode in (0, 1), res.stderr
    run = next((home / "runs").iterdir())
    assert (run / S.ATTESTATION).is_file(), (end, res.stderr)
    assert not (run / S.SECRETS_FILE).exists()
    assert _nowhere(home, value) == [], end
    stored = home / "artifacts" / run.name / "artifacts"
    assert (stored / "leak.txt").read_bytes() == b"*" * len(value.encode())


def _killed_run(tmp_path: Path, value: str) -> tuple[Path, object, object]:
    """A local run whose job was killed before its cleaning (SIGKILL): its files hold the value
    and nothing vouches for them, as the store recorded it."""
    from orchestrator.spec.job import load_spec
    from orchestrator.store.db import Run, Store

    home = tmp_path / "home"
    run_dir = home / "runs" / "killed-1"
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "artifacts" / "leak.txt").write_text(value)
    (run_dir / "artifacts" / "clean.txt").write_text("nothing to hide\n")
    (run_dir / "local_0_log.out").write_text(f"token={value}\n")
    (run_dir / S.SECRETS_FILE).write_text(f"export GHT_SECRET='{value}'\n")
    spec = load_spec(_job(tmp_path, "true"))
    store = Store(home)
    store.add_run(
        Run(
            run_id="killed-1",
            name="sec",
            job_name="ghr-killed-1",
            spec_path=None,
            spec_json=spec.model_dump_json(),
            cluster="dev",
            partition="gh",
            executor="local",
            run_dir=str(run_dir),
            state="CANCELLED",
            job_id="local-1",
            ended_at=time.time(),
        )
    )
    return home, store, spec


def test_collection_refuses_what_nobody_showed_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.runs import lifecycle as R

    value = "k1lled-b3fore-cleaning"
    home, store, _ = _killed_run(tmp_path, value)
    monkeypatch.delenv("GHT_SECRET", raising=False)
    manifest = R.collect(store, store.get_run("killed-1"), home)  # type: ignore[attr-defined]
    refused = {r.path: r.reason for r in manifest.refused}
    assert "leak.txt" in refused and "export GHT_SECRET and fetch again" in refused["leak.txt"]
    assert "clean.txt" in refused  # nothing vouched for it either
    assert _nowhere(home / "artifacts", value) == []
    assert not (home / "runs" / "killed-1" / S.SECRETS_FILE).exists()


def test_collection_cleans_the_folder_where_the_value_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.runs import lifecycle as R

    value = "k1lled-b3fore-cleaning"
    home, store, _ = _killed_run(tmp_path, value)
    monkeypatch.setenv("GHT_SECRET", value)
    manifest = R.collect(store, store.get_run("killed-1"), home)  # type: ignore[attr-defined]
    assert manifest.refused == []
    assert any("cleaned of GHT_SECRET here" in n for n in manifest.notes), manifest.notes
    stored = {f.relpath for f in manifest.files}
    assert {"artifacts/leak.txt", "artifacts/clean.txt", "logs/local_0_log.out"} <= stored
    assert _nowhere(home, value) == []
    copy = home / "artifacts" / "killed-1" / "artifacts" / "clean.txt"
    assert (
        hashlib.sha256(copy.read_bytes()).hexdigest()
        == hashlib.sha256(b"nothing to hide\n").hexdigest()
    )
