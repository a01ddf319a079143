"""How gh-run is set up here (`gh-run doctor`): the home, where cluster files and templates come
from and which file answers for each cluster name, the default cluster, whether the compiled
readers are built and what doing without them costs, and the compiled-template cache."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError

if TYPE_CHECKING:
    from orchestrator.site.config import Visible

PlaceState = Literal["ok", "missing", "refused"]

# What each compiled part does, and what its Python fallback costs (docs/metrics.md, "Speed":
# bench/bench_analyze.py, measured with and without the parts on the same files).
NATIVE_PARTS = {
    "_kineto_scan": (
        "Kineto trace layout scan",
        "Kineto traces are read with numpy over the bytes, about 4x slower",
    ),
    "_sqlite_pages": (
        "nsys export page reader",
        "nsys exports are read through SQLite, about 2x the wall time and 2.5x the CPU",
    ),
}


class PlaceReport(Strict):
    path: str
    named_by: str
    state: PlaceState
    clusters: list[str] = Field(default_factory=list, description="Cluster files in it.")
    detail: str | None = None


class ClusterAnswer(Strict):
    name: str
    file: str
    found_by: str
    hidden: list[str] = Field(
        default_factory=list, description="Files of the same name further down the search."
    )


class NativePart(Strict):
    name: str
    what: str
    built: bool
    path: str | None = None
    without: str = Field(description="What gh-run does without it, and what that costs.")


class SetupReport(Strict):
    """`gh-run doctor --json`'s `setup`."""

    home: str
    home_found: str
    cluster_places: list[PlaceReport]
    clusters: list[ClusterAnswer]
    refused: list[str]
    default_cluster: str | None
    default_cluster_why: str
    template_places: list[PlaceReport]
    native: list[NativePart]
    native_off: bool = Field(description="GH_RUN_NO_NATIVE_SCAN is set: the parts are not used.")
    template_cache: str
    template_cache_state: str


def _place_state(path: Path, by_name: bool = True) -> tuple[PlaceState, str | None]:
    from orchestrator.core import trust

    if not path.is_dir():
        return "missing", None
    why = trust.problem(path, by_name=by_name)
    return ("refused", why) if why else ("ok", None)


def _builtin(visible: list[Visible]) -> list[ClusterAnswer]:
    """gh-run's built-in cluster `local`, listed last unless a file of that name hides it."""
    from orchestrator.site import builtin_cluster
    from orchestrator.site import config as site_config

    own = site_config.builtin(builtin_cluster.NAME)
    if own is None or any(v.name == builtin_cluster.NAME for v in visible):
        return []
    return [
        ClusterAnswer(
            name=builtin_cluster.NAME, file=str(own.path), found_by=own.describe(), hidden=[]
        )
    ]


def build(home_override: str | None = None) -> SetupReport:
    import os

    from orchestrator.analysis.readers import native
    from orchestrator.core.paths import locate_home
    from orchestrator.render.scripts import bytecode_cache_dir
    from orchestrator.site import config as site_config

    home_path, home_found = "-", ""
    try:
        home = locate_home(home_override)
        home_path, home_found = str(home.path), home.describe()
    except UserError as exc:
        home_found = f"gh-run home: refused: {exc}"
    visible, refused = site_config.visible_clusters()
    places = []
    for place in site_config.cluster_places():
        state, detail = _place_state(place.path)
        names = [v.name for v in visible if v.found.path.parent == place.path]
        names += [v.name for v in visible for h in v.hidden if h.path.parent == place.path]
        places.append(
            PlaceReport(
                path=str(place.path),
                named_by=place.named_by,
                state=state,
                clusters=sorted(names),
                detail=detail,
            )
        )
    templates = []
    for place in site_config.places("templates"):
        state, detail = _place_state(place.path)
        templates.append(
            PlaceReport(path=str(place.path), named_by=place.named_by, state=state, detail=detail)
        )
    try:
        default, why = site_config.default_cluster()
    except UserError as exc:
        default, why = None, str(exc)
    parts = []
    for stem, (what, without) in NATIVE_PARTS.items():
        lib = native.library_path(stem)
        parts.append(
            NativePart(
                name=stem,
                what=what,
                built=lib is not None,
                path=str(lib) if lib else None,
                without=without,
            )
        )
    cache = bytecode_cache_dir()
    from orchestrator.core import trust

    cache_state = "not made yet" if not cache.exists() else (trust.private_dir(cache) or "ok")
    return SetupReport(
        home=home_path,
        home_found=home_found,
        cluster_places=places,
        clusters=[
            ClusterAnswer(
                name=v.name,
                file=str(v.found.path),
                found_by=v.found.describe(),
                hidden=[str(h.path) for h in v.hidden],
            )
            for v in visible
        ]
        + _builtin(visible),
        refused=refused,
        default_cluster=default,
        default_cluster_why=why,
        template_places=templates,
        native=parts,
        native_off=bool(os.environ.get("GH_RUN_NO_NATIVE_SCAN")),
        template_cache=str(cache),
        template_cache_state=cache_state,
    )
