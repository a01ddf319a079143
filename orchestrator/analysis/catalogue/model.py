"""What a catalogue entry is: one metric with its name, group, label, unit, the direction that
is better, how one entry's (a rank's device) value is read, how the values of a run's entries
make the run's value, which sources can measure it, its format and its one-line definition.

A metric is read from `RankMetrics` (the families fill it) or, for a figure a family computes
that `RankMetrics` has no field for, computed from the entry's timeline (`Metric.compute`) and
kept in `RankMetrics.figures`: what a compute node ships (issue 30) is then every per-rank
value, and the run's value is made wherever the per-rank analyses meet, by `Metric.across`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.core import human as L

if TYPE_CHECKING:
    from orchestrator.analysis.metrics import Metrics, RankMetrics

Better = Literal["lower", "higher"]
# how the values of a run's entries make the run's value: their mean (each in the metric's unit
# first), sum or maximum (then in the metric's unit); entries without a value are left out
Across = Literal["mean", "sum", "max"]
RankGet = Callable[["RankMetrics"], float | None]
RunGet = Callable[["Metrics"], float | None]
KIND_NAMES = {"nsys-sqlite": "nsys", "kineto-json": "Kineto", "torch-snapshot": "PyTorch snapshot"}
# the traces: what a metric is measured by unless it says otherwise
TRACE_KINDS = frozenset({"nsys-sqlite", "kineto-json"})


@dataclass(frozen=True)
class Need:
    """What a run's inputs must hold for a metric to be measured at all (beyond their kind)."""

    says: str
    test: Callable[[Metrics], bool]


def _kernels(m: Metrics) -> bool:
    return any(r.activity.kernel_count for r in m.ranks)


def _activity(m: Metrics) -> bool:
    return any(
        r.activity.kernel_count + r.activity.memcpy_count + r.activity.memset_count for r in m.ranks
    )


def _osrt(m: Metrics) -> bool:
    return any(s.kind == "nsys-sqlite" and "OSRT_API" not in s.missing for s in m.sources)


def _runtime(m: Metrics) -> bool:
    return _kernels(m) and not any("CUPTI_ACTIVITY_KIND_RUNTIME" in s.missing for s in m.sources)


def _operators(m: Metrics) -> bool:
    return any(s.kind == "kineto-json" for s in m.sources) or any(r.operators for r in m.ranks)


def _workload(m: Metrics) -> bool:
    return any(r.workload is not None for r in m.ranks)


# Without kernels the span of a few copies is no window to judge GPU time by.
KERNELS = Need("kernels", _kernels)
ACTIVITY = Need("GPU activity: kernels, copies or memsets", _activity)
OSRT = Need("OS-runtime calls traced: nsys --trace osrt", _osrt)
RUNTIME = Need("kernels and their CUDA runtime calls", _runtime)
WORKLOAD = Need("the workload's metrics.json beside the trace", _workload)
OPERATORS = Need(
    "CPU operators: Kineto cpu_op, or PyTorch's NVTX operator ranges (nsys --pytorch)", _operators
)


@dataclass(frozen=True)
class Sources:
    """Which inputs measure a metric: these kinds of source, holding what `need` says. What a
    run's sources cannot measure is "not measured" (JSON null), never a real 0."""

    kinds: frozenset[str] = TRACE_KINDS
    need: Need | None = None

    def measured(self, m: Metrics) -> bool:
        if not any(s.kind in self.kinds for s in m.sources):
            return False
        return self.need is None or self.need.test(m)

    @property
    def gpu(self) -> bool:
        """Whether the metric is about the GPU side (it needs kernels or GPU activity)."""
        return self.need in (KERNELS, ACTIVITY, RUNTIME)

    def says(self) -> str:
        kinds = " and ".join(KIND_NAMES[k] for k in KIND_NAMES if k in self.kinds)
        return f"{kinds}, with {self.need.says}" if self.need else kinds


