"""SQL conditions and values for the integer columns of an nsys export that a hostile file may
fill with something else (text, NULL, a fraction, a blob): what every reader of the export
applies alike, so that such a cell is left out or read as none, never an exception in Python's
int() or numpy. No imports: the readers that a Kineto trace's analysis also imports (the CPU
samples, the OS-runtime stacks) take these without the SQLite table reader's thread pool
(tests/unit/test_cli_imports.py)."""

from __future__ import annotations


def integral(col: str) -> str:
    """SQL: the column holds an integer, or a real with an integral value in int64's range (what
    `CAST(col AS INTEGER)` keeps unchanged: a column declared REAL holds its integers so). Rows
    whose start or end is anything else are left out, on both paths alike (the page reader
    applies the same rule to the values it decodes)."""
    real = f"typeof({col}) = 'real' AND CAST({col} AS INTEGER) = {col}"
    return f"(typeof({col}) = 'integer' OR ({real}))"


def int_or(col: str, other: int | None) -> str:
    """SQL: the column's integer (by `integral`'s rule), or `other` (None: NULL) where it holds
    anything else: for an id or a size that may be missing (a callchain, a string, a process),
    where an unknown one reads as none rather than leaving its row out."""
    alt = "NULL" if other is None else str(int(other))
    return f"(CASE WHEN {integral(col)} THEN CAST({col} AS INTEGER) ELSE {alt} END)"
