"""The nsys judged where it runs (issue 40; checks/nsys_where.py): where the nodes load nsys as
an environment module, `check` judges the cluster file's declared version against the module's
own, never this machine's nsys (here /opt/gh-run/bin/nsys, 2023.4, which the nodes of the
fictional GH200 site do not run), and says which it judged; where the nodes run a path or the
image's nsys, the real binary is asked here as before."""

from __future__ import annotations

from pathlib import Path

import yaml

from orchestrator.checks import preflight
from orchestrator.checks.doctor import nsys_check
from orchestrator.checks.fit import fit_partition
from orchestrator.checks.nsys_where import module_lines, nodes_nsys
from orchestrator.checks.prepare import Prepared
from orchestrator.nsys.profile import nsys_setup
from orchestrator.site.cluster import Cluster, load_cluster
from orchestrator.spec.job import JobSpec
from orchestrator.spec.yamlio import load_model

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "examples" / "gh200-site" / "cluster.yaml"  # fictional


def _quad(*extra: str, cluster: Cluster | None = None) -> Prepared:
    over = [
        f"cluster={SITE}",
        "partition=quad",
        "resources.ntasks_per_node=4",
        "resources.gpus_per_node=4",
        *extra,
    ]
    spec = load_model(REPO / "jobs" / "sft.yaml", JobSpec, over)
    cl = cluster or load_cluster(str(SITE))
    name, part = fit_partition(spec, cl, "job")
    return Prepared(spec, None, cl, name, part)


def _site(module: str, version: str | None) -> Cluster:
    doc = yaml.safe_load(SITE.read_text())
    quad = doc["partitions"]["quad"]
    quad["setup"] = [f"module load {module}"]
    if version is None:
        quad["nsys"].pop("version")
    else:
        quad["nsys"]["version"] = version
    return Cluster.model_validate(doc)


def test_module_lines() -> None:
    lines = ["module purge", "ml cuda/12.4 nsys/2023.4.1", "cd /x && module load -q a b"]
    assert module_lines(lines) == [
        ("ml cuda/12.4 nsys/2023.4.1", ["cuda/12.4", "nsys/2023.4.1"]),
        ("cd /x && module load -q a b", ["a", "b"]),
    ]


def test_where_each_partition_takes_nsys_from() -> None:
    prep = _quad()
    setup = nsys_setup(prep.spec.profile, prep.partition.nsys, "quad")
    lines = [*prep.cluster.defaults.setup, *prep.partition.setup]
    where = nodes_nsys(prep.spec, setup, lines)
    assert (where.kind, where.module_line, str(where.module_version)) == (
        "module",
        "module load nsight-systems/2024.2",
        "2024.2",
    )
    # nsys inside the image: the image, whatever the setup lines load
    placed = setup.__class__(setup.version, setup.version_from, "nsys", "container")
    assert nodes_nsys(prep.spec, placed, lines).kind == "image"
    # an absolute path, or no module: the path, asked here
    pathed = setup.__class__(setup.version, setup.version_from, "/opt/x/nsys", "host")
    assert nodes_nsys(prep.spec, pathed, lines).kind == "path"
    assert nodes_nsys(prep.spec, setup, ['export PATH="/opt/gh-run/bin:$PATH"']).kind == "path"
    # a module that is not named as Nsight Systems may bring it: not this machine's either
    other = nodes_nsys(prep.spec, setup, ["module load cuda/12.4"])
    assert (other.kind, other.module_version) == ("module", None)


def test_check_judges_the_declared_version_not_this_machines_nsys() -> None:
    found = preflight.nsys(_quad())
    assert found is not None and found.ok and not found.warning
    assert "rendered for nsys 2024.2 (partition quad nsys.version)" in found.detail
    assert (
        "the module the nodes load (`module load nsight-systems/2024.2`) is nsys 2024.2 by its "
        "name (judged: the cluster file, not this machine's nsys, which the nodes do not run)"
    ) in found.detail
    assert "/opt/gh-run" not in found.detail  # the 2023.4 here was not asked
    need = nsys_check(_quad().spec, _quad().partition, "quad", _quad().partition.setup)
    assert need is not None and need.ok and "module load nsight-systems/2024.2" in need.detail


def test_a_module_of_another_version_than_declared_warns_undeclared_refuses() -> None:
    declared = preflight.nsys(_quad(cluster=_site("nsight-systems/2023.4", "2024.2")))
    assert declared is not None and declared.ok and declared.warning
    assert (
        "rendered for nsys 2024.2 (partition quad nsys.version), but the module the nodes load "
        "(`module load nsight-systems/2023.4`) is nsys 2023.4 by its name" in declared.detail
    )
    assert "set profile.nsys_version: 2023.4" in declared.detail
    undeclared = preflight.nsys(_quad(cluster=_site("nsys/2024.2.1", None)))
    assert undeclared is not None and undeclared.error is not None
    assert "the job is rendered for nsys 2023.4 (gh-run's default" in undeclared.detail
    assert "(`module load nsys/2024.2.1`) is nsys 2024.2.1 by its name" in undeclared.detail
    unnamed = preflight.nsys(_quad(cluster=_site("cuda/12.4", None)))
    assert unnamed is not None and unnamed.ok and unnamed.warning
    assert "(`module load cuda/12.4`) does not name its nsys version" in unnamed.detail
    assert "declare its version (partitions.quad.nsys.version, or profile" in unnamed.detail


def test_a_path_is_asked_here_and_the_finding_says_so() -> None:
    """The dev cluster: nsys by name on the PATH its setup line sets, no module: the real
    /opt/gh-run/bin/nsys is asked (2023.4, as declared)."""
    spec = load_model(
        REPO / "jobs" / "smoke_profiled.yaml",
        JobSpec,
        ["container.runtime=none", "profile.nsys_placement=host"],
    )
    cl = load_cluster("dev")
    name, part = fit_partition(spec, cl, "job")
    found = preflight.nsys(Prepared(spec, None, cl, name, part))
    assert found is not None and found.ok, found
    assert "/opt/gh-run/bin/nsys is 2023.4" in found.detail
    assert found.detail.endswith("(judged: that nsys here, the path the nodes run)")
