"""Where cluster files and admin template overrides come from, first match first:

1. a path (`--cluster PATH`, `--set cluster=PATH`, `cluster: path/x.yaml` in a spec);
2. `$GH_RUN_CLUSTERS` (`$GH_RUN_TEMPLATES`): folders, colon-separated;
3. the user's `$XDG_CONFIG_HOME/gh-run/clusters` (`.../templates`; default ~/.config);
4. the site's `/etc/gh-run/clusters` (`.../templates`; `$GH_RUN_SITE_DIR` moves the folder),
   the admin's: `gh-run partitions import --install` writes there;
5. the project's own folders, only when the project says so: `cluster_dirs:` and
   `template_dirs:` in its `.gh-run/config.yaml`, relative to the project's root.

The project comes last and only on request because a `clusters/` folder in the current folder
may be anyone's: another user's file there must never stand in for the admin's (issue 26).
Every file and folder used is checked by `trust.py`. Settings (`config.yaml`) live in the same
three places (user, site, project); they say which cluster is the default (`gh-run init`,
`partitions list`) and, in a project, which of its folders hold cluster files and templates.

Modelled on ReFrame's site configuration (a system file the admin owns, an environment
variable to point elsewhere) and on git's layered configuration (system, global, repository).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, field_validator

from orchestrator.core import trust
from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.core.paths import nearest_project_home, site_dir, user_config_dir

Origin = Literal["path", "env", "user", "site", "project", "builtin"]
CLUSTERS_ENV = "GH_RUN_CLUSTERS"
TEMPLATES_ENV = "GH_RUN_TEMPLATES"
SETTINGS_NAME = "config.yaml"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


class SiteSettings(Strict):
    """`config.yaml` in the site's or the user's gh-run folder."""

    default_cluster: str | None = Field(
        None,
        description="The cluster `gh-run init` writes starter jobs for and `partitions list` "
        "shows when none is named.",
    )

    @field_validator("default_cluster")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a cluster name; use letters, digits, '.', '_', '-'")
        return v


class ProjectSettings(SiteSettings):
    """`.gh-run/config.yaml` of a project (written by `gh-run init`)."""

    cluster_dirs: list[str] = Field(
        default_factory=list,
        description="The project's own folders of cluster files, relative to the project's "
        "root, searched after the user's and the site's (e.g. [clusters]).",
    )
    template_dirs: list[str] = Field(
        default_factory=list,
        description="The project's own template folders, searched after the user's and the "
        "site's (before gh-run's own).",
    )


S = TypeVar("S", bound=SiteSettings)


@dataclass(frozen=True)
class Place:
    """A folder searched for cluster files or templates, and what named it."""

    path: Path
    origin: Origin
    named_by: str


@dataclass(frozen=True)
class FoundCluster:
    """Where a cluster file came from."""

    path: Path
    origin: Origin
    named_by: str

    @property
    def is_site(self) -> bool:
        return self.origin == "site"

    def describe(self) -> str:
        """`the site's (/etc/gh-run/clusters)`, `the project's (.gh-run/config.yaml: ...)`."""
        return _ORIGIN_WORDS[self.origin].format(named_by=self.named_by)


_ORIGIN_WORDS: dict[Origin, str] = {
    "path": "given as a path",
    "env": "from {named_by}",
    "user": "your own ({named_by})",
    "site": "the site's ({named_by})",
    "project": "the project's ({named_by})",
    "builtin": "gh-run's built-in ({named_by})",
}
# What the built-in cluster `local` stands for in listings (it has no file).
BUILTIN_PATH = Path("(built in)")
BUILTIN_WHY = "this machine, the local executor; a local.yaml in the search replaces it"


def builtin(name: str) -> FoundCluster | None:
    """The built-in cluster a name means when no file of that name is found, or None."""
    from orchestrator.site import builtin_cluster

    if name != builtin_cluster.NAME:
        return None
    return FoundCluster(BUILTIN_PATH, "builtin", BUILTIN_WHY)


@dataclass(frozen=True)
class Project:
    """The project a command runs in: the folder holding the nearest `.gh-run`."""

    root: Path
    settings_path: Path
    settings: ProjectSettings = field(default_factory=ProjectSettings)


def _path_list(variable: str) -> list[Path]:
    return [Path(p).expanduser() for p in os.environ.get(variable, "").split(":") if p]


def _read_settings(path: Path, model: type[S]) -> S | None:
    if not path.is_file():
        return None
    trust.check_file(path, "settings file", "move it aside and write your own")
    from orchestrator.spec import yamlio

    doc = yamlio.read_file(
        path, yamlio.Trusted("settings file", "move it aside and write your own")
    )
    if doc.data is None:
        return model()
    return yamlio.to_model(doc, model)


def project(cwd: Path | None = None) -> Project | None:
    home = nearest_project_home(cwd)
    if home is None:
        return None
    path = home / SETTINGS_NAME
    settings = _read_settings(path, ProjectSettings) or ProjectSettings()
    return Project(home.parent, path, settings)


def site_settings() -> SiteSettings | None:
    return _read_settings(site_dir() / SETTINGS_NAME, SiteSettings)


def user_settings() -> SiteSettings | None:
    return _read_settings(user_config_dir() / SETTINGS_NAME, SiteSettings)


def places(kind: Literal["clusters", "templates"], cwd: Path | None = None) -> list[Place]:
    """Every folder searched for `kind`, in order, whether or not it exists."""
    variable = CLUSTERS_ENV if kind == "clusters" else TEMPLATES_ENV
    out = [Place(p, "env", f"${variable}") for p in _path_list(variable)]
    out.append(Place(user_config_dir() / kind, "user", f"$XDG_CONFIG_HOME/gh-run/{kind}"))
    site_var = "$GH_RUN_SITE_DIR" if os.environ.get("GH_RUN_SITE_DIR") else "/etc/gh-run"
    out.append(Place(site_dir() / kind, "site", f"{site_var}/{kind}"))
    proj = project(cwd)
    if proj is not None:
        key = "cluster_dirs" if kind == "clusters" else "template_dirs"
        for d in getattr(proj.settings, key):
            rel = _display(proj.settings_path, cwd)
            out.append(Place((proj.root / d).absolute(), "project", f"{rel}: {key}"))
    return out


def _display(path: Path, cwd: Path | None) -> str:
    try:
        return str(path.relative_to((cwd or Path.cwd()).absolute()))
    except ValueError:
        return str(path)


def cluster_places(cwd: Path | None = None) -> list[Place]:
    """The folders searched for `NAME.yaml`, in order (see the module docstring)."""
    return places("clusters", cwd)


def template_places(cwd: Path | None = None) -> list[Place]:
    """Admin template override folders, in order, each checked (`trust.py`); those that do not
    exist are left out. A cluster's own `template_dirs` come before these, gh-run's after."""
    out = []
    for place in places("templates", cwd):
        if place.path.is_dir():
            trust.check_folder(place.path, "templates", _FIX_FOLDER)
            out.append(place)
    return out


_FIX_FOLDER = "keep your own files in a folder you own, and the site's in /etc/gh-run (root's)"
FIX_FILE = (
    "read it, copy what you trust to a file you own (e.g. ~/.config/gh-run/clusters/), or ask "
    "an admin to install it in the site's folder (gh-run partitions import --install)"
)


def is_path(name_or_path: str) -> bool:
    return Path(name_or_path).suffix in {".yaml", ".yml"} or "/" in name_or_path


def find_cluster(name_or_path: str, cwd: Path | None = None) -> FoundCluster:
    """The cluster file a name or path means, and where it came from; refused when another
    user owns it (or its folder) or every user can write it."""
    if is_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise UserError(f"cluster file {name_or_path} does not exist; check the path")
        trust.check_file(path, "cluster file", FIX_FILE)
        site = site_dir() / "clusters"
        if path.resolve().parent == site.resolve():
            return FoundCluster(path, "site", str(site))
        return FoundCluster(path, "path", name_or_path)
    if not NAME_RE.fullmatch(name_or_path):
        raise UserError(f"cluster {name_or_path!r}: not a valid cluster name")
    searched = cluster_places(cwd)
    for place in searched:
        for ext in (".yaml", ".yml"):
            candidate = place.path / f"{name_or_path}{ext}"
            if candidate.is_file():
                trust.check_folder(place.path, "cluster files", _FIX_FOLDER)
                trust.check_file(candidate, "cluster file", FIX_FILE)
                return FoundCluster(candidate, place.origin, place.named_by)
    own = builtin(name_or_path)
    if own is not None:
        return own
    where = ", ".join(
        str(p.path) if str(p.path).endswith(p.named_by) else f"{p.path} ({p.named_by})"
        for p in searched
    )
    here = Path.cwd() / "clusters" / f"{name_or_path}.yaml"
    if here.is_file() and not any(p.path.absolute() == here.parent for p in searched):
        # The old habit, clusters/NAME.yaml beside the jobs: say why it is not used.
        raise UserError(
            f"cluster {name_or_path!r} not found in {where}; add `cluster_dirs: [clusters]` to "
            f".gh-run/config.yaml to use clusters/{name_or_path}.yaml here (a project's folder "
            "is searched only on its word, and only if the file is yours), or give its path"
        )
    raise UserError(
        f"cluster {name_or_path!r} not found in {where}; check the name (`gh-run doctor` lists "
        "the clusters found), ask an admin to install the site's file (gh-run partitions import "
        "--install), or give the file's path"
    )


@dataclass
class Visible:
    """A cluster name, the file that answers for it, and the files it hides."""

    name: str
    found: FoundCluster
    hidden: list[FoundCluster] = field(default_factory=list)


def visible_clusters(cwd: Path | None = None) -> tuple[list[Visible], list[str]]:
    """Every cluster file the search sees, by name (first place wins), and the folders or
    files refused on the way (one sentence each)."""
    by_name: dict[str, Visible] = {}
    refused: list[str] = []
    for place in cluster_places(cwd):
        if not place.path.is_dir():
            continue
        try:
            trust.check_folder(place.path, "cluster files", _FIX_FOLDER)
        except UserError as exc:
            refused.append(str(exc))
            continue
        for f in sorted(place.path.iterdir()):
            if f.suffix not in (".yaml", ".yml") or not f.is_file():
                continue
            if not NAME_RE.fullmatch(f.stem):
                continue
            try:
                trust.check_file(f, "cluster file", FIX_FILE)
            except UserError as exc:
                refused.append(str(exc))
                continue
            found = FoundCluster(f, place.origin, place.named_by)
            if f.stem in by_name:
                by_name[f.stem].hidden.append(found)
            else:
                by_name[f.stem] = Visible(f.stem, found)
    return list(by_name.values()), refused


def default_cluster(cwd: Path | None = None) -> tuple[str, str]:
    """The cluster to use when none is named, and why: the project's, the user's or the site's
    `default_cluster`, else the one cluster file the search sees."""
    proj = project(cwd)
    for settings, where in (
        (proj.settings if proj else None, _display(proj.settings_path, cwd) if proj else ""),
        (user_settings(), str(user_config_dir() / SETTINGS_NAME)),
        (site_settings(), str(site_dir() / SETTINGS_NAME)),
    ):
        if settings is not None and settings.default_cluster:
            return settings.default_cluster, f"default_cluster in {where}"
    visible, _ = visible_clusters(cwd)
    if len(visible) == 1:
        return visible[0].name, f"the only cluster file found ({visible[0].found.path})"
    if not visible:
        from orchestrator.site import builtin_cluster

        # Nothing installed: this machine, so that an installed gh-run works with nothing else.
        return builtin_cluster.NAME, (
            f"no site, user or project cluster file found (`gh-run doctor` lists where it "
            f"looks): gh-run's built-in cluster, {builtin_cluster.WHAT}"
        )
    names = ", ".join(v.name for v in visible)
    raise UserError(
        f"{len(visible)} clusters found ({names}) and none is the default; pass --cluster "
        f"NAME, or set default_cluster in {user_config_dir() / SETTINGS_NAME}"
    )


def origin_note(found: FoundCluster | None, name: str) -> str | None:
    """What render, submit and the run record say of a cluster file that is not the site's
    (gh-run's built-in cluster is nobody's limits but this machine's: nothing to say)."""
    if found is None or found.is_site or found.origin == "builtin":
        return None
    return (
        f"cluster {name}: {_display(found.path, None)} is {found.describe()}, not a site file "
        "(its limits, templates and setup lines are not the admin's)"
    )
