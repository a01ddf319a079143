"""Issue 15, class 3 (times) and class 9 (the dropped-seconds mutant): every time value in a
job spec, a `--set` override, a cluster file and a campaign schedule means what SLURM means by
it, whatever YAML 1.1 would have made of it (unquoted `1:00:00` is YAML 1.1's base-60 integer
3600, which read as SLURM minutes is 2.5 days)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.campaign.model import Schedule
from orchestrator.core.units import format_time, parse_time
from orchestrator.site.cluster import Cluster
from orchestrator.spec import yamlio
from orchestrator.spec.job import load_spec

# SLURM's formats (sbatch(1), --time): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
TABLE = [
    ("30", 30 * 60),
    ("0", 0),
    ("90", 90 * 60),
    ("1:30", 90),
    ("0:45", 45),
    ("90:00", 90 * 60),
    ("1:00:00", 3600),
    ("01:02:03", 3723),
    ("100:00:00", 100 * 3600),
    ("1-0", 86400),
    ("2-12", 2 * 86400 + 12 * 3600),
    ("1-2:03", 86400 + 2 * 3600 + 3 * 60),
    ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
    ("3-00:00:59", 3 * 86400 + 59),
]


@pytest.mark.parametrize(("text", "seconds"), TABLE)
def test_slurm_time_formats(text: str, seconds: int) -> None:
    assert parse_time(text) == seconds
    assert parse_time(format_time(seconds)) == seconds


@pytest.mark.parametrize(
    "text", ["1:00:00\n", "1:2:3:4", "1-", "-1", "1h", "UNLIMITED", "1.5", "1-2-3", ""]
)
def test_not_slurm_times(text: str) -> None:
    if text.endswith("\n"):  # surrounding white space is trimmed, as sbatch does
        assert parse_time(text) == 3600
        return
    with pytest.raises(ValueError, match="is not a SLURM time"):
        parse_time(text)


# Unquoted in YAML, as users write them. The canonical form is what reaches #SBATCH --time.
UNQUOTED = [
    ("1:00:00", "01:00:00"),
    ("1:30", "00:01:30"),
    ("01:30:00", "01:30:00"),
    ("30", "00:30:00"),
    ("1-0", "1-00:00:00"),
    ("1-02:03:04", "1-02:03:04"),
]


def _spec(folder: Path, time_text: str) -> Path:
    path = folder / "job.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: t
            cluster: dev
            resources: {{time: {time_text}}}
            workload: {{command: "true"}}
            """
        )
    )
    return path


@pytest.mark.parametrize(("written", "canonical"), UNQUOTED)
def test_unquoted_times_in_a_spec(tmp_path: Path, written: str, canonical: str) -> None:
    assert load_spec(_spec(tmp_path, written)).resources.time == canonical


@pytest.mark.parametrize(("written", "canonical"), UNQUOTED)
def test_unquoted_times_in_set(tmp_path: Path, written: str, canonical: str) -> None:
    spec = load_spec(_spec(tmp_path, '"00:05:00"'), [f"resources.time={written}"])
    assert spec.resources.time == canonical


@pytest.mark.parametrize(("written", "canonical"), UNQUOTED)
def test_unquoted_times_in_a_cluster_file(written: str, canonical: str) -> None:
    doc = yamlio.parse_text(
        textwrap.dedent(
            f"""\
            name: c
            default_partition: p
            partitions:
              p: {{max_time: {written}, default_time: 0:01}}
            """
        ),
        "c.yaml",
    )
    cluster = yamlio.to_model(doc, Cluster)
    assert cluster.partitions["p"].max_time == canonical
    assert cluster.partitions["p"].default_time == "00:00:01"


@pytest.mark.parametrize(("written", "canonical"), UNQUOTED)
def test_unquoted_times_in_a_schedule(written: str, canonical: str) -> None:
    doc = yamlio.parse_text(f"cron: '0 2 * * *'\nlauncher_time: {written}\n", "s.yaml")
    assert yamlio.to_model(doc, Schedule).launcher_time == canonical


def test_rendered_directive_is_the_slurm_meaning(tmp_path: Path) -> None:
    from orchestrator.runs import lifecycle as runs

    prep = runs.prepare(_spec(tmp_path, "1:00:00"))
    script = runs.render(prep, "t-1", tmp_path / "t-1").script
    assert "#SBATCH --time=01:00:00\n" in script
    prep = runs.prepare(_spec(tmp_path, "5"), ["resources.time=1:30"])
    assert "#SBATCH --time=00:01:30\n" in runs.render(prep, "t-2", tmp_path / "t-2").script


def test_yaml_still_reads_numbers_as_numbers() -> None:
    doc = yamlio.parse_text("a: 10\nb: 2.5\nc: 0x10\nd: 1e3\ne: .inf\nf: 1:30\n", "n.yaml")
    assert doc.data == {"a": 10, "b": 2.5, "c": 16, "d": "1e3", "e": float("inf"), "f": "1:30"}
