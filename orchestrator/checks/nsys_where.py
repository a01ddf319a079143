"""Which nsys a job's nodes run, and so what `check` and `doctor SPEC` may judge of it here.

The flags and report names of a job are rendered for one nsys version (nsys/profile.py:
`profile.nsys_version`, else the partition's `nsys.version`, else gh-run's default). Whether
that is the nsys the nodes will run can be asked on this machine only where this machine
runs the same one:
- `image`: nsys inside the image (placement container): the image file is the same here and
  on the nodes, so its nsys is asked here through the runtime;
- `module`: nsys on the host, by a bare name, where the setup lines load environment modules
  (`module load nsight-systems/2024.2`): the nodes take the module's nsys, which this machine
  (a login node, a laptop) need not have; the nsys this machine has is another one and asking it
  would judge the wrong binary (issue 40). Judged instead: the cluster file's declared version,
  against the version the module's name carries when it names one (nsight-systems/2024.2,
  nsys/2023.4.1);
- `path`: nsys on the host by an absolute path, or a bare name with no module loaded: the
  nodes run that path (or the name on the PATH they inherit from the submitting shell), which
  is asked here.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from orchestrator.nsys.versions import NsysVersion

if TYPE_CHECKING:
    from orchestrator.nsys.profile import NsysSetup
    from orchestrator.spec.job import JobSpec

Kind = Literal["image", "module", "path"]
# a command that loads environment modules, and the words after it
_MODULE_CMD = re.compile(r"^(?:module\s+(?:load|add|switch|swap)|ml)\s+(.*)$")
# a module that is Nsight Systems, by its name (nsight-systems/2024.2, nsys/2023.4.1,
# Nsight-Systems/2024.2.1)
_NSYS_MODULE = re.compile(r"(?i)^(?:nsight[-_]?systems|nsys)(?:/(.+))?$")


@dataclass(frozen=True)
class NodesNsys:
    """Where the nodes' nsys comes from, as far as this machine can tell."""

    kind: Kind
    # the setup line that loads it (kind module), else None
    module_line: str | None = None
    # the module's own version, where its name says one
    module_version: NsysVersion | None = None

    @property
    def judged(self) -> str:
        """What `check` judged, in words."""
        if self.kind == "module":
            return "judged: the cluster file, not this machine's nsys, which the nodes do not run"
        if self.kind == "image":
            return "judged: the image's own nsys, asked here; the nodes run the same image"
        return "judged: that nsys here, the path the nodes run"

    def stated(self, found: NsysVersion | None = None) -> str:
        """The module's nsys in words (kind module)."""
        v = found or self.module_version
        said = f"is nsys {v} by its name" if v else "does not name its nsys version"
        return f"the module the nodes load (`{self.module_line}`) {said}"


def module_lines(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Each setup line that loads modules, with the modules it names (`module load a b`,
    `ml a`, possibly after `&&` or `;`)."""
    out = []
    for line in lines:
        for part in re.split(r"&&|\|\||;", line):
            m = _MODULE_CMD.match(part.strip())
            if not m:
                continue
            try:
                words = shlex.split(m.group(1))
            except ValueError:
                words = m.group(1).split()
            names = [w for w in words if not w.startswith("-")]
            out.append((line.strip(), names))
    return out


def nodes_nsys(spec: JobSpec, setup: NsysSetup, setup_lines: list[str]) -> NodesNsys:
    """Where the job's nodes take nsys from (`setup_lines`: the cluster's defaults.setup and the
    partition's setup, as the batch script runs them)."""
    if setup.placement == "container" and spec.container.runtime != "none":
        return NodesNsys("image")
    if setup.path.startswith("/"):
        return NodesNsys("path")
    loads = module_lines(setup_lines)
    for line, names in loads:
        for name in names:
            m = _NSYS_MODULE.match(name)
            if m:
                found = re.search(r"\d{4}\.\d+(?:\.\d+)*", m.group(1) or "")
                version = NsysVersion.parse(found.group(0)) if found else None
                return NodesNsys("module", line, version)
    if loads:
        # modules loaded, none named as Nsight Systems (a CUDA or NVHPC module may bring it):
        # the nodes' PATH is theirs, not this machine's
        return NodesNsys("module", loads[-1][0])
    return NodesNsys("path")
