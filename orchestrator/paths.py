"""Where things live: the repo's shipped files, the gh-run home, cluster files."""

from __future__ import annotations

import os
from pathlib import Path

# gh-run is installed editable from its repo; the shipped templates/clusters/jobs sit beside it.
REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATES_DIR = REPO_ROOT / "templates"
CLUSTERS_DIR = REPO_ROOT / "clusters"


def gh_run_home(override: str | os.PathLike[str] | None = None) -> Path:
    """The gh-run home (state store, artifact store): --home, $GH_RUN_HOME, or ./.gh-run."""
    raw = override or os.environ.get("GH_RUN_HOME") or ".gh-run"
    return Path(raw).expanduser().absolute()


def cluster_search_dirs() -> list[Path]:
    """Cluster files are looked up in $GH_RUN_CLUSTERS (colon-separated), ./clusters, shipped."""
    dirs = [Path(p) for p in os.environ.get("GH_RUN_CLUSTERS", "").split(":") if p]
    dirs += [Path("clusters"), CLUSTERS_DIR]
    return dirs
