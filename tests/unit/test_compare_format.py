"""How `compare` reads, in the terminal, JSON and reports: one unit per row, sizes that read as
sizes ("8 B", never "0.00000000745 GiB"), changes as percentages or plain factors ("×0.007",
never "×1/142"), what a source did not measure as "not measured" (JSON null, never a real 0),
rows measured differently across sources not compared, and the two idle figures explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.analysis import analyze_paths, compare
from orchestrator.analysis.timeline.kernel_names import distinct_kernels, short_kernel
from orchestrator.core.human import NOT_MEASURED, change_text, in_unit, row_unit
from tests.unit.test_analysis_report import cli

DATA = Path(__file__).resolve().parents[1] / "data"
NSYS = DATA / "nsys_h100" / "baseline"
KINETO = DATA / "traces" / "baseline"
CPU = DATA / "nsys_cpu" / "smoke-profiled.sqlite"


@pytest.mark.parametrize(
    ("values", "unit", "shown"),
    [
        ([0.367, 0.168], "s", "ms"),  # a row of spans under a second reads in ms
        ([367.0, 1.0], "ms", "ms"),
        ([0.0015, 0.0008], "ms", "µs"),
        ([17.87, 16.99], "GiB", "GiB"),
        ([256 / 2**20, 12 / 2**30], "GiB", "KiB"),  # 256 KiB beside 12 B: KiB
        ([8 / 2**30, 8 / 2**30], "GiB", "B"),
        ([None, None], "us", "µs"),  # nothing to size it by: the row's own unit
        ([56.3, 4.5], "%", "%"),
        ([2697.0], "count", "count"),
    ],
)
def test_one_unit_per_row_suits_its_largest_value(
    values: list[float | None], unit: str, shown: str
) -> None:
    assert row_unit(values, unit) == shown


def test_values_read_in_the_rows_unit_and_tiny_ones_keep_their_own() -> None:
    assert in_unit(0.367, "s", "ms") == "367.0"
    assert in_unit(0.00101, "s", "ms") == "1.01"
    assert in_unit(8, "B", "B") == "8"
    assert in_unit(8 / 2**30, "GiB", "B") == "8"
    # 8 bytes beside 22.5 GiB: its own unit, never 0.00000000745
    assert in_unit(8 / 2**30, "GiB", "GiB") == "8 B"
    assert in_unit(22.5, "GiB", "GiB") == "22.50"
    assert in_unit(0.0, "GiB", "GiB") == "0"
    assert in_unit(56.32, "%", "%") == "56.3"
    assert in_unit(2697, "count", "count") == "2,697"
    assert in_unit(None, "s", "ms") == "-"


@pytest.mark.parametrize(
    ("v", "base", "shown"),
    [
        (1, 142, "×0.007"),  # never ×1/142
        (0.5, 100, "×0.005"),
        (5, 100, "×0.05"),
        (11, 100, "-89.0 %"),
        (0.05, 100, "to ~0 (-99.95 GiB)"),
        (1420, 100, "×14"),
    ],
)
def test_changes_are_percentages_or_plain_factors(v: float, base: float, shown: str) -> None:
    assert change_text(v, base, "GiB") == shown


def test_kernels_with_one_short_name_are_told_apart() -> None:
    m = analyze_paths([NSYS])
    names = [k.name for k in m.ranks[0].top_kernels]
    short = [short_kernel(n) for n in names]
    assert len(set(short)) < len(short), "the export has kernels whose short names collide"
    told = distinct_kernels(names)
    assert len(set(told.values())) == len(names)
    assert all(len(v) <= 60 for v in told.values())
    # unique short names stay as they are; colliding ones say what sets them apart
    for n, s in zip(names, short, strict=True):
        if short.count(s) == 1:
            assert told[n] == s
        else:
            assert " · " in told[n]
    copy = next(n for n in names if "bfloat16_copy_kernel_cuda" in n and "vectorized" in n)
    assert told[copy].endswith("· bfloat16_copy_kernel_cuda")


def test_kernels_that_differ_only_in_numbers_are_numbered() -> None:
    names = ["void k<(int)4>(int)", "void k<(int)8>(int)"]
    told = distinct_kernels(names)
    assert sorted(told.values()) == ["k<…> · #1", "k<…> · #2"]


def test_what_a_source_cannot_measure_is_not_measured_never_zero() -> None:
    nsys, kin, cpu = analyze_paths([NSYS]), analyze_paths([KINETO]), analyze_paths([CPU])
    c = compare([nsys, kin, cpu], labels=["n", "k", "c"])
    rows = {r.metric: r for r in c.rows}
    cpu_op = rows["CPU operator time"]
    assert cpu_op.measured == [False, True, False] and cpu_op.values[0] is None
    assert cpu_op.values[1] and cpu_op.values[1] > 0
    osrt = rows["OS-runtime time (nsys)"]
    assert osrt.measured == [True, False, True] and osrt.values[1] is None
    # a CPU-only export measures no GPU row: not measured, not 0 %
    for name in ("busy", "idle", "HtoD", "kernels", "HTA idle"):
        assert rows[name].measured[2] is False and rows[name].values[2] is None, name
    assert rows["UM share of memory operations"].measured == [True, False, False]
    # JSON: null, with measured false beside it
    data = json.loads(c.model_dump_json())
    row = next(r for r in data["rows"] if r["metric"] == "CPU operator time")
    assert row["values"][0] is None and row["measured"][0] is False
    assert any("not measured by every run's sources" in n for n in c.notes)


def test_rows_measured_differently_are_not_compared_and_the_sources_named() -> None:
    c = compare([analyze_paths([NSYS]), analyze_paths([KINETO])], labels=["nsys", "kineto"])
    rows = {r.metric: r for r in c.rows}
    for name in ("HTA compute", "HTA idle", "step time mean", "peak GPU memory"):
        assert rows[name].comparable == [True, False], name
        assert rows[name].change[1] == "not comparable" and rows[name].delta_rel_pct[1] is None
    assert rows["idle"].comparable == [True, True] and rows["idle"].change[1].endswith("%")
    assert any(n.startswith("the sources differ") for n in c.notes)
    hta = next(n for n in c.notes if "HTA compute" in n)
    assert "HTA idle" in hta and "last ProfilerStep" in hta and "(nsys)" in hta
    # the two idle figures, each with what it counts and why they differ
    idle = next(n for n in c.notes if n.startswith("kineto: GPU idle"))
    assert "HTA's temporal idle (26.5 %)" in idle and "differ by 30.7 points" in idle
    # two nsys exports of one kind: every row comparable, no word on sources
    same = compare([analyze_paths([NSYS]), analyze_paths([NSYS.parent / "workers4"])])
    assert all(all(r.comparable) for r in same.rows)
    assert not any(n.startswith("the sources differ") for n in same.notes)


def test_terminal_compare_shows_one_unit_per_row_and_not_measured() -> None:
    res = CliRunner(env={"COLUMNS": "200"}).invoke(cli(), ["compare", str(NSYS), str(KINETO)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()

    def row(name: str) -> list[str]:
        line = next(x for x in lines if x.strip().startswith(name))
        return line.split()

    assert row("DtoH")[-4:] == ["B", "8", "8", "="]
    assert row("span")[1:3] == ["ms", "367.3"]
    assert " ".join(row("CPU operator time")).startswith(f"CPU operator time ms {NOT_MEASURED}")
    assert "not comparable" in " ".join(row("HTA idle"))
    assert not any("0.00000000" in x or "×1/" in x for x in lines)
    assert any(x.startswith("note: the sources differ") for x in lines)


def test_what_changed_leaves_gpu_side_ranges_out_of_the_phases() -> None:
    """A `… [gpu]` range covers only the kernels launched on its own thread (backward's come from
    autograd's threads): its CPU side is the phase."""
    kin = analyze_paths([KINETO])
    assert any(x.name == "backward [gpu]" for x in kin.ranks[0].nvtx)
    c = compare([analyze_paths([NSYS]), kin])
    names = [p.name for p in c.changes[0].phases]
    assert "backward" in names and not any(n.endswith("[gpu]") for n in names)


def test_rows_no_run_measured_are_left_out_and_said_once() -> None:
    """Issue 36: `compare` of CPU-only runs printed ~40 "not measured" rows. A row that no run's
    sources measure is left out (its group with it when the whole group is), and one note
    says how many and which groups; a row some run measured stays, "not measured" beside it."""
    cpu = analyze_paths([CPU])
    c = compare([cpu, cpu], labels=["a", "b"])
    assert c.rows and all(any(r.measured) for r in c.rows)
    assert {r.group for r in c.rows} >= {"CPU activity", "Steps"}
    assert "GPU time" not in {r.group for r in c.rows}
    (note,) = [n for n in c.notes if n.startswith("left out:")]
    assert "GPU time" in note and "rows no run measured" in note
    res = CliRunner(env={"COLUMNS": "200"}).invoke(cli(), ["compare", str(CPU), str(CPU)])
    assert res.exit_code == 0, res.output
    shown = [x for x in res.output.splitlines() if NOT_MEASURED in x]
    assert len(shown) <= 3, shown
    assert sum("left out:" in x for x in res.output.splitlines()) == 1
    # with a run that measures them, the GPU rows are back, "not measured" for the CPU run
    mixed = compare([cpu, analyze_paths([NSYS])], labels=["cpu", "gpu"])
    busy = next(r for r in mixed.rows if r.metric == "busy")
    assert busy.measured == [False, True]
    assert not any(n.startswith("left out:") and "GPU time" in n for n in mixed.notes)
