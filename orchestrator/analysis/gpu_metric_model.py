"""The contract of what nsys's GPU-metric samples say about one entry (a rank's device): the
means over the entry's span, per step, and a lane of the representative step's picture, with
the evidence that tied the samples to the GPU the rank used. Computed by `gpu_metrics`.

Percentages are 0-100, clocks MHz, throughputs GB/s where the metric set gives them; a metric
gh-run does not know keeps its export name and bracket unit (`MetricMean.key` None).
"""

from __future__ import annotations

from orchestrator.core.base import Strict


class MetricMean(Strict):
    """One metric's mean over a window: its name in the export, the catalogue key gh-run knows
    it by (None: unknown, shown by its name), its unit and the number of samples."""

    name: str
    key: str | None = None
    unit: str
    mean: float
    samples: int


class StepMetrics(Strict):
    """The known metrics' means over one step (times in the rank's own clock)."""

    name: str
    start_ns: int
    end_ns: int
    samples: int
    # how much of the step lies between the GPU's first and last sample, percent
    covered_pct: float = 100.0
    means: dict[str, float] = {}


class MetricLane(Strict):
    """The representative step's window (`StepView`) cut into equal buckets, each known
    metric's mean per bucket (None: no sample in it), for the report's metrics lane."""

    start_ns: int
    bucket_ns: int
    series: dict[str, list[float | None]] = {}


class GpuMetrics(Strict):
    """nsys GPU metrics of one entry. `sampler`: the export whose nsys sampled (the entry's own,
    or another rank's on the same node); `attribution`: how the samples were tied to the GPU
    the rank's kernels ran on; the window is the entry's span (its first to last GPU activity),
    in the entry's own clock."""

    device: int
    uuid: str | None = None
    sampler: str
    attribution: str
    window_start_ns: int
    window_end_ns: int
    samples: int
    # how much of the window lies between the GPU's first and last sample, percent (another
    # report's sampler may have opened its capture later or closed it earlier)
    covered_pct: float = 100.0
    rate_hz: float | None = None
    metrics: list[MetricMean] = []
    steps: list[StepMetrics] = []
    lane: MetricLane | None = None

    def value(self, key: str) -> float | None:
        """A known metric's mean over the span (the sum where several make it: NVLink's request
        and response user data)."""
        vals = [m.mean for m in self.metrics if m.key == key]
        return sum(vals) if vals else None
