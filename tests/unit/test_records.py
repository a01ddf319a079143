"""A report analysed where it lies (orchestrator/analysis/records.py) gives, read back here in
the report's place, the very output a read of the report here gives: every output of the golden
cases below (analyze text / terminal / JSON, the stored headline, compare, report) is produced
from records alone (written in another folder, as on a cluster, the reports then removed) and
must equal the golden files byte for byte (tests/golden/analysis, made from the reports).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.analysis import loader, records, write_records
from orchestrator.core.errors import UserError
from tests.fixtures.recordings import unpacked
from tests.unit import test_golden_outputs as golden

# Several ranks of nsys exports (2023.4 and 2024.2), Kineto traces with the workload's
# metrics.json, a folder of separate runs, and comparisons of them.
NAMES = {
    "ddp_h200_nsys",
    "ddp_h200_kineto",
    "nsys_h100",
    "ddp_nsys2024",
    "compare_ddp_kineto",
    "nsys_cpu",
}
CASES = [c for c in golden.CASES if c.name in NAMES]
PAIRS = [(c, out) for c in CASES for out in c.outputs]
TRACES = (".sqlite", ".pt.trace.json", ".pt.trace.json.gz")


def _source(arg: str) -> Path:
    top, _, rest = arg.partition("/")
    if top == "rec":
        return unpacked(golden.DATA / golden.RECORDINGS[arg])
    return golden.DATA / rest


@pytest.fixture(scope="module")
def only_records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace where every report of the cases is its record: written in `cluster/`
    (another folder, as a job writes them), copied beside the run's other files, the reports
    left out."""
    root = tmp_path_factory.mktemp("records")
    cluster = tmp_path_factory.mktemp("cluster")
    args = sorted({a for c in CASES for a in c.args})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GH_RUN_ACCEPT_LOST_DATA", "1")  # as the golden outputs were made
        for arg in args:
            there = cluster / arg
            shutil.copytree(_source(arg), there)
            here = root / arg
            shutil.copytree(there, here)
            for f in sorted(there.rglob("*")):
                if f.name.endswith(TRACES) and loader._kind(f) is not None:
                    if f.name.endswith(".json") and not loader._looks_like_trace(f):
                        continue
                    rec = write_records.write(f)
                    dest = here / f.relative_to(there)
                    shutil.copyfile(rec, records.record_path(dest))
                    dest.unlink()
        mp.chdir(root)
        yield root


@pytest.mark.parametrize(("case", "output"), PAIRS, ids=[f"{c.name}/{o}" for c, o in PAIRS])
def test_records_give_the_golden_output(case: golden.Case, output: str, only_records: Path) -> None:
    for arg in case.args:
        assert not [f for f in (only_records / arg).rglob("*") if f.name.endswith(TRACES)], (
            "the reports must not be here"
        )
    got = golden.produce(case, output, only_records)
    want = (golden.GOLDEN / case.name / output).read_text(encoding="utf-8")
    if got != want and output.endswith(".json"):  # another numpy: floats' last bits only
        assert golden._same_json(json.loads(got), json.loads(want)), f"{case.name}/{output}"
        return
    assert got == want, f"{case.name}/{output} from records differs from the reports' output"


def test_a_record_of_another_size_is_not_taken_for_the_report_here(tmp_path: Path) -> None:
    src = golden.DATA / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"
    f = tmp_path / src.name
    shutil.copyfile(src, f)
    rec = write_records.write(f)
    assert records.usable(f) is not None
    data = json.loads(rec.read_text())
    data["report"]["size"] += 1
    rec.write_text(json.dumps(data))
    assert records.usable(f) is None  # the report here is read instead


def test_a_record_of_another_version_without_its_report_names_the_fix(tmp_path: Path) -> None:
    src = golden.DATA / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"
    f = tmp_path / src.name
    shutil.copyfile(src, f)
    rec = write_records.write(f)
    data = json.loads(rec.read_text())
    data["gh_run"] = "0.0.1"
    rec.write_text(json.dumps(data))
    assert records.usable(f) is None  # the report is here: read it
    os.unlink(f)
    with pytest.raises(UserError, match="--reports"):
        records.usable(f)


def test_reread_without_the_report_says_where_it_is(tmp_path: Path) -> None:
    src = golden.DATA / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"
    f = tmp_path / src.name
    shutil.copyfile(src, f)
    write_records.write(f)
    f.unlink()
    assert loader.analyze_paths([tmp_path]).ranks  # from the record
    with pytest.raises(UserError, match="left on the cluster"):
        loader.analyze_paths([tmp_path], use_records=False)


@pytest.mark.parametrize(
    "starts",
    [[], [5], [10, 10, 30, 2**62], [3, 1, 2]],  # none, one, equal and huge, out of order
)
def test_collectives_round_trip_exactly(starts: list[int]) -> None:
    import numpy as np

    from orchestrator.analysis.families.communication import Collectives

    start = np.asarray(starts, dtype=np.int64)
    end = start + np.arange(len(starts), dtype=np.int64) * 7
    names = [f"nccl{i % 2}" for i in range(len(starts))]
    back = records._collectives_of(
        json.loads(json.dumps(records._collectives(Collectives(start, end, names))))
    )
    assert back.start.tolist() == starts and back.end.tolist() == end.tolist()
    assert back.name == names and back.start.dtype == np.int64
