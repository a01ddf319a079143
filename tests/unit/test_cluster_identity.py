"""The pure parts of the cluster identity check (the controller itself is asked in
tests/integration/test_cluster_identity.py), and of `check`'s list of every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.errors import GhRunError, RuntimeFailure, UserError, combine
from orchestrator.executors.cluster_identity import clusters_option, parse_config, same_name
from orchestrator.executors.slurm_cli import with_clusters
from orchestrator.site.cluster import Cluster, load_cluster, validate_job
from orchestrator.spec.job import load_spec_located

# The head of `scontrol show config` on the dev cluster (SLURM 22.05), two lines cut out.
CONFIG = """Configuration data as of 2026-11-26T06:44:09
AccountingStorageBackupHost = (null)
AccountingStorageHost   = 127.0.0.1
ClusterName             = ghdev
CompleteWait            = 0 sec
MaxArraySize            = 1001
MaxJobCount             = 10000
"""


def test_parse_config_reads_the_name_and_the_array_limit() -> None:
    facts = parse_config(CONFIG)
    assert facts is not None
    assert facts.cluster_name == "ghdev"
    assert facts.max_array_size == 1001
    assert parse_config(CONFIG.replace("MaxArraySize            = 1001\n", "")) == type(facts)(
        cluster_name="ghdev", max_array_size=None
    )
    # No name (an error text, or a controller that names none): no facts, never a guess.
    assert parse_config("slurm_load_ctl_conf error: Unable to contact slurm controller") is None
    assert parse_config(CONFIG.replace("= ghdev", "= (null)")) is None
    # A key that merely ends in ClusterName is not it.
    assert parse_config("FederationClusterName = x\n") is None


@pytest.mark.parametrize(
    ("argv", "clusters", "expected"),
    [
        (["sbatch", "--parsable", "a.sh"], "c1", ["sbatch", "--clusters=c1", "--parsable", "a.sh"]),
        (["scontrol", "show", "config"], "c1", ["scontrol", "--clusters=c1", "show", "config"]),
        (["scancel", "12"], "c1", ["scancel", "--clusters=c1", "12"]),
        (["sacct", "-j", "1"], None, ["sacct", "-j", "1"]),
        # Not a SLURM client that takes it: unchanged.
        (["sacctmgr", "show", "cluster"], "c1", ["sacctmgr", "show", "cluster"]),
        (["sh", "-c", "x"], "c1", ["sh", "-c", "x"]),
    ],
)
def test_with_clusters_goes_right_after_the_program(
    argv: list[str], clusters: str | None, expected: list[str]
) -> None:
    assert with_clusters(argv, clusters) == expected


def test_cluster_names_compare_without_case() -> None:
    """Cluster names compare without case (issue 43): SLURM lower-cases ClusterName, so a
    cluster file's `GHDev` is the controller's `ghdev`, and another name is another cluster
    (tests/integration/test_cluster_identity.py asks the real controller)."""
    assert same_name("ghdev", "GHDev") and same_name("GHDEV", "ghdev")
    assert not same_name("ghdev", "otherdev")
    assert not same_name("ghdev", "ghdev2")


def cluster_doc(**slurm: object) -> dict[str, object]:
    return {
        "name": "x",
        "default_partition": "p",
        "partitions": {"p": {}},
        **({"slurm": slurm} if slurm else {}),
    }


def test_cluster_names_and_multi_cluster() -> None:
    assert Cluster.model_validate(cluster_doc()).slurm.cluster_name is None
    named = Cluster.model_validate(cluster_doc(cluster_name="ghdev"))
    assert clusters_option(named) is None  # the clients' own cluster: no --clusters
    multi = Cluster.model_validate(cluster_doc(cluster_name="ghdev", multi_cluster=True))
    assert clusters_option(multi) == "ghdev"
    with pytest.raises(ValueError, match="multi_cluster is true but cluster_name is not set"):
        Cluster.model_validate(cluster_doc(multi_cluster=True))
    with pytest.raises(ValueError, match="is not a SLURM cluster name"):
        Cluster.model_validate(cluster_doc(cluster_name="a b"))


def test_shipped_cluster_files_name_their_cluster() -> None:
    assert load_cluster("dev").slurm.cluster_name == "ghdev"
    assert load_cluster("dev-ssh").slurm.cluster_name == "ghdev"
    # The seed site's name is unknown: left for its admin, and check/submit refuse until set.
    assert load_cluster("gh200").slurm.cluster_name is None


def test_combine_keeps_one_sentence_and_lists_several() -> None:
    one = UserError("a.yaml: x: bad; fix it")
    assert combine([one], "job.yaml") is one
    mixed: list[GhRunError] = [RuntimeFailure("no controller"), one]
    both = combine(mixed, "job.yaml")
    assert isinstance(both, UserError) and both.exit_code == 2
    assert both.message.splitlines() == [
        "job.yaml: 2 problems, each with its fix:",
        "  - no controller",
        "  - a.yaml: x: bad; fix it",
    ]
    runtime = combine([RuntimeFailure("a"), RuntimeFailure("b")], "job.yaml")
    assert type(runtime) is RuntimeFailure and runtime.exit_code == 1


def test_every_limit_is_refused_at_its_line(tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        "name: t\n"
        "cluster: dev\n"
        "resources:\n"
        "  nodes: 3\n"  # line 4
        "  mem: 8G\n"  # line 5
        "workload:\n"
        "  command: 'true'\n"
    )
    spec, doc = load_spec_located(spec_file, ["resources.time=05:00:00"])
    problems: list[GhRunError] = []
    validate_job(spec, load_cluster("dev"), doc, problems)
    where = doc.source
    assert [p.message.split(": ")[0:2] for p in problems] == [
        [f"{where}:4", "resources.nodes"],
        [f"{where} (--set resources.time)", "resources.time"],
        [f"{where}:5", "resources.mem"],
    ]
    with pytest.raises(UserError) as raised:  # without a list: all of them, in one error
        validate_job(spec, load_cluster("dev"), doc)
    assert raised.value.message.startswith(f"{where}: 3 problems, each with its fix:")
    # Within the limits: nothing.
    spec, doc = load_spec_located(spec_file, ["resources.nodes=1", "resources.mem=1G"])
    problems = []
    validate_job(spec, load_cluster("dev"), doc, problems)
    assert problems == []