NSYS_ONLY = frozenset({"nsys-sqlite"})
KINETO_ONLY = frozenset({"kineto-json"})
ANY = Sources()


@dataclass(frozen=True)
class Entry:
    """What a family function that computes a figure gets: one entry of a rank's timeline
    (`timeline.RankTimeline`), its GPU rows sorted by start (`timeline.GpuTable`), its devices,
    whether it is the rank's first entry (where the process-wide host figures sit) and its
    span (first start, last end of its GPU activity)."""

    timeline: Any
    rows: Any
    devices: list[int]
    first: bool
    span: tuple[int, int]


@dataclass(frozen=True)
class Metric:
    """One metric, declared once. `unit` is the unit of the run's value (what compare, the
    state store and campaigns hold: the key says it, `_pct`, `_s`, `_bytes`, ...); `rank`
    reads an entry's value in `rank_unit` (default `unit`); `across` makes the run's value of
    the entries' values, or `run` reads it where it is no such aggregate (the cross-rank
    skews). `rank_measured`: which entries measure it (those with GPU activity, say), for the
    cross-rank spread; `basis`: how a run measured it, where runs can differ (compare does not
    compare runs measured differently)."""

    key: str
    group: str
    label: str
    unit: str
    definition: str
    rank: RankGet | None = None
    rank_unit: str | None = None
    across: Across = "mean"
    run: RunGet | None = None
    better: Better | None = None
    sources: Sources = ANY
    rank_measured: Callable[[RankMetrics], bool] | None = None
    basis: Callable[[Metrics], str | None] | None = None
    # a family function that computes the figure from the entry's timeline (`Entry`); kept in
    # RankMetrics.figures under `key`, where `rank_value` reads it when `rank` is None
    compute: Callable[[Entry], float | None] | None = None
    # other names of the same number in the state store (kept for campaigns that watch them)
    aliases: tuple[str, ...] = ()
    # the views that show it where no layout places it (`views.OPEN_VIEWS`); None: every
    # open view when no view places it (a new metric), else only where layouts place it
    views: frozenset[str] | None = None

    @property
    def worse(self) -> str | None:
        """Which direction is worse ("higher" / "lower"), for the worst entry."""
        return {"lower": "higher", "higher": "lower"}.get(self.better or "")

    def rank_value(self, r: RankMetrics, unit: str | None = None) -> float | None:
        """One entry's value, in `unit` (default `rank_unit`)."""
        if self.rank is not None:
            v = self.rank(r)
        elif self.compute is not None:
            v = r.figures.get(self.key)
        else:
            return None
        if v is None or unit is None:
            return v
        return L.convert(v, self.rank_unit or self.unit, unit)

    def run_value(self, m: Metrics, unit: str | None = None, *, check: bool = True) -> float | None:
        """The run's value in `unit` (default the metric's own); None where its sources
        cannot measure it (`check`) or no entry has a value."""
        if check and not self.sources.measured(m):
            return None
        to = unit or self.unit
        if self.run is not None:
            v = self.run(m)
            return None if v is None else L.convert(v, self.unit, to)
        if self.rank is None and self.compute is None:
            return None
        if self.across == "mean":
            each = [v for r in m.ranks if (v := self.rank_value(r, to)) is not None]
            return sum(float(v) for v in each) / len(each) if each else None
        raw = [v for r in m.ranks if (v := self.rank_value(r)) is not None]
        if not raw:
            return None
        whole = sum(raw) if self.across == "sum" else max(raw)
        return float(L.convert(whole, self.rank_unit or self.unit, to))


@dataclass(frozen=True)
class Family:
    """Metrics of each name a run's data holds: a kernel type, a copy direction, a thread.
    `names` lists them over a run's entries, in the order they are shown; `make` gives the
    metric of one."""

    key: str
    group: str
    label: str
    unit: str
    definition: str
    names: Callable[[Sequence[RankMetrics]], list[str]]
    make: Callable[[str], Metric]
    sources: Sources = ANY
    views: frozenset[str] | None = None
