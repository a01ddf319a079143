"""`gh-run check` / `submit --check` against the real dev cluster's controller.

gh-run's own check refuses what the cluster file says the partition cannot run, each with one
sentence; what passes it is sent to the real controller (`sbatch --test-only`), whose verdict
is relayed in plain words. To see the controller refuse, a cluster file that overstates the dev
partition (2 GPUs, 4 cores, 8000M, 4 nodes, 10 h per node) lets gh-run's check pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SMOKE = "jobs/smoke.yaml"


@pytest.fixture
def overstated(tmp_path: Path) -> Path:
    text = (REPO / "clusters" / "dev.yaml").read_text()
    for old, new in (
        ("gpus_per_node: 1", "gpus_per_node: 2"),
        ("cpus_per_node: 2", "cpus_per_node: 4"),
        ("mem_per_node: 4000M", "mem_per_node: 8000M"),
        ("max_nodes: 2", "max_nodes: 4"),
        ('max_time: "02:00:00"', 'max_time: "10:00:00"'),
    ):
        assert old in text, f"clusters/dev.yaml changed: {old!r} is gone; update this test"
        text = text.replace(old, new)
    path = tmp_path / "dev-overstated.yaml"
    path.write_text(text)
    return path


def test_check_accepts_a_fitting_job(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("check", SMOKE)
    assert res.rc == 0, res.text
    assert "ok: the SLURM controller accepts smoke on partition gh: it would start at" in res.out
    assert "(controller: Job " in res.out


def test_submit_check_asks_and_submits_nothing(dev_cluster: None, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("submit", SMOKE, "--check")
    assert res.rc == 0, res.text
    assert "the SLURM controller accepts smoke" in res.out
    listing = cli("status")
    assert "no runs yet" in listing.out, listing.text


@pytest.mark.parametrize(
    ("setting", "words", "controller"),
    [
        (
            "resources.gpus_per_node=2",
            "no node of the partition has what one node of this job asks for",
            "Requested node configuration is not available",
        ),
        (
            "resources.cpus_per_task=3",
            "no node of the partition has what one node of this job asks for",
            "Requested node configuration is not available",
        ),
        (
            "resources.time=05:00:00",
            "the time limit is over what the partition allows",
            "Requested time limit is invalid",
        ),
        (
            "resources.nodes=3",
            "the partition cannot give the job that many nodes",
            "Node count specification invalid",
        ),
    ],
)
def test_controller_refusal_is_relayed(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, overstated: Path, setting: str, words: str, controller: str
) -> None:
    res = cli("submit", SMOKE, "--check", "--cluster", str(overstated), "--set", setting)
    assert res.rc == 2, res.text
    assert (
        "error: jobs/smoke.yaml: the SLURM controller of cluster dev refuses this job on "
        f"partition gh: {words}"
    ) in res.err
    assert controller in res.err
    assert f"gh-run's own check against {overstated} passed" in res.err
    assert "Traceback" not in res.err


def test_a_partition_the_controller_lacks_is_named_as_missing(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, tmp_path: Path
) -> None:
    """Issue 36: a partition in the cluster file but not in SLURM got "ask for less in
    resources". It is named as missing from the controller, with the import that drafts the
    cluster file from what SLURM has."""
    text = (REPO / "clusters" / "dev.yaml").read_text()
    assert "  gh:\n" in text and "default_partition: gh" in text
    ghost = tmp_path / "dev-ghost.yaml"
    ghost.write_text(
        text.replace("  gh:\n", "  ghost:\n").replace(
            "default_partition: gh", "default_partition: ghost"
        )
    )
    res = cli("check", SMOKE, "--cluster", str(ghost), "--set", "partition=ghost")
    assert res.rc == 2, res.text
    assert "ask for less in resources" not in res.err
    assert (
        "partition ghost is in" in res.err
        and "the SLURM controller of cluster dev has no" in res.err
    )
    assert "gh-run partitions import" in res.err and "Invalid partition name" in res.err


def _problems(err: str) -> list[str]:
    """The problems of one `error:` message: the sentence itself, or each `  - ` line of a
    list of several. Before it, `check` may say which nsys it runs to ask it (issue 42)."""
    kept = [line for line in err.strip().splitlines() if not line.startswith("nsys: running `")]
    text = "\n".join(kept)
    assert text.startswith("error: "), err
    lines = text.splitlines()
    if len(lines) == 1:
        return [lines[0].removeprefix("error: ")]
    assert "problems, each with its fix:" in lines[0], err
    return [line.removeprefix("  - ") for line in lines[1:]]


SET = "jobs/smoke.yaml (--set {})"


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            ["--set", "resources.gpus_per_node=2"],
            f"{SET.format('resources.gpus_per_node')}: resources.gpus_per_node: 2 GPUs per node "
            "asked, but partition 'gh' has 1 per node; ask for at most 1",
        ),
        (
            ["--set", "resources.nodes=3"],
            f"{SET.format('resources.nodes')}: resources.nodes: 3 nodes asked, but partition "
            "'gh' allows at most 2; ask for fewer nodes",
        ),
        (
            ["--set", "resources.time=02:30:00"],
            f"{SET.format('resources.time')}: resources.time: 02:30:00 is over the limit of "
            "partition 'gh', 02:00:00; ask for 02:00:00 or less",
        ),
        (
            ["--set", "resources.mem=5G"],
            f"{SET.format('resources.mem')}: resources.mem: 5G is more than a node of partition "
            "'gh' has (4000M); ask for 4000M or less",
        ),
        (
            ["--set", "resources.constraint=nvme"],
            f"{SET.format('resources.constraint')}: resources.constraint: feature nvme is not "
            "offered by partition 'gh' (features: none); drop it or pick another partition",
        ),
        (
            ["--set", "container.runtime=singularity", "--set", "container.image=nemo-arm64.sif"],
            f"{SET.format('container.image')}: container.image: image 'nemo-arm64.sif' is named "
            "as an aarch64 image, but partition 'gh' runs x86_64 nodes; use an x86_64 build of "
            "the image",
        ),
        (
            [
                "--cluster",
                "gh200",
                "--set",
                "container.runtime=singularity",
                "--set",
                "container.image=/images/nemo-24.05-x86_64.sif",
            ],
            f"{SET.format('container.image')}: container.image: image "
            "'/images/nemo-24.05-x86_64.sif' is named as an x86_64 image, but partition 'gh' "
            "runs aarch64 nodes; use an aarch64 build of the image",
        ),
    ],
)
def test_gh_run_refuses_before_asking_the_controller(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, args: list[str], sentence: str
) -> None:
    res = cli("check", SMOKE, *args)
    assert res.rc == 2, res.text
    assert sentence in _problems(res.err)
    assert "the SLURM controller accepts" not in res.out  # never asked
    assert "Traceback" not in res.err


PROFILED = "jobs/smoke_profiled.yaml"
X86_SIF = "/opt/gh-run/images/gh-run-test.sif"  # the real test image, built here for x86-64


@pytest.mark.parametrize(
    ("job", "args", "sentence"),
    [
        # issue 40: a system-wide sampler on a node another job may share
        (
            PROFILED,
            ["--set", "profile.sample=system-wide"],
            "jobs/smoke_profiled.yaml:18: resources.exclusive: the node-wide collectors "
            "(sample=system-wide) record the whole node, and another job on a node of partition "
            "'gh' would run its own (two samplers per node); set resources.exclusive: true, or "
            "ask for every GPU and core of the node",
        ),
        # the runtime the partition declares, not another
        (
            PROFILED,
            ["--set", "container.runtime=singularity"],
            "jobs/smoke_profiled.yaml (--set container.runtime): container.runtime: partition "
            "'gh' runs containers with apptainer, not singularity; set container.runtime: "
            "apptainer",
        ),
        # the real x86-64 SIF, read from its header, against an aarch64 partition
        (
            PROFILED,
            [
                "--cluster",
                "gh200",
                "--set",
                "container.runtime=singularity",
                "--set",
                "resources.nodes=1",
                "--set",
                "profile.nsys_placement=container",
            ],
            f"jobs/smoke_profiled.yaml:24: container.image: {X86_SIF} was built for x86_64 (its "
            "SIF header says so), but partition 'gh' runs aarch64 nodes; use an aarch64 build "
            "of the image",
        ),
    ],
)
def test_gh200_node_checks_refuse_before_asking_the_controller(  # type: ignore[no-untyped-def]
    dev_cluster: None, cli, job: str, args: list[str], sentence: str
) -> None:
    if not Path(X86_SIF).is_file():
        pytest.fail(f"no test image {X86_SIF}: `make deps` builds it")
    res = cli("check", job, *args)
    assert res.rc == 2, res.text
    assert sentence in _problems(res.err), res.err
    assert "the SLURM controller accepts" not in res.out  # never asked
    assert "Traceback" not in res.err
