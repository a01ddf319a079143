"""The hostile/broken input corpus (tests/corpus/, index.yaml): every bad job, cluster and
campaign file and every bad override gives exit code 2 and one line, one sentence naming the
file, the field (and its YAML line where known) and the fix; no traceback; nothing submitted,
nothing written (not even a state store). Legal-but-nasty values (tests/corpus/legal/) arrive
intact.

The bad cases run the real CLI entry point in-process (`orchestrator.cli.main`: the same code as
the console script, without a Python start per file); a few run as real subprocesses too.
"""

from __future__ import annotations

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
KINDS = ("job", "cluster", "campaign")

# What counts as a fix: a clause after "; " that starts with an imperative telling the user what
# to do. "must be >= 1" alone is not a fix; "must be >= 1; set it to 1 or more" is.
FIX_VERBS = frozenset(
    {
        *("add", "ask", "break", "change", "check", "choose", "copy", "define", "drop"),
        *("export", "fix", "flatten", "give", "indent", "keep", "list", "lower", "make"),
        *("name", "pick", "point", "put", "quote", "remove", "rename", "save", "set"),
        *("shorten", "signal", "start", "use", "write"),
    }
)
# Raw pydantic wording means a message went out untranslated.
RAW_PYDANTIC = (
    "input should",
    "value error",
    "field required",
    "extra inputs are not permitted",
    "[type=",
    "validation error",
    "errors.pydantic.dev",
)
# yamlio's fallback for a pydantic error type it does not translate yet.
GENERIC_FIX = "correct the value"


def fix_clause(message: str) -> str | None:
    """The clause of `message` that tells the user what to do, or None."""
    for clause in message.split("; ")[1:]:
        words = clause.split()
        if words and words[0].lower() in FIX_VERBS:
            return clause
    return None


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
    if kind == "campaign":
        path = f"tests/corpus/{case['file']}"
        return ["campaign", "run", path, "-x", "local"], path
    if kind == "campaign-set":
        argv = ["campaign", "run", case["campaign"], "-x", "local"]
        for s in case["set"]:
            argv += ["--set", s]
        return argv, case["campaign"]
    path = str(_generate(case["file"], tmp))
    return ["submit", path, "-x", "local"], Path(path).name


def _nothing_written(home: Path) -> None:
    """Bad input leaves no trace in the gh-run home: no state store, no run or campaign folder."""
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []
    assert not written, f"bad input wrote {written}"


def test_corpus_is_big_enough() -> None:
    files = {kind: sorted((CORPUS / kind).glob("*.yaml")) for kind in KINDS}
    counts = {kind: len(found) for kind, found in files.items()}
    assert all(counts.values()), f"every kind needs bad files: {counts}"
    assert counts["campaign"] >= 15, counts
    assert sum(counts.values()) >= 50, counts
    indexed = {c["file"] for c in INDEX}
    on_disk = {str(f.relative_to(CORPUS)) for found in files.values() for f in found}
    assert on_disk <= indexed, f"not indexed: {sorted(on_disk - indexed)}"
    listed = {f for f in indexed if f.split("/")[0] in KINDS}
    assert listed <= on_disk, f"indexed but missing: {sorted(listed - on_disk)}"


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        ("a.yaml:3: resources.nodes: must be >= 1 (got 0)", None),
        ("a.yaml:3: resources.nodes: must be >= 1; set it to 1 or more", "set it to 1 or more"),
        ("a.yaml: name: is required; it is missing", None),
        (
            "a.yaml: x: unknown key 'y'; remove it or use one of: a, b",
            "remove it or use one of: a, b",
        ),
        ("a.yaml: set it to 1", None),  # a verb, but no clause after the problem
        ("a.yaml: job: nope does not exist; point it at a job spec", "point it at a job spec"),
    ],
)
def test_what_counts_as_a_fix(message: str, fix: str | None) -> None:
    assert fix_clause(message) == fix


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
    assert len(lines) == 1, f"not one line: {lines}"
    line = lines[0]
    assert line.startswith("error: "), text
    # An override checked against the partition names the spec it was applied to.
    named = name in line or (case["as"] == "set" and SMOKE in line)
    assert named, f"{line!r} does not name {name}"
    assert case["field"] in line, f"{line!r} does not name {case['field']!r}"
    if "line" in case:
        assert f"{name}:{case['line']}: " in line, f"{line!r} does not name line {case['line']}"
    lowered = line.lower()
    assert not any(raw in lowered for raw in RAW_PYDANTIC), f"untranslated: {line!r}"
    fix = fix_clause(line)
    assert fix, f"{line!r} says what is wrong but not what to do"
    assert GENERIC_FIX not in line, f"{line!r}: give this error type a real fix in yamlio"
    _nothing_written(gh_home)
    assert not any(p.exists() for p in PWNED), "a value was executed"


@pytest.mark.parametrize(
    "file",
    [
        "job/name_subshell.yaml",
        "job/alias_bomb.yaml",
        "cluster/env_name_injection.yaml",
        # Found only when the variants are expanded and applied: after the file loaded fine.
        "campaign/variant_names_collide.yaml",
        "campaign/override_key_semicolon.yaml",
    ],
)
def test_bad_input_in_a_real_process(file: str, gh_home: Path) -> None:
    args = ["submit", f"tests/corpus/{file}", "-x", "local"]
    if file.startswith("cluster/"):
        args = ["submit", SMOKE, "--cluster", f"tests/corpus/{file}", "-x", "local"]
    if file.startswith("campaign/"):
        args = ["campaign", "run", f"tests/corpus/{file}", "-x", "local"]
    res = run_cli(args, gh_home)
    assert res.rc == 2, res.text
    assert "Traceback" not in res.text
    assert res.err.count("\n") == 1 and f"tests/corpus/{file}" in res.err
    _nothing_written(gh_home)
    assert not gh_home.exists(), "bad input created the gh-run home"


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
    from orchestrator.store.db import Store

    run = Store(gh_home).find_run("last")
    art = gh_home / "artifacts" / run.run_id / "artifacts"
    args = _nul_split((art / "args.bin").read_bytes())
    assert args == spec["workload"]["args"][3:]
    env = _nul_split((art / "env.bin").read_bytes())
    assert env == [spec["workload"]["env"][k] for k in ("V1", "V2", "V3", "V4")]
    for p in ("/tmp/gh-run-pwned-arg", "/tmp/gh-run-pwned-bt", "/tmp/gh-run-pwned-env"):
        assert not Path(p).exists(), f"{p}: a value was executed"


def test_messages_are_printed_verbatim(
    gh_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message is text, not console markup: `[a, b]` (and a user's `[bold]`) stay as written."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as exc:
        main(
            ["campaign", "run", "tests/corpus/campaign/wrong_type_set_mapping.yaml", "-x", "local"]
        )
    assert exc.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith("write a YAML list such as [a, b]")
    with pytest.raises(SystemExit):
        main(["submit", SMOKE, "-x", "local", "--set", "resources.[bold]x=1"])
    assert "[bold]x" in capsys.readouterr().err
    _nothing_written(gh_home)
