"""Which spec field a finding's knob turns (issue 41 item 3): NeMo's fields, a command's own
flags where its arguments hold them, the reference workload's known flags; anything else is
named in one sentence, not guessed. The `--set` lines are applied to the spec as `submit`
applies them, and the spec they give is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.runs.advice_knobs import KnobChange, NoKnob, knob_change
from orchestrator.spec.job import JobSpec
from orchestrator.spec.yamlio import load_model


def _spec(tmp_path: Path, workload: str) -> Path:
    p = tmp_path / "job.yaml"
    p.write_text(f"name: t\nworkload:\n{workload}")
    return p


def _applied(path: Path, change: KnobChange | NoKnob) -> JobSpec:
    assert isinstance(change, KnobChange), change
    return load_model(path, JobSpec, list(change.sets))


def test_a_commands_own_worker_flag_is_set(tmp_path: Path) -> None:
    p = _spec(
        tmp_path, "  kind: command\n  command: python3\n  args: [train.py, --num-workers, '0']\n"
    )
    got = _applied(p, knob_change("data-loader", load_model(p, JobSpec)))
    assert got.workload.args == ["train.py", "--num-workers", "4"]  # type: ignore[union-attr]


def test_workers_already_there_are_doubled(tmp_path: Path) -> None:
    p = _spec(tmp_path, "  kind: command\n  command: python3\n  args: [t.py, --workers, '3']\n")
    got = _applied(p, knob_change("data-loader", load_model(p, JobSpec)))
    assert got.workload.args == ["t.py", "--workers", "6"]  # type: ignore[union-attr]


def test_precision_and_switches(tmp_path: Path) -> None:
    p = _spec(
        tmp_path,
        "  kind: command\n  command: python3\n"
        "  args: [t.py, --precision, fp32, --no-pin-memory, --no-cuda-graphs]\n",
    )
    spec = load_model(p, JobSpec)
    assert _applied(p, knob_change("fp32-kernels", spec)).workload.args[2] == "bf16"  # type: ignore[union-attr]
    assert _applied(p, knob_change("host-device-copies", spec)).workload.args[3] == "--pin-memory"  # type: ignore[union-attr]
    assert _applied(p, knob_change("launch-bound", spec)).workload.args[4] == "--cuda-graphs"  # type: ignore[union-attr]


def test_the_reference_workload_gets_its_known_flags(tmp_path: Path) -> None:
    p = _spec(tmp_path, "  kind: command\n  command: python3\n  args: [-m, workloads.sft]\n")
    got = _applied(p, knob_change("data-loader", load_model(p, JobSpec), workers_now=0))
    assert got.workload.args == ["-m", "workloads.sft", "--num-workers", "4"]  # type: ignore[union-attr]


@pytest.mark.parametrize("rule", ["launch-bound", "data-loader", "host-compute", "sync-overhead"])
def test_a_knob_that_is_no_field_is_named_not_guessed(tmp_path: Path, rule: str) -> None:
    p = _spec(tmp_path, "  kind: command\n  command: python3\n  args: [mine.py]\n")
    got = knob_change(rule, load_model(p, JobSpec))
    assert isinstance(got, NoKnob)
    assert got.sentence.count(". ") == 0 and "does not guess" in got.sentence
    assert "--set" in got.sentence


def test_nemo_fields(tmp_path: Path) -> None:
    p = _spec(
        tmp_path,
        "  kind: nemo\n  script: /opt/NeMo/train.py\n  data_workers: 2\n  precision: '32'\n",
    )
    spec = load_model(p, JobSpec)
    assert _applied(p, knob_change("data-loader", spec)).workload.data_workers == 4  # type: ignore[union-attr]
    assert str(_applied(p, knob_change("fp32-kernels", spec)).workload.precision) == "bf16-mixed"  # type: ignore[union-attr]
    assert isinstance(knob_change("launch-bound", spec), NoKnob)
