"""What pyproject.toml cannot say alone:

- the compiled parts of gh-run, each loaded with ctypes and each optional: without a C compiler
  the install still succeeds and the Python readers serve (`gh-run doctor` says which):
  orchestrator/analysis/readers/_kineto_scan.c (kineto_scan.py): the Kineto scan (JSON checked,
  events read);
  orchestrator/analysis/readers/_sqlite_pages.c (sqlite_pages.py): the nsys export's big tables,
  read from the file's pages;
- the package data kept at the repository's top level, mapped into the package (read through
  importlib.resources, orchestrator/core/shipped.py): the code's packages are found, the data
  packages are named, since find_packages sees only folders under orchestrator/.
"""

import os

from setuptools import Extension, find_packages, setup

# package -> (folder, the subfolders shipped (None: all of them))
DATA_PACKAGES: dict[str, tuple[str, list[str] | None]] = {
    "orchestrator.templates": ("templates", None),
    "orchestrator.schema": ("docs/schema", None),
    "orchestrator.examples": ("examples", None),
    # Two real H100 Kineto traces (`gh-run analyze example:baseline`), not the test corpus.
    "orchestrator.examples.traces": ("tests/data/traces", ["baseline", "offload"]),
}
DATA_FILES = ["*.j2", "*.sh", "*.yaml", "*.json", "*.json.gz"]


def data_packages() -> tuple[list[str], dict[str, list[str]]]:
    """Each data folder and its importable subfolders as packages (setuptools ships a folder's
    files only as some package's data, and warns of an importable folder left out); a folder
    whose name cannot be imported (admin-templates) ships as data of the package above it."""
    packages: list[str] = []
    data: dict[str, list[str]] = {}
    for package, (folder, only) in DATA_PACKAGES.items():
        for here, dirs, _ in os.walk(folder):
            rel = os.path.relpath(here, folder)
            parts = [] if rel == "." else rel.split(os.sep)
            dirs[:] = sorted(
                d for d in dirs if d != "__pycache__" and (parts or only is None or d in only)
            )
            n = len(parts)
            while n and not all(p.isidentifier() for p in parts[:n]):
                n -= 1
            owner = ".".join([package, *parts[:n]])
            if n == len(parts):
                packages.append(owner)
            below = "/".join(parts[n:])
            data.setdefault(owner, []).extend(
                f"{below}/{pattern}" if below else pattern for pattern in DATA_FILES
            )
    return packages, data


PACKAGES, PACKAGE_DATA = data_packages()

setup(
    packages=[
        *find_packages(include=["orchestrator", "orchestrator.*", "workloads", "workloads.*"]),
        *PACKAGES,
    ],
    package_dir={package: folder for package, (folder, _) in DATA_PACKAGES.items()},
    package_data={"orchestrator": ["py.typed"], **PACKAGE_DATA},
    ext_modules=[
        Extension(
            "orchestrator.analysis.readers._kineto_scan",
            sources=["orchestrator/analysis/readers/_kineto_scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "orchestrator.analysis.readers._sqlite_pages",
            sources=["orchestrator/analysis/readers/_sqlite_pages.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ],
)
