"""The layers hold: no circle of imports anywhere in orchestrator/ (issue 38). A circle ties
modules together whatever folders they sit in, so that a room that looks like a layer is not
one; imports inside functions count (a lazy import still ties two modules), package facades
do not (they resolve their names on first use). The rooms' order itself is import-linter's
contracts in pyproject.toml (`make lint`)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import import_circles  # noqa: E402


def test_no_module_of_orchestrator_is_in_an_import_circle() -> None:
    found = import_circles.circles(import_circles.graph(REPO / "orchestrator"))
    assert not found, (
        "import circles (break each: the shared part moves down a layer): "
        + "; ".join(" -> ".join(c) for c in found)
    )


def test_the_count_sees_a_circle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    """The counter itself: two modules that import each other, one of them lazily, are one
    circle; a facade (`__init__`) that names both is not part of it."""
    pkg = tmp_path / "orchestrator"
    (pkg / "room").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "room" / "__init__.py").write_text("from orchestrator.room import a, b\n")
    (pkg / "room" / "a.py").write_text("from orchestrator.room.b import f\n")
    (pkg / "room" / "b.py").write_text("def f():\n    from orchestrator.room import a\n")
    (pkg / "room" / "c.py").write_text("from orchestrator.room import a\n")
    assert import_circles.circles(import_circles.graph(pkg)) == [
        ["orchestrator.room.a", "orchestrator.room.b"]
    ]
