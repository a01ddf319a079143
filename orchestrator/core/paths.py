"""Where things live: the gh-run home, the project a command runs in, the user's and the site's
configuration folders. Package data (templates, schemas, examples) is `shipped.py`'s; where
cluster files and template overrides are looked for is `site_config.py`'s."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HOME_DIR_NAME = ".gh-run"
# The site's configuration (cluster files, template overrides, config.yaml), the admin's:
# /etc/gh-run, or where $GH_RUN_SITE_DIR says (a site whose software lives on a shared file
# system sets it in its environment module).
SITE_DIR_ENV = "GH_RUN_SITE_DIR"
DEFAULT_SITE_DIR = Path("/etc/gh-run")

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


def _xdg(variable: str, default: str) -> Path:
    value = os.environ.get(variable, "")
    # The XDG spec: a relative path in the variable is invalid and must be ignored.
    return Path(value) if value and Path(value).is_absolute() else Path.home() / default


def user_home() -> Path:
    """The per-user default home: $XDG_DATA_HOME/gh-run, else ~/.local/share/gh-run."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "gh-run"


def user_config_dir() -> Path:
    """The user's own configuration: $XDG_CONFIG_HOME/gh-run, else ~/.config/gh-run."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "gh-run"


def user_cache_dir() -> Path:
    """The user's cache: $XDG_CACHE_HOME/gh-run, else ~/.cache/gh-run."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "gh-run"


def site_dir() -> Path:
    """The site's configuration folder: $GH_RUN_SITE_DIR, else /etc/gh-run."""
    value = os.environ.get(SITE_DIR_ENV, "")
    return Path(value).absolute() if value else DEFAULT_SITE_DIR


def nearest_project_home(cwd: Path | None = None) -> Path | None:
    """The nearest `.gh-run` folder in the current folder or above it (a project's home and
    settings), refused when another user owns it or every user can write it: a run row planted
    there would make `gh-run cancel` signal the planter's choice of process."""
    here = (cwd or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / HOME_DIR_NAME
        if candidate.is_dir():
            check_home(candidate, "found above this folder" if folder != here else "here")
            return candidate
    return None


def check_home(path: Path, how: str) -> None:
    from orchestrator.core import trust
    from orchestrator.core.errors import UserError

    for part, what in ((path, f"the gh-run home {how}"), (path / "state.db", "its state store")):
        why = trust.problem(part, by_name=part == path)
        if why:
            fix = (
                "make a home of your own (`mkdir .gh-run` in a folder you own, or pass --home "
                "DIR / set GH_RUN_HOME)"
            )
            raise UserError(
                f"{part}: {what} is {why}; gh-run will neither read the runs recorded there nor "
                f"write yours: {trust.fix_for(part, why, fix)}"
            )


def locate_home(override: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Home:
    """The gh-run home, found as git finds a repository: --home or $GH_RUN_HOME when given,
    else the nearest `.gh-run` folder in the current folder or above it, else the per-user
    default (`user_home()`), so runs do not seem to vanish after `cd`. A home another user
    owns, or every user can write, is refused (check_home)."""
    raw = override or os.environ.get("GH_RUN_HOME")
    if raw:
        given = Path(raw).expanduser().absolute()
        check_home(given, "given (--home or $GH_RUN_HOME)")
        return Home(given, "given")
    here = (cwd or Path.cwd()).absolute()
    found = nearest_project_home(here)
    if found is not None:
        return Home(found, "here" if found.parent == here else "above")
    home = user_home()
    check_home(home, "per-user default")
    return Home(home, "user")


def gh_run_home(override: str | os.PathLike[str] | None = None) -> Path:
    """The gh-run home (state store, artifact store); see locate_home."""
    return locate_home(override).path


def mirror_root(home: Path, cluster: str) -> Path:
    """This machine's copy of a remote cluster's run folders (transport: ssh): run folders are
    written here, copied to the cluster, and their artifacts come back here first."""
    return home / "remote" / cluster


def display_path(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
