"""tests/slow_tests.txt (the test functions `make check` leaves out; tests/conftest.py marks
them `slow`) names test functions that exist: a renamed or removed test would otherwise leave a
line that marks nothing, and the list would drift from what bench/suite_times.py measured."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SLOW_TESTS

REPO = Path(__file__).resolve().parents[2]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_listed_slow_test_exists() -> None:
    lines = [line.strip() for line in SLOW_TESTS.read_text().splitlines()]
    listed = [line for line in lines if line and not line.startswith("#")]
    assert listed, "tests/slow_tests.txt lists nothing: make check would run every unit test"
    missing = []
    for entry in listed:
        file, _, name = entry.partition("::")
        path = REPO / file
        if not name or not path.is_file() or name.split("::")[-1] not in _functions(path):
            missing.append(entry)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist: {missing}"
