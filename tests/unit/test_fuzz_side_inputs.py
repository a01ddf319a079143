"""The side-input readers against their references on random mutations of real inputs (issue 42,
class 4): the GPU_METRICS table of a real export (with and without the page reader) against
plain SQL, the export's GpuMetricsConfig against yaml.safe_load, a report's record read in its
place, a metrics.json and a spec.lock.yaml beside a trace. Every case reads as the reference
reads it, or is refused in a note or one sentence: never a silent difference or an exception.
Bounded here; bench/fuzz_side_inputs.py runs the same cases for as long as it is given
(docs/reliability.md has its figures)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.analysis import records, write_records
from tests.budget import examples
from tests.fixtures import side_input_fuzz as F

SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return F.gpu_base(tmp_path_factory.mktemp("gpu"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    folder = tmp_path_factory.mktemp("rec")
    report = folder / F.SAXPY.name
    shutil.copyfile(F.SAXPY, report)
    return report, json.loads(write_records.write(report).read_text())


def test_the_unmutated_inputs_read_as_the_references_read_them(
    gpu: tuple[Path, str], recorded: tuple[Path, dict[str, object]]
) -> None:
    base, config = gpu
    assert F.gpu_case(base) == (F.SAME, "")
    assert F.config_case(config) == (F.SAME, "")
    assert F.record_case(recorded[0]) == (F.SAME, "")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_mutated_gpu_metrics_table_reads_as_sql_reads_it_or_is_noted(
    tmp_path_factory: pytest.TempPathFactory, gpu: tuple[Path, str], seed: int
) -> None:
    case = tmp_path_factory.mktemp("g") / "case.sqlite"
    done = F.gpu_mutate(gpu[0], case, random.Random(seed))
    outcome, detail = F.gpu_case(case)
    assert outcome != F.DIFF, (done, detail)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_mutated_gpu_metrics_configuration_reads_as_safe_load_or_is_noted(
    gpu: tuple[Path, str], seed: int
) -> None:
    text = F.config_mutate(gpu[1], random.Random(seed))
    outcome, detail = F.config_case(text)
    assert outcome != F.DIFF, detail  # F.LENIENT: libyaml reads what PyYAML's scanner refuses


@settings(max_examples=examples(40), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_mutated_record_is_used_or_says_why_never_an_exception(
    recorded: tuple[Path, dict[str, object]], seed: int
) -> None:
    report, doc = recorded
    rec = records.record_path(report)
    try:
        rec.write_text(json.dumps(F.json_mutate(doc, random.Random(seed))))
        outcome, detail = F.record_case(report)
    finally:
        rec.write_text(json.dumps(doc))
    assert outcome != F.DIFF, detail


@settings(max_examples=examples(40), deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_files_beside_a_trace_read_as_json_and_yaml_read_them_or_refuse(
    tmp_path_factory: pytest.TempPathFactory, seed: int
) -> None:
    rnd = random.Random(seed)
    folder = tmp_path_factory.mktemp("b")
    trace = folder / F.SAXPY.name
    shutil.copyfile(F.SAXPY, trace)
    (folder / "metrics.json").write_text(json.dumps(F.json_mutate(F.METRICS, rnd)))
    (folder / "spec.lock.yaml").write_text(yaml.safe_dump(F.json_mutate(F.SPEC, rnd)))
    outcome, detail = F.beside_case(trace)
    assert outcome != F.DIFF, detail
