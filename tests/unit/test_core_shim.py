"""`orchestrator/analysis/core.py` is dissolved (issue 27 item 2): what is left of it is a
re-export shim for `readers/nsys_sqlite.py` alone, until that file's references are rewritten
to the new homes. Nothing else may import it, and it re-exports only what its importer uses,
so the shim cannot grow users or names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "orchestrator/analysis/core.py"
ALLOWED = {"orchestrator/analysis/readers/nsys_sqlite.py"}


def _imports_core(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name == "orchestrator.analysis.core" for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            if node.module == "orchestrator.analysis.core":
                return True
            if node.module == "orchestrator.analysis" and any(a.name == "core" for a in node.names):
                return True
    return False


def _core_names(tree: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "core"
    }


def _python_files() -> list[Path]:
    out: list[Path] = []
    for top in ("orchestrator", "tests", "bench", "scripts", "workloads"):
        out.extend(p for p in (ROOT / top).rglob("*.py") if p != CORE)
    return out


def test_only_the_nsys_reader_imports_the_core_shim() -> None:
    importers = {
        str(p.relative_to(ROOT)): tree
        for p in _python_files()
        if _imports_core(tree := ast.parse(p.read_text(), filename=str(p)))
    }
    assert set(importers) <= ALLOWED, "import the piece from its new home, not core"
    if not CORE.exists():
        assert not importers
        return
    shim = ast.parse(CORE.read_text())
    exported = {
        elt.value
        for node in ast.walk(shim)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for elt in node.value.elts  # type: ignore[attr-defined]
        if isinstance(elt, ast.Constant)
    }
    used = set().union(*(_core_names(t) for t in importers.values()))
    assert exported == used
    assert not [n for n in shim.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
