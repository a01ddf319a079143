"""numpy imported with OpenBLAS held to one thread, for the process that analyses.

numpy's wheels load OpenBLAS, which starts a thread per core when it loads; gh-run's analysis
does no BLAS work (sorts, searches, cumulative sums, quantiles), so those threads are pure cost:
about 20 ms of wall and 70 ms of CPU of every `gh-run analyze` here, a sixth of the analysis of
a small trace (bench/bench_cli.py's `analyze` row). The variable is set only while numpy loads
and then taken back, so that nothing gh-run starts afterwards (a local job, `sbatch`, the
workload) inherits it. A thread count the user set (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or
OMP_NUM_THREADS, which OpenBLAS also reads) is left as it is.

Imported for its effect, first, by the analysis commands (cli/analysis.py)."""

from __future__ import annotations

import os
import sys

_USER_SET = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def import_numpy_one_blas_thread() -> None:
    """Import numpy with OPENBLAS_NUM_THREADS=1 unless numpy is loaded or the user chose."""
    if "numpy" in sys.modules or any(k in os.environ for k in _USER_SET):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


import_numpy_one_blas_thread()
