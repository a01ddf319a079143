"""A job that runs gh-run's own workloads (`python3 -m workloads.sft`, `-m workloads.cpu_steps`)
runs them with the interpreter gh-run runs under.

The `workloads` package is installed with gh-run (its wheel carries it), so it is importable by
gh-run's own Python and, in general, by no other: a bare `python3` found on the job's PATH is
the system's unless a venv happens to be active where the job starts (`campaign run` from
`.venv/bin/gh-run` failed 7 of 7 variants with "No module named 'workloads'"). So where the
nodes see this machine's files (a cluster reached with transport local: the dev cluster, a
login node on the shared file system, this machine), the job's `python`/`python3` becomes
`sys.executable`, in the rendered script, for all to read. Inside a container image the image's
own Python runs it (gh-run cannot know where its interpreter is there), and over SSH the login
node's interpreter is not this one: `check` then says what to put on the nodes' PATH
(`path_advice`).
"""

from __future__ import annotations

import re
import sys
from pathlib import PurePosixPath

from orchestrator.site.cluster import Cluster
from orchestrator.spec.job import CommandWorkload, JobSpec

PACKAGE = "workloads"
_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?$")


def runs_own(argv: list[str]) -> str | None:
    """The module of gh-run's own workloads that `argv` runs with a bare Python
    (`python3 -m workloads.sft ...` → `workloads.sft`), or None."""
    if len(argv) < 3 or not _PYTHON.match(PurePosixPath(argv[0]).name):
        return None
    if "/" in argv[0]:
        return None  # an interpreter named by its path: the user chose it
    try:
        module = argv[argv.index("-m") + 1]
    except (ValueError, IndexError):
        return None
    if module == PACKAGE or module.startswith(PACKAGE + "."):
        return module
    return None


def _here(spec: JobSpec, cluster: Cluster) -> bool:
    """Whether the job's command runs where this machine's files are (no image, no SSH)."""
    return spec.container.runtime == "none" and cluster.transport == "local"


def with_interpreter(argv: list[str], spec: JobSpec, cluster: Cluster) -> list[str]:
    """`argv` with gh-run's own interpreter in place of a bare `python3`, where the job runs
    gh-run's workloads on nodes that see this machine's files; else `argv` as it is."""
    if runs_own(argv) is None or not _here(spec, cluster):
        return argv
    return [sys.executable, *argv[1:]]


def path_advice(spec: JobSpec, cluster: Cluster, src: str) -> str | None:
    """What `check` says of a job that runs gh-run's workloads with a bare Python gh-run cannot
    replace (in an image, or on a cluster reached over SSH): which Python must be first on the
    nodes' PATH; None when there is nothing to say."""
    w = spec.workload
    if not isinstance(w, CommandWorkload):
        return None
    module = runs_own(w.argv())
    if module is None or _here(spec, cluster):
        return None
    where = (
        f"inside the image {spec.container.image}"
        if spec.container.runtime != "none"
        else f"on the nodes of cluster {cluster.name} (reached over SSH)"
    )
    return (
        f"{src}: workload.command: {w.command} -m {module} runs gh-run's own workloads, which "
        f"only a Python with gh-run installed can import; {where} `{w.command}` must be that "
        "Python: put its bin folder first on PATH (the partition's setup:, e.g. "
        "`export PATH=/apps/gh-run/bin:$PATH`), or write its path in workload.command"
    )
