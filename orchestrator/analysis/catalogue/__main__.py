"""`python -m orchestrator.analysis.catalogue FILE.md`: rewrite FILE's catalogue section."""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.analysis.catalogue.docs import rewrite

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m orchestrator.analysis.catalogue docs/metrics.md")
    changed = rewrite(Path(sys.argv[1]))
    print(f"{sys.argv[1]}: {'rewritten' if changed else 'already current'}")
