"""A fixed piece of CPU work timed beside each training step (`--cpu-reference`).

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
"""

from __future__ import annotations

import time

from workloads.data import WordPieceTokenizer

# About 2-4 ms on the dev machine: small beside a data-bound step, long enough to time.
_TEXT = (
    "### Instruction:\nSummarise the design review for the on-call team.\n\n### Response:\n"
    + "the kernel waits for the batch while the loader tokenises every sample again " * 12
)
_PASSES = 8


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
