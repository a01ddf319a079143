"""A shim for `readers/nsys_sqlite.py` alone, which another branch is splitting: it goes when
that file's `core.X` references are rewritten to the new homes (CORE_MOVES in the merge note:
`distinct` is `timeline.columns.distinct`). Nothing else may import it
(tests/unit/test_core_shim.py)."""

from orchestrator.analysis.timeline.columns import distinct

__all__ = ["distinct"]
