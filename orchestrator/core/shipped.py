"""What the gh-run package carries besides code, read through `importlib.resources` wherever
gh-run is installed (a wheel, pipx, an editable checkout): never relative to a checkout.

The repository keeps these folders at its top level; the build maps each into the package
(pyproject.toml, [tool.setuptools.package-dir]); each holds an `__init__.py` so that
setuptools' editable finder can map it too:
- `templates/`          -> orchestrator.templates: sbatch, partitions, report, remote, init
- `docs/schema/`        -> orchestrator.schema: the JSON Schemas editors read
- `examples/`           -> orchestrator.examples: admin template overrides (a worked example)
- `tests/data/traces/`  -> orchestrator.examples.traces: two real H100 Kineto traces, read by
  `gh-run analyze example:NAME`
"""

from __future__ import annotations

import functools
from importlib.resources import files
from pathlib import Path

from orchestrator.core.errors import RuntimeFailure, UserError

EXAMPLE_PREFIX = "example:"
# The shipped traces and what each is (tests/data/traces/*/metrics.json has their figures).
EXAMPLE_TRACES = {
    "baseline": "the reference workload on one H100, bf16, 4 loader workers (Kineto)",
    "offload": "the same with activation CPU offloading (Kineto)",
}


@functools.cache
def folder(package: str) -> Path:
    """A data package's folder on the file system (pip installs wheels unpacked; a zipped
    install could not hand Jinja or nsys a path)."""
    try:
        where = files(package)
    except ModuleNotFoundError:
        # a source folder on PYTHONPATH: the build maps the data folders, so they are missing
        raise RuntimeFailure(
            f"gh-run's package data {package} is missing: this gh-run "
            f"({Path(__file__).parents[1]}) is a source folder that was never installed; "
            "install it (pip install -e <checkout>, or the wheel)"
        ) from None
    path = Path(str(where))
    if not path.is_dir():
        raise RuntimeFailure(
            f"gh-run's package data {package} is not a folder on the file system ({where}); "
            "install gh-run with pip or pipx (unzipped), not from a zip file"
        )
    return path


def templates_dir() -> Path:
    """gh-run's own templates (sbatch/, partitions/, report/, remote/, campaign/, init/)."""
    return folder("orchestrator.templates")


def schema_dir() -> Path:
    """The JSON Schemas of job, cluster and campaign files (`gh-run schema all --write`)."""
    return folder("orchestrator.schema")


def examples_dir() -> Path:
    return folder("orchestrator.examples")


def example_trace(ref: str) -> Path:
    """The folder of a shipped example trace named `example:NAME`."""
    name = ref.removeprefix(EXAMPLE_PREFIX)
    if name not in EXAMPLE_TRACES:
        names = ", ".join(EXAMPLE_PREFIX + n for n in EXAMPLE_TRACES)
        raise UserError(f"{ref}: no such shipped example; choose one of {names}")
    path = folder("orchestrator.examples.traces") / name
    if not path.is_dir():
        raise RuntimeFailure(f"{ref}: the example is missing from this install ({path}); reinstall")
    return path


def is_example(ref: str) -> bool:
    return ref.startswith(EXAMPLE_PREFIX)
