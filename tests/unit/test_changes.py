"""What changed between two runs, on Metrics known by construction: the phase that carries
the step's change names the cause; kernels new, gone and moved; a metric group that moved
when no phase explains it; nothing said to move within noise; `compare` carries it."""

from __future__ import annotations

from orchestrator.analysis.metrics import (
    Aggregate,
    KernelStat,
    Metrics,
    RangeStat,
    RankMetrics,
    Source,
    StepStats,
)
from orchestrator.analysis.presentation.changes import what_changed


def _ms(x: float) -> int:
    return int(x * 1e6)


def _metrics(
    phases: dict[str, float],
    step: float,
    kernels: dict[str, float] | None = None,
    idle: float | None = None,
    label: str = "",
) -> Metrics:
    steps = 4
    nvtx = [
        RangeStat(
            name=n,
            count=steps,
            total_ns=_ms(t) * steps,
            mean_ns=_ms(t),
            min_ns=_ms(t),
            max_ns=_ms(t),
        )
        for n, t in phases.items()
    ]
    nvtx.append(
        RangeStat(
            name="Optimizer.step#AdamW.step",
            count=steps,
            total_ns=_ms(99) * steps,
            mean_ns=_ms(99),
            min_ns=0,
            max_ns=0,
        )
    )
    span = _ms(1000) if idle is not None else 0
    rank = RankMetrics(
        rank=0,
        devices=[0],
        source="constructed",
        span_ns=span,
        idle_pct=idle or 0.0,
        nvtx=nvtx,
        data_wait_ns=_ms(phases.get("data", 0)) * steps,
        steps=StepStats(
            family="step_N",
            count=steps,
            total_ns=_ms(step) * steps,
            mean_ns=_ms(step),
            p50_ns=_ms(step),
            p90_ns=_ms(step),
            min_ns=_ms(step),
            max_ns=_ms(step),
            durations_ns=[_ms(step)] * steps,
        ),
        top_kernels=[
            KernelStat(
                name=k, count=1, total_ns=_ms(t), mean_ns=_ms(t), share_pct=0.0, compute=True
            )
            for k, t in (kernels or {}).items()
        ],
    )
    agg = Aggregate(ranks=1, span_ns=span, idle_pct_mean=idle or 0.0)
    # a stand-in source (built here, no file): an nsys export, whose steps every row measures
    src = Source(path="constructed.sqlite", kind="nsys-sqlite", rank=0, rank_rule="constructed")
    return Metrics(sources=[src], ranks=[rank], aggregate=agg, label=label)


GOOD = {"data": 20.0, "forward": 10.0, "backward": 15.0, "optimizer": 5.0}


def test_a_slower_data_phase_is_named_with_the_step_change() -> None:
    base = _metrics(GOOD, 50.0)
    slow = _metrics({**GOOD, "data": 38.0}, 68.0)
    w = what_changed(base, slow)
    assert (
        w.finding
        == "data phase +90.0 %, step time mean +36.0 %: data loading (tokenisation, collation)"
        " got slower"
    )
    assert [p.name for p in w.phases] == [
        "step time mean",
        "data",
        "forward",
        "backward",
        "optimizer",
    ]
    data_wait = next(g for g in w.groups if g.name == "data wait")
    assert data_wait.baseline == 40.0 and data_wait.value is not None and data_wait.value > 55


def test_the_backward_phase_named_when_it_carries_the_change() -> None:
    w = what_changed(_metrics(GOOD, 50.0), _metrics({**GOOD, "backward": 30.0}, 65.0))
    assert w.finding == (
        "backward phase +100.0 %, step time mean +30.0 %: the backward pass got slower"
    )


def test_kernels_new_gone_and_moved_and_an_idle_group() -> None:
    base = _metrics(GOOD, 50.0, {"gemm": 100.0, "old_copy": 5.0}, idle=10.0)
    run = _metrics(GOOD, 50.0, {"gemm": 180.0, "new_kernel": 20.0}, idle=25.0)
    w = what_changed(base, run)
    assert [(k.name, k.status) for k in w.kernels] == [
        ("gemm", "changed"),
        ("new_kernel", "new"),
        ("old_copy", "gone"),
    ]
    # no phase moved: the metric group that did is the finding
    assert w.finding == "step time mean unchanged, GPU idle +15.0 points: more GPU idle"


def test_within_noise_nothing_is_said_to_move() -> None:
    w = what_changed(_metrics(GOOD, 50.0), _metrics({**GOOD, "data": 20.4}, 50.5))
    assert w.finding == (
        "step time mean +1.0 %: no phase, metric group or kernel moved beyond noise"
    )


def test_compare_carries_what_changed_for_each_run() -> None:
    from orchestrator.analysis import compare

    c = compare(
        [_metrics(GOOD, 50.0), _metrics({**GOOD, "data": 38.0}, 68.0), _metrics(GOOD, 50.0)],
        ["a", "b", "c"],
    )
    assert [(w.label, w.baseline_label) for w in c.changes] == [("b", "a"), ("c", "a")]
    assert c.changes[0].finding.startswith("data phase +90.0 %, step time mean +36.0 %")
    assert c.changes[1].finding.endswith("moved beyond noise")


def test_one_figure_per_idea_the_step_as_compare_shows_it() -> None:
    """Issue 36: the report's headline put "train_step phase +91 %, step +89 %" beside "step
    time mean +90.9 %": the step's own ranges, summed under their pattern, were taken for a
    phase, and the step was the slowest rank's mean while the table showed the mean over
    ranks. The step ranges are the step, and the finding's step is the table's figure."""
    from orchestrator.analysis import compare

    def two_ranks(data_ms: float, step: float, slow: float) -> Metrics:
        m = _metrics({**GOOD, "data": data_ms, "train_step *": step}, step)
        r1 = m.ranks[0].model_copy(deep=True)
        r1.rank = 1
        assert r1.steps is not None
        r1.steps.mean_ns = _ms(slow)
        return m.model_copy(update={"ranks": [m.ranks[0], r1]})

    base, run = two_ranks(20.0, 50.0, 52.0), two_ranks(40.0, 95.0, 98.0)
    w = what_changed(base, run)
    assert "train_step" not in w.finding
    assert all(p.name != "train_step *" for p in w.phases)
    c = compare([base, run], ["a", "b"])
    (row,) = [r for r in c.rows if r.key == "step_time_mean_ms"]
    assert f"step time mean {row.change[1]}" in w.finding, (w.finding, row.change)
    step = w.phases[0]
    assert step.figure == "step_time_mean_ms" and step.name == row.metric
