"""JSON Schemas: generated from the models, up to date in docs/schema/, and every shipped YAML
file validates against the schema its first line names (and loads through its model)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema  # test-only dependency
import pytest

from orchestrator import yamlio
from orchestrator.cli.schema import KINDS, available_kinds, schema_text
from orchestrator.cluster import load_cluster
from orchestrator.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SCHEMA_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
SHIPPED = sorted(
    p
    for pattern in ("jobs/*.yaml", "clusters/*.yaml", "campaigns/*.yaml", "examples/**/*.yaml")
    for p in REPO.glob(pattern)
)


def kind_of(path: Path) -> str:
    top = path.relative_to(REPO).parts[0]
    return {"jobs": "job", "clusters": "cluster", "campaigns": "campaign"}.get(top, "cluster")


@pytest.mark.parametrize("kind", available_kinds())
def test_schema_files_are_up_to_date_with_the_models(kind: str) -> None:
    path = REPO / "docs" / "schema" / f"{kind}.schema.json"
    assert path.is_file(), f"run `gh-run schema all --write` to create {path}"
    assert path.read_text() == schema_text(kind), "run `gh-run schema all --write`"  # type: ignore[arg-type]
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_yaml_validates_against_its_schema(path: Path) -> None:
    kind = kind_of(path)
    if kind not in available_kinds():
        pytest.skip(f"no {kind} model in this gh-run")
    first = path.read_text().splitlines()[0]
    m = SCHEMA_LINE.match(first)
    assert m, f"{path.relative_to(REPO)}: first line must name its schema for editors"
    schema_path = (path.parent / m.group(1)).resolve()
    assert schema_path == REPO / "docs" / "schema" / f"{kind}.schema.json"
    validator = jsonschema.Draft202012Validator(json.loads(schema_path.read_text()))
    data = yamlio.read_file(path).data  # `extends:` merged, as gh-run reads it
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
    assert not errors, errors
    # And the model agrees.
    if kind == "job":
        load_spec(path)
    elif kind == "cluster":
        load_cluster(str(path))


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
    validator = jsonschema.Draft202012Validator(json.loads(schema_text(kind)))  # type: ignore[arg-type]
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
    bad = run("nodes")
    assert bad.returncode == 2
    assert f"choose one of {', '.join(KINDS)}" in bad.stderr
