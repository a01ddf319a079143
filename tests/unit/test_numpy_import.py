"""The analysis commands load numpy with one OpenBLAS thread (numpy_import's docstring): the
process keeps no BLAS thread of its own, the variable is taken back so that nothing gh-run
starts inherits it, and a thread count the user chose is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = (
    "import json, os; import orchestrator.cli.analysis; "
    "print(json.dumps([len(os.listdir('/proc/self/task')), "
    "{k: v for k, v in os.environ.items() if k.endswith('_NUM_THREADS')}]))"
)


def _probe(extra: dict[str, str]) -> tuple[int, dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")} | extra
    res = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    threads, seen = json.loads(res.stdout)
    return int(threads), seen


def test_the_analysis_commands_start_no_blas_threads_and_leave_no_variable() -> None:
    threads, seen = _probe({})
    assert threads == 1  # the main thread alone: OpenBLAS started none
    assert seen == {}  # nothing gh-run starts afterwards inherits it


def test_a_thread_count_the_user_chose_is_kept() -> None:
    want = str(max(os.cpu_count() or 1, 2))
    threads, seen = _probe({"OPENBLAS_NUM_THREADS": want})
    assert seen == {"OPENBLAS_NUM_THREADS": want}
    if (os.cpu_count() or 1) > 1:  # OpenBLAS starts its threads where it has cores for them
        assert threads > 1
