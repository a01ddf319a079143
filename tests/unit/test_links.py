"""The pinned-copy projection (issue 41, lever "copies"): each host-device copy at the link's
pinned rate (`families/links.py`), the host held in a pageable copy's call until the copy
ends (`critical_path._ties`), and, the knob's copy being non_blocking, not held at all
(`critical_path._async_calls`). Checked on the H200 recordings of tests/data/causes_h200 (the
same image loop with pageable and with pinned batches) and tests/data/heldout_h200 (a GRU loop
copying a pageable batch with `.to()` and reading 8 scalars back a step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.analysis.families import critical_path as cp
from orchestrator.analysis.families import links
from orchestrator.analysis.loader import analyze_paths
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"
HELDOUT = Path(__file__).resolve().parents[1] / "data" / "heldout_h200"


@pytest.mark.parametrize(
    ("device", "link"),
    [
        ("NVIDIA GH200 480GB", links.C2C),
        ("NVIDIA GB200", links.C2C),
        ("NVIDIA H200", links.GEN5),
        ("NVIDIA H100 80GB HBM3", links.GEN5),
        ("NVIDIA B200", links.GEN5),
        ("NVIDIA A100-SXM4-80GB", links.GEN4),
        ("NVIDIA L40S", links.GEN4),
        ("Tesla V100-SXM2-32GB", links.UNKNOWN),
        ("", links.UNKNOWN),
    ],
)
def test_the_link_follows_the_device_name(device: str, link: Any) -> None:
    assert links.nominal(device) == link


def test_a_pinned_copy_takes_its_bytes_at_the_rate_plus_a_fixed_cost() -> None:
    got = links.pinned_ns(np.array([0, 55_000_000]), 55e9)
    assert got.tolist() == [links.OVERHEAD_NS, links.OVERHEAD_NS + 1_000_000]


def _graph(name: str, monkeypatch: pytest.MonkeyPatch, data: Path = DATA) -> cp.StepGraph:
    """The step graph `rank_metrics` builds for the recording's one rank."""
    seen: list[cp.StepGraph] = []
    real = cp.project

    def keep(g: cp.StepGraph, *a: Any, **k: Any) -> Any:
        seen.append(g)
        return real(g, *a, **k)

    monkeypatch.setattr(cp, "project", keep)
    analyze_paths([unpacked(data / name)])
    assert len(seen) == 1
    return seen[0]


def test_pinned_copies_in_the_trace_measure_the_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """img_pinned's 39 MB copies ran at ~55 GB/s: the rate is theirs, not the nominal one, and
    a copy already at it is left as it is."""
    g = _graph("img_pinned", monkeypatch)
    assert g.link.startswith("55 GB/s, measured on ") and " copies of this trace" in g.link, g.link
    assert g.copy_left is not None
    big = g.gpu_time["copies"] > 500_000
    assert big.any()
    assert np.all(g.copy_left[0][big] > 0.95)  # at most 5 % left to gain
    assert np.all(g.copy_left[0][~(g.gpu_time["copies"] > 0)] == 1.0)


def test_pageable_copies_run_at_the_nominal_rate_and_hold_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """img_pageable's copies ran at ~6.7 GB/s: at the H200's nominal 55 GB/s ~12 % of each is
    left. Each pageable call returned a few µs before its copy ended, so the call is tied to
    the copy: cutting the copies moves the host's next launch by about what was cut."""
    g = _graph("img_pageable", monkeypatch)
    assert "nominal for NVIDIA H200's PCIe Gen5 x16" in g.link, g.link
    assert g.copy_left is not None
    big = np.flatnonzero(g.gpu_time["copies"] > 1_000_000)
    assert big.size >= 2
    left = g.copy_left[0][big]
    assert np.all((left > 0.08) & (left < 0.16)), left
    assert g.sync_tie is not None and (g.sync_tie > 0).sum() >= big.size
    cut = (g.gpu_time["copies"] * (1.0 - g.copy_left[0])).astype(np.int64)
    no_gap = np.zeros(g.gap_at.size, dtype=np.int64)
    tied = cp.replay(g, no_gap, cut)
    untied = cp.replay(cp.StepGraph(**{**g.__dict__, "sync_tie": None}), no_gap, cut)
    nxt = big[0] + 1  # the first op after the first big copy
    gained_tied = int(g.start[nxt] + g.excl[nxt] - tied[nxt])
    gained_untied = int(g.start[nxt] + g.excl[nxt] - untied[nxt])
    assert gained_tied >= 0.8 * int(cut[big[0]]), (gained_tied, int(cut[big[0]]))
    assert gained_untied < 0.2 * int(cut[big[0]]), gained_untied


def test_a_copy_of_unknown_size_keeps_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source that gives no copy sizes (bytes 0) gets no pinned-copy gain rather than 1 µs
    copies: the rate needs the bytes."""
    real = cp.build

    def sizeless(tl: Any, rows: Any, *a: Any, **k: Any) -> Any:
        rows.nbytes = np.zeros(rows.size, dtype=np.int64)
        return real(tl, rows, *a, **k)

    monkeypatch.setattr(cp, "build", sizeless)
    g = _graph("img_pageable", monkeypatch)
    assert g.copy_left is not None
    assert all(np.all(x == 1.0) for x in g.copy_left)


def test_a_non_blocking_copy_frees_the_host_for_its_whole_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GRU's pageable `.to()` holds the host 4.0-4.7 ms a step in cudaMemcpyAsync and then a
    cudaStreamSynchronize (PyTorch's blocking copy); its 8 `.item()` reads are device-to-host.
    The copies' calls and the syncs right after them are the ones a non_blocking copy frees,
    the reads' are not; freed, the host's launches after a copy move by about the whole call,
    where a pinned copy that still blocks moves them by what the copy lost only."""
    g = _graph("run2", monkeypatch, HELDOUT)
    assert g.async_copy is not None and g.copy_left is not None
    htod = np.flatnonzero(g.gpu_time["copies"] > 1_000_000)  # the 33.5 MB batches
    assert htod.size >= 2
    calls = np.flatnonzero(g.sync_e - g.sync_s > 1_000_000)
    assert calls.size == htod.size
    assert g.async_copy[calls].all()
    assert g.async_copy[np.minimum(calls + 1, g.async_copy.size - 1)].all()  # PyTorch's sync
    short = g.sync_e - g.sync_s < 100_000
    assert (~g.async_copy[short]).sum() >= 8 * htod.size - 2  # the reads and their syncs
    cut = (g.gpu_time["copies"] * (1.0 - g.copy_left[0])).astype(np.int64)
    no_gap = np.zeros(g.gap_at.size, dtype=np.int64)
    blocking = cp.replay(g, no_gap, cut)
    freed = cp.replay(g, no_gap, cut, freed=g.async_copy)
    c = htod[0]
    later = np.flatnonzero(g.start > g.start[c] + 2 * g.excl[c])[0]  # host-launched work after it
    gained_blocking = int(g.start[later] + g.excl[later] - blocking[later])
    gained_freed = int(g.start[later] + g.excl[later] - freed[later])
    left = int(g.excl[c] - cut[c])  # the pinned copy's own time, which the host now overlaps
    assert gained_blocking >= 0.8 * int(cut[c]), (gained_blocking, int(cut[c]))
    assert gained_freed - gained_blocking >= 0.8 * left, (gained_freed, gained_blocking, left)
