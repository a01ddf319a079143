"""The SQLite path's parse of `group_concat` text (`sqlite_columns._ints`) against the way it was
parsed before issue 24 (numpy's warning made an error with `warnings.catch_warnings`, which
changed the process's filters from the reader's threads), in the same run, interleaved.

    .venv/bin/python bench/bench_int_text.py [--rows 250000] [--repeat 40]

Prints the median time of each per chunk of `--rows` integers (FETCH_CHUNK_ROWS: one column of
one chunk), and the ratio; with and without negative values (a minus sign takes one more
check)."""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import numpy as np

from orchestrator.analysis.readers.sqlite_columns import _ints


def before(text: Any) -> Any | None:
    """`_ints` before issue 24 (the baseline)."""
    if not isinstance(text, str):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            a = np.fromstring(text, sep=",", dtype=np.int64)
        except (DeprecationWarning, ValueError):
            return None
    return a if a.size == text.count(",") + 1 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=250_000)
    ap.add_argument("--repeat", type=int, default=40)
    args = ap.parse_args()
    rng = np.random.default_rng(24)
    starts = np.cumsum(rng.integers(1_000, 50_000, args.rows)) + 1_700_000_000_000_000_000
    cases = {
        "timestamps (19 digits)": ",".join(map(str, starts.tolist())),
        "ids with -1s": ",".join(map(str, rng.integers(-1, 5000, args.rows).tolist())),
    }
    for name, text in cases.items():
        assert np.array_equal(_ints(text), before(text))
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(args.repeat):
            for label, fn in (("before", before), ("now", _ints)):
                t0 = time.perf_counter()
                fn(text)
                times[label].append(time.perf_counter() - t0)
        b, n = statistics.median(times["before"]), statistics.median(times["now"])
        print(f"{name}: before {b * 1e3:.2f} ms, now {n * 1e3:.2f} ms, now/before x{n / b:.2f}")


if __name__ == "__main__":
    main()
