"""The hostile/broken input corpus (tests/corpus/, index.yaml): every bad job, cluster and
override gives exit code 2 and one clear sentence naming the file and the field; no traceback;
nothing submitted, nothing written. Legal-but-nasty values (tests/corpus/legal/) arrive intact.

The bad cases run the real CLI entry point in-process (`orchestrator.cli.main`: the same code as
the console script, without a Python start per file); a few run as real subprocesses too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.cli import main
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
SMOKE = "jobs/smoke.yaml"
INDEX: list[dict[str, Any]] = yaml.safe_load((CORPUS / "index.yaml").read_text())["cases"]
PWNED = [Path("/tmp/gh-run-pwned"), Path("/tmp/pwned"), Path("/tmp/pwned=x")]


def _generate(name: str, tmp: Path) -> Path:
    path = tmp / Path(name).name
    if name.endswith("huge.yaml"):
        lines = ["name: huge", "workload: {command: 'true'}", "description: |"]
        lines += ["  " + "x" * 100] * 12_000
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text("name: huge\nworkload: {command: 'true'}\ndescription: " + "y" * 2_000_000)
    return path


def _argv(case: dict[str, Any], tmp: Path) -> tuple[list[str], str]:
    """The gh-run command line for a case, and the file name the message must carry."""
    kind = case["as"]
    if kind == "job":
        path = f"tests/corpus/{case['file']}"
        return ["submit", path, "-x", "local"], path
    if kind == "cluster":
        path = f"tests/corpus/{case['file']}"
        return ["submit", SMOKE, "--cluster", path, "-x", "local"], path
    if kind == "set":
        argv = ["submit", SMOKE, "-x", "local"]
        for s in case["set"]:
            argv += ["--set", s]
        return argv, "--set"
    path = str(_generate(case["file"], tmp))
    return ["submit", path, "-x", "local"], Path(path).name


def _nothing_written(home: Path) -> None:
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    assert not (home / "artifacts").exists()
    db = home / "state.db"
    if db.exists():
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)


def test_corpus_is_big_enough() -> None:
    files = list((CORPUS / "job").glob("*.yaml")) + list((CORPUS / "cluster").glob("*.yaml"))
    assert len(files) >= 50
    indexed = {c["file"] for c in INDEX}
    assert {str(f.relative_to(CORPUS)) for f in files} <= indexed, "a corpus file is not indexed"


@pytest.mark.parametrize("case", INDEX, ids=[c["file"] for c in INDEX])
def test_bad_input_exit_2_one_sentence_nothing_written(
    case: dict[str, Any],
    tmp_path: Path,
    gh_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "400")
    for p in PWNED:
        p.unlink(missing_ok=True)
    argv, name = _argv(case, tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert exc.value.code == 2, text
    assert "Traceback" not in text and "internal error" not in text, text
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("error: "), text
    # One problem per file → one line (a file missing two required fields gets one line each,
    # and every line names the file).
    for line in lines:
        # An override checked against the partition names the spec it was applied to.
        named = name in line or (case["as"] == "set" and SMOKE in line)
        assert named, f"{line!r} does not name {name}"
    assert case["field"] in captured.err, f"{captured.err!r} does not name {case['field']!r}"
    assert len(lines) <= 2
    _nothing_written(gh_home)
    assert not any(p.exists() for p in PWNED), "a value was executed"


@pytest.mark.parametrize(
    "file", ["job/name_subshell.yaml", "job/alias_bomb.yaml", "cluster/env_name_injection.yaml"]
)
def test_bad_input_in_a_real_process(file: str, gh_home: Path) -> None:
    args = ["submit", f"tests/corpus/{file}", "-x", "local"]
    if file.startswith("cluster/"):
        args = ["submit", SMOKE, "--cluster", f"tests/corpus/{file}", "-x", "local"]
    res = run_cli(args, gh_home)
    assert res.rc == 2, res.text
    assert "Traceback" not in res.text
    assert res.err.count("\n") <= 2 and f"tests/corpus/{file}" in res.err
    _nothing_written(gh_home)


def _nul_split(data: bytes) -> list[str]:
    assert data.endswith(b"\0")
    return [x.decode("utf-8") for x in data[:-1].split(b"\0")]


@pytest.mark.parametrize("file", sorted(p.name for p in (CORPUS / "legal").glob("*.yaml")))
def test_legal_nasty_values_arrive_intact(file: str, gh_home: Path) -> None:
    """Quotes, $(), backticks, ;, newlines, Jinja, unicode: data, delivered byte for byte."""
    for p in [*PWNED, Path("/tmp/gh-run-pwned-arg"), Path("/tmp/gh-run-pwned-bt")]:
        p.unlink(missing_ok=True)
    Path("/tmp/gh-run-pwned-env").unlink(missing_ok=True)
    spec = yaml.safe_load((CORPUS / "legal" / file).read_text())
    res = run_cli(["submit", f"tests/corpus/legal/{file}", "-x", "local", "--wait"], gh_home)
    assert res.rc == 0, res.text
    from orchestrator.store import Store

    run = Store(gh_home).find_run("last")
    art = gh_home / "artifacts" / run.run_id / "artifacts"
    args = _nul_split((art / "args.bin").read_bytes())
    assert args == spec["workload"]["args"][3:]
    env = _nul_split((art / "env.bin").read_bytes())
    assert env == [spec["workload"]["env"][k] for k in ("V1", "V2", "V3", "V4")]
    for p in ("/tmp/gh-run-pwned-arg", "/tmp/gh-run-pwned-bt", "/tmp/gh-run-pwned-env"):
        assert not Path(p).exists(), f"{p}: a value was executed"
