"""gh-run's memory hook loader, copied into the run folder as `memory_hook/sitecustomize.py`
(`profile.memory`; docs/profiling.md, "Memory").

Python imports the first `sitecustomize` on its path when it starts; task.sh puts this one's
folder first on `PYTHONPATH`. It installs the hook (`gh_run_memory_hook.install`, beside it)
when `GH_RUN_MEMORY` asks for it, then runs the `sitecustomize` this one shadows (the image's
own, e.g. Debian's /usr/lib/python3.X/sitecustomize.py), so the image behaves as without it.
Standard library only; any Python 3.8 on.
"""

from __future__ import annotations

import os
import sys


def _install() -> None:
    if os.environ.get("GH_RUN_MEMORY", "off") in ("", "off"):
        return
    try:
        import gh_run_memory_hook  # type: ignore[import-not-found]  # beside this file

        gh_run_memory_hook.install()
    except Exception as exc:  # the workload runs on unrecorded
        sys.stderr.write(f"gh-run memory hook: not installed ({type(exc).__name__}: {exc})\n")


def _chain() -> None:
    """Run the sitecustomize that this one shadows, as Python would have without it."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_install()
_chain()
