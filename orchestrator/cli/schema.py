"""`gh-run schema job|cluster|campaign|job-overlay|campaign-overlay`: JSON Schema generated
from the Pydantic models.

The shipped files in docs/schema/ are these schemas, written by `gh-run schema all --write`
(the wheel carries them as orchestrator.schema); the YAML files point editors at them with a
first line such as `# yaml-language-server: $schema=../docs/schema/job.schema.json`. A project
made by `gh-run init` keeps its own copy in the same place, so its files name them the same way.
A unit test fails when the written files are older than the models.

An editor validates a file as it is on disk, before `extends:` is merged. A variant that
extends a base, and the base itself, hold only part of a job, so they name the overlay schema
(`job-overlay.schema.json`): the same properties and types, unknown keys still refused, but
nothing required. gh-run validates the merged result against the full model as always.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel

from orchestrator.cli.state import out
from orchestrator.core.errors import UserError
from orchestrator.core.paths import nearest_project_home

# Where --write puts the files, under the project's root (or the current folder).
SCHEMA_SUBDIR = Path("docs") / "schema"
Kind = Literal["job", "cluster", "campaign", "job-overlay", "campaign-overlay", "settings"]
KINDS: tuple[Kind, ...] = (
    "job",
    "cluster",
    "campaign",
    "job-overlay",
    "campaign-overlay",
    "settings",
)
# An overlay kind: the schema of a part of a file of its full kind (see the module docstring).
OVERLAY_OF: dict[Kind, Kind] = {"job-overlay": "job", "campaign-overlay": "campaign"}
TITLES: dict[Kind, str] = {
    "job": "gh-run job spec (jobs/*.yaml)",
    "cluster": "gh-run cluster file (clusters/*.yaml)",
    "campaign": "gh-run campaign file (campaigns/*.yaml)",
    "job-overlay": "gh-run job spec part: a file with `extends:` or a base it extends",
    "campaign-overlay": "gh-run campaign file part: a file with `extends:` or a base it extends",
    "settings": "gh-run settings (.gh-run/config.yaml; the site's and the user's config.yaml)",
}


def model_for(kind: Kind) -> type[BaseModel] | None:
    """The model behind a file kind; None when that part of gh-run is not installed."""
    kind = OVERLAY_OF.get(kind, kind)
    if kind == "job":
        from orchestrator.spec.job import JobSpec

        return JobSpec
    if kind == "cluster":
        from orchestrator.site.cluster import Cluster

        return Cluster
    if kind == "settings":
        from orchestrator.site.config import ProjectSettings

        return ProjectSettings
    try:
        from orchestrator import campaign
    except ModuleNotFoundError:
        return None
    model = getattr(campaign, "Campaign", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def schema_for(kind: Kind) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one file kind, as editors and `jsonschema` read it."""
    model = model_for(kind)
    if model is None:
        raise UserError(
            f"schema {kind}: this gh-run has no {kind} model (orchestrator.campaign.Campaign); "
            "choose job or cluster"
        )
    body = model.model_json_schema(mode="validation")
    if kind in OVERLAY_OF:
        body = _partial(body)
    props = body.setdefault("properties", {})
    if OVERLAY_OF.get(kind, kind) in ("job", "campaign"):
        # yamlio merges `extends:` before validation; editors must not flag the key itself.
        props["extends"] = {
            "type": "string",
            "description": "A YAML file (relative to this one) this file is merged onto.",
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://gh-run.invalid/schema/{kind}.schema.json",
        **{k: v for k, v in body.items() if k != "title"},
        "title": TITLES[kind],
    }


def _partial(schema: Any) -> Any:
    """The schema of a part of a document: nothing required (at any depth), so a variant may
    set one field of a nested mapping; types, enums, bounds and `additionalProperties: false`
    stay. A tagged union becomes `anyOf` (a part may leave out its tag, and then more than
    one member may fit it)."""
    if isinstance(schema, list):
        return [_partial(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("required", "discriminator"):
            continue
        if key in ("properties", "$defs", "patternProperties"):
            out[key] = {name: _partial(sub) for name, sub in value.items()}
        elif key in ("default", "examples", "const", "enum"):
            out[key] = value
        elif key == "oneOf":
            out["anyOf"] = _partial(value)
        else:
            out[key] = _partial(value)
    return out


def schema_text(kind: Kind) -> str:
    return json.dumps(schema_for(kind), indent=2, sort_keys=False) + "\n"


def available_kinds() -> list[Kind]:
    return [k for k in KINDS if model_for(k) is not None]


def default_folder() -> Path:
    """docs/schema under the project's root (the folder holding the nearest .gh-run), else
    under the current folder: where the shipped files' first lines point."""
    home = nearest_project_home()
    return (home.parent if home else Path.cwd()) / SCHEMA_SUBDIR


def write_all(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in available_kinds():
        path = folder / f"{kind}.schema.json"
        path.write_text(schema_text(kind))
        written.append(path)
    return written


def schema_cmd(
    kind: Annotated[
        str,
        typer.Argument(
            help="job, cluster, campaign, job-overlay, campaign-overlay, settings, or all "
            "(with --write)."
        ),
    ],
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Write <kind>.schema.json into --out instead (default: docs/schema under the "
            "project's root, the folder holding .gh-run, else under this folder).",
        ),
    ] = False,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="The folder --write writes into.")
    ] = None,
) -> None:
    """Print the JSON Schema of a file kind (for editors: yaml-language-server, IDEs)."""
    if kind == "all":
        if not write:
            raise UserError(
                f"schema all: only with --write; name one of {', '.join(KINDS)} to print"
            )
        for path in write_all(out_dir or default_folder()):
            out.print(f"wrote {path}")
        missing = sorted(set(KINDS) - set(available_kinds()))
        if missing:
            out.print(f"no model for {', '.join(missing)} in this gh-run; not written")
        return
    if kind not in KINDS:
        raise UserError(f"schema {kind}: unknown kind; choose one of {', '.join(KINDS)}")
    text = schema_text(kind)
    if write:
        path = (out_dir or default_folder()) / f"{kind}.schema.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out.print(f"wrote {path}")
        return
    typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_cmd)
