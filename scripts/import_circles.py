"""Count the import circles among gh-run's modules, from the code's own imports.

Every `import` and `from ... import` of `orchestrator.*` counts, those inside functions too (a
lazy import still ties two modules together); those under `if TYPE_CHECKING:` count unless
`--runtime` is given. A package's `__init__` is a facade, left out: an import of a name from it
is not an edge, since the facades resolve their names on first use. A circle is a strongly
connected component of more than one module.

    python scripts/import_circles.py [--runtime] [--root orchestrator]

prints each circle's modules and the total; exits 1 when there is any (tests/unit/
test_import_layers.py asserts none; the layers are import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    """Every module under root by dotted name; packages by their own name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, runtime: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if runtime and isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def graph(root: Path, runtime: bool = False) -> dict[str, set[str]]:
    """module -> the modules it imports (facades left out)."""
    mods = modules(root)
    packages = {name for name, path in mods.items() if path.name == "__init__.py"}
    top = root.name
    edges: dict[str, set[str]] = {name: set() for name in mods if name not in packages}
    for name in edges:
        tree = ast.parse(mods[name].read_text(), str(mods[name]))
        package = name.rsplit(".", 1)[0]
        for node in _imports(tree, runtime):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in mods else base)
            for target in targets:
                if target.split(".")[0] != top:
                    continue
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in mods and target not in packages and target != name:
                    edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).parents[1] / "orchestrator")
    parser.add_argument("--runtime", action="store_true", help="leave out TYPE_CHECKING imports")
    args = parser.parse_args(argv)
    found = circles(graph(args.root, runtime=args.runtime))
    for component in found:
        print(f"circle of {len(component)}: {' '.join(component)}")
    total = sum(len(c) for c in found)
    print(f"{len(found)} circles, {total} modules in them")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
