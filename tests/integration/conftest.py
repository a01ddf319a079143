"""Fixtures of the integration tests that reach the dev cluster over SSH (tests/laptop.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import devcluster
from tests.laptop import Laptop, make_laptop, remove_remote_runs


@pytest.fixture
def laptop(dev_cluster: None, tmp_path: Path) -> Iterator[Laptop]:
    """gh-run as on a laptop; afterwards the login node is up again (a fault test may have
    stopped it; a running one is left alone) and the test's run folders there are removed."""
    machine = make_laptop(tmp_path)
    yield machine
    devcluster.start("sshd")
    remove_remote_runs(machine)
