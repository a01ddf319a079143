"""The nsys reader under Python 3.12-3.14's warnings (issue 24, item 1).

Two causes stopped `analyze` on Python 3.12 with `internal error: DeprecationWarning: Binding 1
('?1') is a named parameter, but you supplied a sequence`:
- `_ints` turned warnings into errors with `warnings.catch_warnings()`, which changes the whole
  process's filters, from the reader's worker threads: every other thread's warning became an
  error while it ran;
- SQLite's path bound numbered parameters (`?1`) from a sequence, which 3.12 deprecates and
  3.14 refuses.
`make test` also runs these under every extra interpreter it installed, with `-W error`."""

from __future__ import annotations

import re
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import nsys_db, nsys_sqlite, sqlite_columns, sqlite_pages
from tests.budget import examples
from tests.fixtures.nsys_builder import NsysBuilder

INT_LIST = re.compile(r"-?[0-9]+(?:,-?[0-9]+)*")


def _reference(text: str) -> list[int] | None:
    """What `_ints` must give: the integers when the text is integers joined by commas."""
    return [int(x) for x in text.split(",")] if INT_LIST.fullmatch(text) else None


@settings(max_examples=examples(3000), deadline=None)
@given(st.text(alphabet="0123456789,-.a\u00e9", max_size=12))
def test_ints_reads_exactly_integers_joined_by_commas(text: str) -> None:
    # (a plus sign or blanks around a number numpy and SQLite's CAST both read as the number)
    got = sqlite_columns._ints(text)
    want = _reference(text)
    assert (got.tolist() if got is not None else None) == want, text


@pytest.mark.parametrize("text", ["-", "1,-", "1,2-3", "1,2abc", "1,2.5", "1,,2", "1,2,", ",1", ""])
def test_ints_refuses_text_numpy_would_cut_short(text: str) -> None:
    # each of these makes numpy stop early (or read a lone minus as 0)
    assert sqlite_columns._ints(text) is None


def test_ints_changes_no_other_threads_warnings() -> None:
    """While `_ints` refuses text in one thread, another thread's warning stays a warning."""
    stop = threading.Event()

    def refuse() -> None:
        while not stop.is_set():
            sqlite_columns._ints("1,2abc")
            sqlite_columns._ints("1,x")

    errors: list[BaseException] = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: inside and outside `_ints` alike
    worker = threading.Thread(target=refuse)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            worker.start()
            for _ in range(20_000):
                try:
                    warnings.warn("only a warning", UserWarning, stacklevel=1)
                except UserWarning as exc:
                    errors.append(exc)
                    break
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(old)
    assert errors == []


def _export(path: Path) -> Path:
    """Kernels of one device and process and one row of text in a numeric column."""
    b = NsysBuilder(path)
    b.add_gpu(0)
    for i in range(50):
        b.add_kernel(1000 * i, 1000 * i + 500, f"k{i % 3}", launch=1000 * i - 100)
    b.db.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 7"
    )  # text where an integer belongs
    return b.close()


def test_sqlite_path_binds_no_numbered_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's path with every DeprecationWarning an error: the numbered parameters failed
    here from Python 3.12 on (3.11 does not warn)."""
    monkeypatch.setattr(sqlite_pages, "_LIB", None)
    path = _export(tmp_path / "e.sqlite")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cols = ["start", "end", "deviceId", "streamId", "globalPid"]
        got = sqlite_columns.fetch_columns(path, nsys_db.KERNEL, cols)
        (tl,) = nsys_sqlite.read_timelines(path)
    assert got[0].size == 50 and np.all(got[2] == 0)
    assert int(got[3][6]) == 0  # CAST('seven' AS INTEGER), as SQLite reads it
    assert tl.gpu.size == 50
