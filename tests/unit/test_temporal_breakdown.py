"""The temporal breakdown (HTA's span, idle, compute, non-compute) and gh-run's span, busy and
idle against a count of every nanosecond: whatever the events, including copies, memsets and
NCCL kernels that outlast the last computation kernel (the span ends at the latest end, never
at the end of the event that starts last)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.families import breakdown
from orchestrator.analysis.families.breakdown import HtaView
from orchestrator.analysis.families.kernel_classes import COMMUNICATION, COMPUTATION, MEMORY, OTHER
from tests.budget import examples
from tests.fixtures.nsys_builder import NsysBuilder

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
# HTA's kernel types by code (kernel_classes): what an event of each class is in an nsys export
KINDS = {
    COMPUTATION: "gemm",
    COMMUNICATION: "nccl",
    MEMORY: "memcpy",
    OTHER: "memset",
}

Event = tuple[int, int, int]  # start, end, HTA class


def brute(events: list[Event]) -> dict[str, int]:
    """Span, busy, idle, compute and non-compute by looking at every nanosecond."""
    lo = min(s for s, _, _ in events)
    hi = max(e for _, e, _ in events)
    busy = compute = 0
    for t in range(lo, hi):
        running = {c for s, e, c in events if s <= t < e}
        busy += bool(running)
        compute += COMPUTATION in running
    span = hi - lo
    return {
        "span": span,
        "busy": busy,
        "idle": span - busy,
        "compute": compute,
        "non_compute": busy - compute,
    }


@st.composite
def timelines(draw: Any) -> list[Event]:
    """Events of every class at random, then, most of the time, a long event that is not a
    computation (a copy, a memset, an NCCL kernel) starting before the last computation kernel
    starts and ending after everything else: the case no committed trace has."""
    events = draw(
        st.lists(
            st.tuples(st.integers(0, 200), st.integers(0, 40), st.sampled_from(list(KINDS))),
            min_size=1,
            max_size=25,
        )
    )
    out = [(s, s + d, c) for s, d, c in events]
    if draw(st.booleans()) or draw(st.booleans()):
        last = max(s for s, _, _ in out)
        start = draw(st.integers(0, last))
        end = max(e for _, e, _ in out) + draw(st.integers(1, 60))
        kind = draw(st.sampled_from([COMMUNICATION, MEMORY, OTHER]))
        out.append((start, end, kind))
        out.append((last, last + 1, COMPUTATION))  # the last to start: a short one
    return out


def view(events: list[Event]) -> HtaView:
    events = sorted(events)
    return HtaView(
        start=np.array([s for s, _, _ in events], dtype=np.int64),
        end=np.array([e for _, e, _ in events], dtype=np.int64),
        cls=np.array([c for _, _, c in events], dtype=np.int8),
        stream=np.zeros(len(events), dtype=np.int64),
        launch=np.full(len(events), -1, dtype=np.int64),
        kernel_cat=np.ones(len(events), dtype=bool),
        unit_ns=1,
        basis="",
    )


@given(timelines())
@settings(max_examples=examples(300), deadline=None)
def test_temporal_breakdown_equals_a_per_nanosecond_count(events: list[Event]) -> None:
    want = brute(events)
    t = breakdown.temporal(view(events))
    got = {
        "span": t.span_ns,
        "busy": t.span_ns - t.idle_ns,
        "idle": t.idle_ns,
        "compute": t.compute_ns,
        "non_compute": t.non_compute_ns,
    }
    assert got == want
    span = want["span"]
    for key, pct in (("idle", t.idle_pct), ("compute", t.compute_pct),
                     ("non_compute", t.non_compute_pct)):  # fmt: skip
        assert pct == (100.0 * want[key] / span if span else 0.0)


def nsys_export(path: Path, events: list[Event]) -> Path:
    """The events as an nsys export: computation as GEMM kernels, communication as NCCL
    kernels on a stream of their own, memory as HtoD copies, other as memsets."""
    b = NsysBuilder(path, fast=True)
    b.add_gpu(0)
    for s, e, c in events:
        if c == COMPUTATION:
            b.add_kernel(s, e, GEMM)
        elif c == COMMUNICATION:
            b.add_kernel(s, e, NCCL, stream=20)
        elif c == MEMORY:
            b.add_memcpy(s, e, 1, 4096, stream=9)
        else:
            b.add_memset(s, e, 4096, stream=11)
    return b.close()


@given(timelines())
@settings(max_examples=examples(40), deadline=None)
def test_an_export_gives_the_per_nanosecond_figures(events: list[Event]) -> None:
    """Through the whole analysis of an nsys export: gh-run's span, busy and idle and HTA's
    temporal breakdown (memsets count as busy, and HTA, which does not class them, as
    non-compute)."""
    want = brute(events)
    with tempfile.TemporaryDirectory() as tmp:
        m = analyze_paths([nsys_export(Path(tmp) / "t.sqlite", events)])
    (r,) = m.ranks
    assert (r.span_ns, r.busy_ns, r.idle_ns) == (want["span"], want["busy"], want["idle"])
    t = r.temporal
    assert (t.span_ns, t.idle_ns, t.compute_ns, t.non_compute_ns) == (
        want["span"],
        want["idle"],
        want["compute"],
        want["non_compute"],
    )


def test_a_long_copy_after_the_last_kernel_ends_the_span(tmp_path: Path) -> None:
    """By construction: kernels [0,100) [150,200), a copy [120,400) and an NCCL kernel
    [180,300): the span is 400 (the copy's end), not 200 (the end of the kernel that starts
    last); compute 150, idle 20 ([100,120)), non-compute 230."""
    events = [
        (0, 100, COMPUTATION),
        (120, 400, MEMORY),
        (150, 200, COMPUTATION),
        (180, 300, COMMUNICATION),
    ]
    m = analyze_paths([nsys_export(tmp_path / "t.sqlite", events)])
    (r,) = m.ranks
    t = r.temporal
    assert (r.span_ns, r.idle_ns) == (400, 20)
    assert (t.span_ns, t.idle_ns, t.compute_ns, t.non_compute_ns) == (400, 20, 150, 230)
    assert t.compute_pct == 100.0 * 150 / 400
