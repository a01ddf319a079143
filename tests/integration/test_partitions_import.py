"""`gh-run partitions import` reads the live dev cluster into a draft that equals the checked-in
expectation (tests/data/expected_dev_import.yaml) apart from the volatile header (import date,
schema path), and round-trips through the Cluster model. The parser is also run on a canned
GH200-like scontrol answer (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.executors.slurm_import import draft_cluster, parse_gres, parse_records, to_yaml
from orchestrator.site.cluster import load_cluster

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "tests" / "data" / "expected_dev_import.yaml"


def body(text: str) -> str:
    """The file without its header comments: those carry the volatile fields."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.cluster
def test_import_from_the_dev_cluster_equals_the_expectation(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    out = tmp_path / "drafts" / "dev.yaml"
    res = cli("partitions", "import", "--output", str(out))
    assert res.rc == 0, res.text
    assert f"wrote {out}: cluster ghdev, partitions gh" in res.out
    text = out.read_text()
    assert body(text) == body(EXPECTED.read_text())
    # What the issue names: gh1/gh2, the gh partition, the gh200 GRES.
    part = load_cluster(str(out)).partitions["gh"]
    assert (part.nodes, part.gpus_per_node, part.gpu_type) == (["gh1", "gh2"], 1, "gh200")
    # The header says what SLURM could not tell.
    for key in ("gpu_mem", "os", "container", "setup", "launcher.options"):
        assert f"#   {key}: " in text
    # Round trip: the written file loads to the same model as the expectation.
    assert load_cluster(str(out)).model_dump() == load_cluster(str(EXPECTED)).model_dump()


@pytest.mark.cluster
def test_import_install_writes_the_sites_file(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    """`--install` writes the draft where the site's cluster files live ($GH_RUN_SITE_DIR or
    /etc/gh-run, clusters/NAME.yaml), refuses to replace one without --force, and the search
    then finds it as the site's."""
    site = {"GH_RUN_SITE_DIR": str(tmp_path / "site")}
    res = cli("partitions", "import", "--install", env=site)
    assert res.rc == 0, res.text
    path = tmp_path / "site" / "clusters" / "ghdev.yaml"
    assert f"wrote {path}: cluster ghdev" in res.out
    assert body(path.read_text()) == body(EXPECTED.read_text())
    # The schema line names gh-run's installed schema, by absolute path outside a checkout.
    first = path.read_text().splitlines()[0]
    assert first.endswith("/cluster.schema.json") and "$schema=/" in first
    again = cli("partitions", "import", "--install", env=site)
    assert again.rc == 2 and f"--install: {path} already exists; pass --force" in again.err
    assert cli("partitions", "import", "--install", "--force", env=site).rc == 0
    listed = cli("partitions", "list", "--cluster", "ghdev", env=site)
    assert listed.rc == 0, listed.text
    assert (
        listed.out.splitlines()[0]
        == f"cluster ghdev ({path}, the site's ($GH_RUN_SITE_DIR/clusters))"
    )
    both = cli("partitions", "import", "--install", "--output", str(tmp_path / "x.yaml"), env=site)
    assert both.rc == 2 and "--install and --output name two places" in both.err


@pytest.mark.cluster
def test_shipped_dev_cluster_file_matches_the_real_cluster(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("partitions", "import")
    assert res.rc == 0, res.text
    imported = yaml.safe_load(res.out)["partitions"]["gh"]
    shipped = load_cluster("dev").partitions["gh"].model_dump(mode="json")
    for key in (
        "arch",
        "nodes",
        "max_nodes",
        "gpus_per_node",
        "gpu_type",
        "cpus_per_node",
        "mem_per_node",
        "max_time",
        "default_time",
        "features",
    ):
        assert shipped[key] == imported[key], f"clusters/dev.yaml: {key} differs from the cluster"
    # The controller's own name, which gh-run confirms before it sends anything.
    assert yaml.safe_load(res.out)["slurm"] == {"cluster_name": "ghdev"}
    assert load_cluster("dev").slurm.cluster_name == "ghdev"


@pytest.mark.cluster
def test_import_with_clusters_marks_the_file_multi_cluster(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    """Read with --cluster (scontrol --clusters): jobs of the draft are addressed the same way."""
    res = cli("partitions", "import", "--cluster", "ghdev")
    assert res.rc == 0, res.text
    assert yaml.safe_load(res.out)["slurm"] == {"cluster_name": "ghdev", "multi_cluster": True}


@pytest.mark.cluster
def test_import_refuses_to_overwrite_and_unknown_clusters(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    out = tmp_path / "x.yaml"
    out.write_text("keep me\n")
    res = cli("partitions", "import", "--output", str(out))
    assert res.rc == 2
    assert "already exists; pass --force" in res.err
    assert out.read_text() == "keep me\n"
    res = cli("partitions", "import", "--cluster", "no-such-cluster")
    assert res.rc == 2
    assert "--cluster: SLURM does not know a cluster 'no-such-cluster'" in res.err


@pytest.mark.cluster
def test_partitions_list_and_show(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("partitions", "list", "--cluster", "gh200")
    assert res.rc == 0, res.text
    row = next(line for line in res.out.splitlines() if "gh (default)" in line)
    for cell in ("aarch64", "8", "1 (gh200, 96G)", "72", "480G", "02:00:00", "singularity"):
        assert cell in row
    res = cli("partitions", "show", "gh", "--cluster", "gh200")
    assert res.rc == 0
    assert "srun --cpu-bind=cores" in res.out
    res = cli("partitions", "show", "cpu")
    assert res.rc == 2
    assert "partition 'cpu' does not exist on cluster 'dev'; choose one of: gh" in res.err


# A GH200-like site as scontrol -o prints it (values with spaces, GRES with socket binding,
# features, an UNLIMITED partition, a node in two partitions).
PARTS = (
    "PartitionName=gh AllowGroups=ALL AllowAccounts=proj1,proj2 AllowQos=ALL Default=YES "
    "DefaultTime=01:00:00 MaxNodes=4 MaxTime=02:00:00 MaxCPUsPerNode=UNLIMITED "
    "Nodes=nid[001-003] State=UP TotalNodes=3 MaxMemPerNode=UNLIMITED\n"
    "PartitionName=long AllowAccounts=ALL AllowQos=long Default=NO DefaultTime=NONE "
    "MaxNodes=UNLIMITED MaxTime=UNLIMITED MaxCPUsPerNode=64 Nodes=nid003 State=DRAIN "
    "MaxMemPerNode=400000\n"
)
NODE = (
    "NodeName={n} Arch=aarch64 CoresPerSocket=72 CPUTot=72 CPUEfctv={cpus} "
    "AvailableFeatures={feat} ActiveFeatures={feat} Gres=gpu:gh200:1(S:0) NodeAddr={n} "
    "OS=Linux 5.14.0-427.el9.aarch64 #1 SMP PREEMPT_DYNAMIC Fri May 3 2024 RealMemory={mem} "
    "State=IDLE Partitions={parts}\n"
)
NODES = "".join(
    NODE.format(n=n, cpus=c, feat=f, mem=m, parts=p)
    for n, c, f, m, p in (
        ("nid001", 72, "gh200,nvme", 491520, "gh"),
        ("nid002", 70, "gh200", 491520, "gh"),
        ("nid003", 72, "gh200,ib", 480000, "gh,long"),
    )
)


def test_parser_on_a_gh200_like_site() -> None:
    rec = parse_records(NODES)[0]
    assert rec["OS"] == "Linux 5.14.0-427.el9.aarch64 #1 SMP PREEMPT_DYNAMIC Fri May 3 2024"
    assert parse_gres("gpu:gh200:4(S:0-1),nic:1") == [("gpu", "gh200", 4), ("nic", None, 1)]
    assert parse_gres("(null)") == []
    cl = draft_cluster(PARTS, NODES, "site")
    gh, long = cl.partitions["gh"], cl.partitions["long"]
    assert cl.default_partition == "gh"
    assert (gh.arch, gh.nodes, gh.max_nodes, gh.cpus_per_node) == (
        "aarch64",
        ["nid001", "nid002", "nid003"],
        3,
        70,
    )
    assert (gh.gpus_per_node, gh.gpu_type, gh.mem_per_node) == (1, "gh200", "480000M")
    assert (gh.features, gh.accounts, gh.qos) == (["gh200", "ib", "nvme"], ["proj1", "proj2"], [])
    assert (long.max_time, long.default_time, long.cpus_per_node) == (
        "365-00:00:00",
        "365-00:00:00",
        64,
    )
    assert (long.mem_per_node, long.qos) == ("400000M", ["long"])
    assert "state DRAIN at import" in (long.description or "")
    # The text written is the model, and loads back unchanged.
    assert yaml.safe_load(to_yaml(cl))["partitions"]["gh"]["features"] == ["gh200", "ib", "nvme"]


def test_only_some_partitions(tmp_path: Path) -> None:
    cl = draft_cluster(PARTS, NODES, "site", only=["long"])
    assert list(cl.partitions) == ["long"]
    assert cl.default_partition == "long"
    path = tmp_path / "c.yaml"
    path.write_text(to_yaml(cl, path))
    assert load_cluster(str(path)).model_dump() == cl.model_dump()
