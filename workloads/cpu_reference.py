"""A fixed piece of CPU work timed beside each training step (`--cpu-reference`), and the CPU
time of each step's phases in units of it.

On a shared or virtual machine the same code runs at different speeds from one minute to the
next: on the dev machine the data-bound canary's CPU time per step moved between 19 and 38 ms
with nothing else running (the hypervisor's other tenants share the physical cores). CPU time
cannot tell that drift from a slower program; a ratio can. Timing a fixed work in the same
process just before each step and dividing the step's CPU time by it largely cancels the
machine's speed of the moment and leaves what the program itself costs:
`median_step_cpu_relative` in metrics.json. The work is the workload's own kind (tokenising a
fixed text in pure Python), so it slows down as the data pipeline does when the machine is
slow; the step's torch part slows a little less, so a slow machine lowers the ratio somewhat
(by up to about 13 % in the runs measured; none raised it).

Other work on the machine (a busy login node, other jobs on the node's cores) moves wall time,
not CPU time: a process that waits for a core is not charged for the wait. So the ratio also
stands still under load, where a step's wall time moved 2.5-8x (issue 30); so does the plain
CPU time, except for the machine's own drift. That drift is not one factor for all code: in
the runs measured, pure-Python work (the tokeniser, a tiny model's op dispatch) ran up to 1.8x
slower from one minute to the next while dense torch kernels barely moved, so the ratio suits
steps dominated by Python work and plain CPU time steps dominated by kernels.
`PhaseClock` times the ranges (data, forward, backward, optimizer) the same way: what a
campaign's "what changed" compares when a night regressed on CPU time or the ratio (the traced
phases are wall times, which the load moves).

Only this process is counted: DataLoader worker processes (`--num-workers` > 0) do their
tokenisation elsewhere, so their slowdown does not show in the ratio.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator

from workloads.data import WordPieceTokenizer
from workloads.profiling import Annotator

# About 2-4 ms on the dev machine: small beside a data-bound step, long enough to time.
_TEXT = (
    "### Instruction:\nSummarise the design review for the on-call team.\n\n### Response:\n"
    + "the kernel waits for the batch while the loader tokenises every sample again " * 12
)
_PASSES = 8
# Ranges that are not a phase of the step: the step itself and the reference work.
_NOT_PHASES = ("step_", "cpu_reference")


class CpuReference:
    """The fixed work, ready to time: `measure()` is its CPU seconds now."""

    def __init__(self, vocab_size: int) -> None:
        self._tokenizer = WordPieceTokenizer(vocab_size)
        self.measure()  # the first pass warms the tokeniser's tables, not timed for a step

    def measure(self) -> float:
        """CPU seconds of the fixed work, now (never zero: it divides a step's CPU time)."""
        c0 = time.process_time()
        for _ in range(_PASSES):
            self._tokenizer.encode(_TEXT)
        return max(time.process_time() - c0, 1e-9)


class PhaseClock(Annotator):
    """The ranges of an `Annotator`, each also charged with this process's CPU time spent in
    it; `take()` hands over one step's phases."""

    def __init__(self, nvtx: bool, enabled: bool = True) -> None:
        super().__init__(nvtx, enabled)
        self._spent: dict[str, float] = {}

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        with super().range(name):
            c0 = time.process_time()
            try:
                yield
            finally:
                self._spent[name] = self._spent.get(name, 0.0) + time.process_time() - c0

    def take(self) -> dict[str, float]:
        """Each phase's CPU seconds since the last call, and start afresh."""
        spent, self._spent = self._spent, {}
        return {k: v for k, v in spent.items() if not k.startswith(_NOT_PHASES)}


def phase_medians(per_step: list[dict[str, float]]) -> dict[str, float]:
    """Each phase's median over the steps after the first (which pays for start-up), or over
    all steps when there are fewer than three; a step without the phase counts as zero."""
    steps = per_step[1:] if len(per_step) >= 3 else per_step
    names = dict.fromkeys(k for s in steps for k in s)
    return {k: statistics.median(s.get(k, 0.0) for s in steps) for k in names}


def relative_to(
    per_step: list[dict[str, float]], reference_s: list[float]
) -> list[dict[str, float]]:
    """Each step's phases in units of the reference work timed just before that step."""
    return [
        {k: v / ref for k, v in step.items()}
        for step, ref in zip(per_step, reference_s, strict=True)
    ]
