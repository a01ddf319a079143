"""A pytest plugin that writes each test's wall time and CPU time (its own process and the
children it waited for: the CLI subprocesses, nsys, compilers) to a JSON-lines file, so that
bench/suite_times.py can say where the suite's time goes and which of it is waiting (SLURM, a
lock, a sleep: wall time, no CPU) and which is computing. Off unless asked for:

    GH_RUN_TEST_TIMES=/tmp/times.jsonl .venv/bin/pytest -p tests.timings -n 2 tests/unit

`python -m pytest` puts the checkout on sys.path, so `-p tests.timings` is found. Do not use
PYTHONPATH=<checkout> instead: the wheel tests' pip then finds the checkout's gh_run.egg-info
and takes gh-run as installed already (test_newcomer fails with no `gh-run` in its venv).

Under pytest-xdist each worker appends its own lines (one `write` per line, O_APPEND), so the
file holds the whole run. The jobs a test submits run under slurmd, not under the test, so
their CPU is not counted here: it is the cluster's.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator

import pytest


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # the worst of setup, call and teardown: a test that passed and failed its teardown failed
    if report.outcome != "passed" or report.nodeid not in _OUTCOMES:
        _OUTCOMES[report.nodeid] = report.outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = os.environ.get("GH_RUN_TEST_TIMES")
    if not path:
        yield
        return
    t0, (self0, kids0) = time.monotonic(), _cpu()
    yield
    wall, (self1, kids1) = time.monotonic() - t0, _cpu()
    line = json.dumps(
        {
            "test": item.nodeid,
            "wall": round(wall, 3),
            "cpu": round(self1 - self0, 3),
            "child_cpu": round(kids1 - kids0, 3),
            "outcome": _OUTCOMES.pop(item.nodeid, "?"),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "python": ".".join(map(str, sys.version_info[:2])),
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
