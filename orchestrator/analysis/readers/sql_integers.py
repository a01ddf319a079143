"""SQL conditions and values for the integer columns of an nsys export that a hostile file may
fill with something else (text, NULL, a fraction, a blob): what every reader of the export
applies alike, so that such a cell is left out or read as none, never an exception in Python's
int() or numpy. No imports: the readers that a Kineto trace's analysis also imports (the CPU
samples, the OS-runtime stacks) take these without the SQLite table reader's thread pool
(tests/unit/test_cli_imports.py)."""

from __future__ import annotations

# The bound of a time, in ns, exclusive on both sides. nsys's times count from the session's
# start, or from the UNIX epoch (`nsys export --ts-normalize`: about 2**60.6 in 2026), moved by
# `--ts-shift`; 2**62 ns either way is 146 years, which no clock gives a profile. Inside it,
# one time minus another fits in 64 bits (numpy's int64 wraps silently, and SQLite's parameters
# refuse a Python int beyond it: a hostile file's 2**63 - 1 stopped `analyze` in both).
TIME_LIMIT_NS = 2**62
# The bound of one size, in bytes, exclusive: 16 TiB in one copy, memset or allocation is 27
# times a GH200 superchip's memory (0.6 TiB) and more than one process of a training job moves
# at once. Below it, half a million such sizes still sum inside 64 bits.
SIZE_LIMIT_BYTES = 2**44


def integral(col: str) -> str:
    """SQL: the column holds an integer, or a real with an integral value in int64's range (what
    `CAST(col AS INTEGER)` keeps unchanged: a column declared REAL holds its integers so). Rows
    whose start or end is anything else are left out, on both paths alike (the page reader
    applies the same rule to the values it decodes)."""
    real = f"typeof({col}) = 'real' AND CAST({col} AS INTEGER) = {col}"
    return f"(typeof({col}) = 'integer' OR ({real}))"


def a_time(col: str) -> str:
    """SQL: the column holds a time: an integer by `integral`'s rule, inside +-TIME_LIMIT_NS.
    Rows whose start or end is not one are left out (the page reader, `_sqlite_pages.c`,
    applies the same bound)."""
    return f"({integral(col)} AND {col} > {-TIME_LIMIT_NS} AND {col} < {TIME_LIMIT_NS})"


def a_size(col: str) -> str:
    """SQL: the column's size in bytes (an integer by `integral`'s rule in [0,
    SIZE_LIMIT_BYTES)), else 0: a copy's or memset's size that no machine holds reads as
    unknown, as a missing one does."""
    ok = f"{integral(col)} AND {col} >= 0 AND {col} < {SIZE_LIMIT_BYTES}"
    return f"(CASE WHEN {ok} THEN CAST({col} AS INTEGER) ELSE 0 END)"


def is_time(value: object) -> bool:
    """A value SQLite gave is a time (`a_time`'s rule; a real is never one here)."""
    return type(value) is int and -TIME_LIMIT_NS < value < TIME_LIMIT_NS


def is_size(value: object) -> bool:
    """A value SQLite gave is a size in bytes (`a_size`'s rule; a real is never one here)."""
    return type(value) is int and 0 <= value < SIZE_LIMIT_BYTES


def int_or(col: str, other: int | None) -> str:
    """SQL: the column's integer (by `integral`'s rule), or `other` (None: NULL) where it holds
    anything else: for an id or a size that may be missing (a callchain, a string, a process),
    where an unknown one reads as none rather than leaving its row out."""
    alt = "NULL" if other is None else str(int(other))
    return f"(CASE WHEN {integral(col)} THEN CAST({col} AS INTEGER) ELSE {alt} END)"
