"""JSON Schemas: generated from the models, up to date in docs/schema/, and every shipped YAML
file validates as an editor sees it (raw, before `extends:` is merged) against the schema its
first line names, and as gh-run reads it (merged) against the full schema and its model.

Which schema a file names: a file with `extends:`, or a base under a `base/` folder, holds only
part of a document and names the overlay schema (`<kind>-overlay.schema.json`: nothing
required, unknown keys still refused); every other file names the full schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from orchestrator.cli.schema import KINDS, available_kinds, schema_text
from orchestrator.site.cluster import load_cluster
from orchestrator.spec import yamlio
from orchestrator.spec.job import load_spec

REPO = Path(__file__).resolve().parents[2]


def _jsonschema() -> ModuleType:
    """jsonschema (a test-only dependency), imported by the tests that validate: its import
    (its format checkers' grammars) costs 1.6 s of CPU in each xdist worker that collects this
    file, most of which run none of them."""
    import jsonschema

    return jsonschema


SCHEMA_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
SCHEMA_DIR = REPO / "docs" / "schema"
SHIPPED = sorted(
    p
    for pattern in (
        "jobs/**/*.yaml",
        "clusters/**/*.yaml",
        "campaigns/**/*.yaml",
        "examples/**/*.yaml",
    )
    for p in REPO.glob(pattern)
)
IDS = [str(p.relative_to(REPO)) for p in SHIPPED]


def kind_of(path: Path) -> str:
    top = path.relative_to(REPO).parts[0]
    return {"jobs": "job", "clusters": "cluster", "campaigns": "campaign"}.get(top, "cluster")


def is_base(path: Path) -> bool:
    return "base" in path.relative_to(REPO).parts[1:-1]


def raw(path: Path) -> dict[str, object]:
    """The file as an editor validates it: parsed, nothing merged (`extends:` kept)."""
    data = yamlio.parse_text(path.read_text(), str(path)).data
    assert isinstance(data, dict)
    return data


def is_part(path: Path) -> bool:
    return is_base(path) or "extends" in raw(path)


def extended(path: Path) -> list[Path]:
    """The files `path` extends, nearest first."""
    out: list[Path] = []
    data = raw(path)
    while isinstance(data.get("extends"), str) and len(out) <= yamlio.MAX_EXTENDS_DEPTH:
        path = (path.parent / str(data["extends"])).resolve()
        out.append(path)
        data = raw(path)
    return out


def named_schema(path: Path) -> Path:
    first = path.read_text().splitlines()[0]
    m = SCHEMA_LINE.match(first)
    assert m, f"{path.relative_to(REPO)}: first line must name its schema for editors"
    return (path.parent / m.group(1)).resolve()


def problems(schema_path: Path, data: object) -> list[str]:
    validator = _jsonschema().Draft202012Validator(json.loads(schema_path.read_text()))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]


@pytest.mark.parametrize("kind", available_kinds())
def test_schema_files_are_up_to_date_with_the_models(kind: str) -> None:
    path = REPO / "docs" / "schema" / f"{kind}.schema.json"
    assert path.is_file(), f"run `gh-run schema all --write` to create {path}"
    assert path.read_text() == schema_text(kind), "run `gh-run schema all --write`"  # type: ignore[arg-type]
    _jsonschema().Draft202012Validator.check_schema(json.loads(path.read_text()))


def test_the_shipped_files_include_variants_and_bases() -> None:
    """The raw checks below are only worth something if they see the partial files."""
    names = set(IDS)
    assert "jobs/base/sft_base.yaml" in names and "jobs/sft_full.yaml" in names
    assert any(is_part(p) for p in SHIPPED) and any(not is_part(p) for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=IDS)
def test_every_shipped_yaml_validates_raw_against_the_schema_it_names(path: Path) -> None:
    kind = kind_of(path)
    if kind not in available_kinds():
        pytest.skip(f"no {kind} model in this gh-run")
    schema_path = named_schema(path)
    expected = f"{kind}-overlay" if is_part(path) else kind
    assert schema_path == SCHEMA_DIR / f"{expected}.schema.json", (
        f"{path.relative_to(REPO)} should name {expected}.schema.json "
        "(the overlay for a file with extends: or a base, else the full schema)"
    )
    # What an editor (yaml-language-server) does: the file as it is, nothing merged.
    errors = problems(schema_path, raw(path))
    assert not errors, errors


@pytest.mark.parametrize("path", SHIPPED, ids=IDS)
def test_every_shipped_yaml_validates_merged_against_the_full_schema(path: Path) -> None:
    kind = kind_of(path)
    if kind not in available_kinds():
        pytest.skip(f"no {kind} model in this gh-run")
    if is_base(path):
        # A base is no document of its own: it is checked merged through the files that
        # extend it, so at least one shipped file must.
        users = [p for p in SHIPPED if path.resolve() in extended(p)]
        assert users, f"{path.relative_to(REPO)}: no shipped file extends this base"
        return
    data = yamlio.read_file(path).data  # `extends:` merged, as gh-run reads it
    errors = problems(SCHEMA_DIR / f"{kind}.schema.json", data)
    assert not errors, errors
    # And the model agrees.
    if kind == "job":
        load_spec(path)
    elif kind == "cluster":
        load_cluster(str(path))
    elif kind == "campaign":
        from orchestrator.campaign import load_campaign

        load_campaign(path)


def test_the_overlay_requires_nothing_but_refuses_what_the_full_schema_refuses() -> None:
    overlay = SCHEMA_DIR / "job-overlay.schema.json"
    full = SCHEMA_DIR / "job.schema.json"
    part = {"extends": "base.yaml", "workload": {"peft_scheme": "none"}}
    assert not problems(overlay, part)
    assert any("'name' is a required property" in m for m in problems(full, part))
    assert not problems(overlay, {"workload": {"env": {"A": "1"}}})  # no kind: either member
    for bad, needle in [
        ({"resorces": {}}, "resorces"),
        ({"resources": {"nodes": 0}}, "0"),
        ({"resources": {"nodes": "two"}}, "two"),
        ({"workload": {"kind": "magic"}}, "magic"),
        ({"workload": {"peft_scheme": "qlora"}}, "qlora"),
        ({"workload": {"cmd": "x"}}, "cmd"),
    ]:
        found = problems(overlay, bad)
        assert found and any(needle in m for m in found), (bad, found)


@pytest.mark.parametrize(
    ("kind", "doc", "needle"),
    [
        (
            "cluster",
            {"name": "c", "default_partition": "p", "partitions": {"p": {"gpus": 1}}},
            "gpus",
        ),
        (
            "cluster",
            {"name": "c", "default_partition": "p", "partitions": {"p": {"arch": "ppc"}}},
            "ppc",
        ),
        (
            "job",
            {"name": "j", "workload": {"kind": "command", "command": "x"}, "resorces": {}},
            "resorces",
        ),
        (
            "job",
            {
                "name": "j",
                "workload": {"kind": "command", "command": "x"},
                "resources": {"nodes": 0},
            },
            "0",
        ),
    ],
)
def test_schema_refuses_what_the_model_refuses(
    kind: str, doc: dict[str, object], needle: str
) -> None:
    validator = _jsonschema().Draft202012Validator(json.loads(schema_text(kind)))  # type: ignore[arg-type]
    messages = [e.message for e in validator.iter_errors(doc)]
    assert any(needle in m for m in messages), messages


def test_cli_prints_the_schema_and_refuses_unknown_kinds() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", "schema", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )

    res = run("cluster")
    assert res.returncode == 0
    assert json.loads(res.stdout)["title"].startswith("gh-run cluster file")
    overlay = run("job-overlay")
    assert overlay.returncode == 0
    assert json.loads(overlay.stdout)["title"].startswith("gh-run job spec part")
    assert '"required"' not in overlay.stdout and '"additionalProperties": false' in overlay.stdout
    bad = run("nodes")
    assert bad.returncode == 2
    assert f"choose one of {', '.join(KINDS)}" in bad.stderr
