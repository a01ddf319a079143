"""`python -m orchestrator.analysis analyze|compare|report ...` (same as the gh-run commands)."""

from __future__ import annotations

import sys

from orchestrator.core.errors import GhRunError


def main() -> int:
    from orchestrator.cli.analysis import make_app

    try:
        make_app()(standalone_mode=False)
    except GhRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
