"""Where things live: the repo's shipped files, the gh-run home, cluster files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# gh-run is installed editable from its repo; the shipped templates/clusters/jobs sit beside it.
REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATES_DIR = REPO_ROOT / "templates"
CLUSTERS_DIR = REPO_ROOT / "clusters"
HOME_DIR_NAME = ".gh-run"

HomeSource = Literal["given", "here", "above", "user"]


@dataclass(frozen=True)
class Home:
    """The gh-run home and how it was found: `given` (--home or $GH_RUN_HOME), `here`
    (./.gh-run), `above` (a .gh-run in a parent folder) or `user` (the per-user default)."""

    path: Path
    source: HomeSource

    def describe(self) -> str:
        """Which home, and why this one: said by `doctor` and `status --verbose`, not by every
        command (each home here is the one the documented rule picks; a command that finds
        nothing names the store it looked in)."""
        how = {
            "given": "given by --home or GH_RUN_HOME",
            "here": "./.gh-run",
            "above": "the nearest .gh-run above this folder",
            "user": "the per-user default: no .gh-run here or above",
        }[self.source]
        return f"gh-run home: {self.path} ({how})"


def user_home() -> Path:
    """The per-user default home: $XDG_DATA_HOME/gh-run, else ~/.local/share/gh-run."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec: a relative path in the variable is invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "gh-run"


def locate_home(override: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Home:
    """The gh-run home, found as git finds a repository: --home or $GH_RUN_HOME when given,
    else the nearest `.gh-run` folder in the current folder or above it, else the per-user
    default (`user_home()`), so runs do not seem to vanish after `cd`."""
    raw = override or os.environ.get("GH_RUN_HOME")
    if raw:
        return Home(Path(raw).expanduser().absolute(), "given")
    here = (cwd or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / HOME_DIR_NAME
        if candidate.is_dir():
            return Home(candidate, "here" if folder == here else "above")
    return Home(user_home(), "user")


def gh_run_home(override: str | os.PathLike[str] | None = None) -> Path:
    """The gh-run home (state store, artifact store); see locate_home."""
    return locate_home(override).path


def cluster_search_dirs() -> list[Path]:
    """Cluster files are looked up in $GH_RUN_CLUSTERS (colon-separated), ./clusters, shipped."""
    dirs = [Path(p) for p in os.environ.get("GH_RUN_CLUSTERS", "").split(":") if p]
    dirs += [Path("clusters"), CLUSTERS_DIR]
    return dirs


def mirror_root(home: Path, cluster: str) -> Path:
    """This machine's copy of a remote cluster's run folders (transport: ssh): run folders are
    written here, copied to the cluster, and their artifacts come back here first."""
    return home / "remote" / cluster
