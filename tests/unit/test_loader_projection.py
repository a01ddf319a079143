"""The data loader's projection (`presentation.projections._loader_floor`), a pure function of
the replay's input lever and the run's workers: the later of the replay's step and the loader's
steady state (N workers, each loading a batch in what loading one took before, deliver one every
load / N ms once their prefetched batches are used)."""

from __future__ import annotations

import pytest

from orchestrator.analysis.metrics import LeverProjection
from orchestrator.analysis.presentation.projections import _loader_floor
from orchestrator.analysis.settings import RunSettings, Setting


def _input(step_ms: float, removed_ms: float) -> LeverProjection:
    return LeverProjection(lever="input", step_ms=step_ms, low_ms=step_ms, high_ms=step_ms,
                           removed_ms=removed_ms, assumption="")  # fmt: skip


def _workers(n: int | None) -> RunSettings:
    return RunSettings(data_workers=None if n is None else Setting(value=n, source="test"))


def test_from_no_workers_a_slow_loader_settles_at_its_steady_state() -> None:
    """600 ms of loading a step, 52 ms of the rest: 4 workers deliver a batch every 150 ms,
    which the 52 ms cannot hide (the ImageNet example: tests/unit/test_heldout_external.py)."""
    mid, high, text = _loader_floor(_workers(0), _input(52.0, 600.0), 652.0)
    assert mid == pytest.approx(150.0) and high == pytest.approx(150.0)
    assert "4 DataLoader workers, each loading a batch as fast as the main thread did" in text
    assert "every 150.0 ms" in text and "(52.0 ms) cannot hide" in text


def test_from_no_workers_a_fast_loader_keeps_up() -> None:
    """50 ms of loading, 74 ms of the rest: 4 workers deliver a batch every 12.5 ms and keep
    up; the replay's step stands."""
    mid, high, text = _loader_floor(_workers(None), _input(74.0, 50.0), 124.0)
    assert mid == 74.0 and high == 74.0
    assert text.startswith("4 DataLoader workers keep up") and "every 12.5 ms" in text


def test_from_some_workers_twice_as_many_halve_the_step_they_bound() -> None:
    """Behind at 4 workers (a 200 ms step, the GPU's 30 ms): a batch takes the 4 of them 800 ms
    each, so 8 deliver one every 100 ms."""
    mid, _, text = _loader_floor(_workers(4), _input(30.0, 170.0), 200.0)
    assert mid == pytest.approx(100.0)
    assert "8 DataLoader workers, each loading a batch as fast as the 4 now do" in text
