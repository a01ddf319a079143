"""How many random examples a property or fuzz test draws.

Under the venv's Python (`make test`'s first unit run, `make check`) every property and fuzz test
draws its full count. The extra interpreters (scripts/test-pythons.sh: 3.13, 3.14) run the same
tests to catch what differs between Pythons, not to search the input space again with the same
code: they set GH_RUN_EXAMPLES_SCALE=0.25 and draw a quarter (never fewer than five, or the
test's own count when that is smaller). Every test still runs under every interpreter.
"""

from __future__ import annotations

import os


def scale() -> float:
    raw = os.environ.get("GH_RUN_EXAMPLES_SCALE", "1")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"GH_RUN_EXAMPLES_SCALE={raw!r} is not a number (e.g. 0.25)") from None
    if not 0 < value <= 1:
        raise ValueError(f"GH_RUN_EXAMPLES_SCALE={raw!r} must lie in (0, 1]")
    return value


def examples(full: int) -> int:
    """`full` scaled by GH_RUN_EXAMPLES_SCALE, at least min(full, 5)."""
    return max(min(full, 5), round(full * scale()))
