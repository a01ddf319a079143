"""Host code between two kernels of one optimizer step is the optimizer's launch overhead
(issue 35, `idle_evidence.inside_optimizer`): which GPU-idle intervals lie inside an optimizer
step, on a synthetic timeline (a stand-in: `test_step_rules.timeline`)."""

from __future__ import annotations

import numpy as np

from orchestrator.analysis.families import idle_evidence as E
from tests.unit.test_step_rules import timeline

OPT = [
    *["multi_tensor_apply_kernel"] * 3, *[f"elementwise_{i % 2}" for i in range(30)],
    *["multi_tensor_apply_kernel"] * 2, *[f"elementwise_{i % 2}" for i in range(30)],
    "multi_tensor_apply_kernel",
]  # fmt: skip
FWD_BWD = [f"layer_{i}" for i in range(80)]


def _steps(n: int) -> tuple[list[tuple[str, int, int]], dict[str, list[tuple[int, int]]]]:
    """Kernels of n steps, 1 µs apart, with a 2 ms gap before each burst of the optimizer
    (its Python-side preparation), one in the forward, and 3 ms after the optimizer (the loop's
    own work between steps); the gaps by where they are."""
    out: list[tuple[str, int, int]] = []
    gaps: dict[str, list[tuple[int, int]]] = {"optimizer": [], "forward": [], "between": []}
    t = 10_000_000
    for _ in range(n):
        body = [*FWD_BWD, *OPT]
        for i, name in enumerate(body):
            where = (
                "forward" if i == 40
                else "optimizer" if name.startswith("multi") and body[i - 1] != name
                and i > len(FWD_BWD) else None
            )  # fmt: skip
            if where:
                gaps[where].append((t, t + 2_000_000))
                t += 2_000_000
            out.append((name, t, t + 10_000))
            t += 11_000
        gaps["between"].append((t - 1_000, t + 3_000_000))
        t += 3_000_000
    gaps["between"].pop()  # the last step's trailing work lies after the last kernel
    return out, gaps


def test_gaps_between_the_optimizers_kernels_are_inside_it_and_no_others() -> None:
    kernels, gaps = _steps(4)
    tl = timeline(kernels)
    for where, want in (("optimizer", True), ("forward", False), ("between", False)):
        a = np.array([x for x, _ in gaps[where]], np.int64)
        b = np.array([y for _, y in gaps[where]], np.int64)
        got = E.inside_optimizer(tl, tl.gpu, a, b)
        assert got.tolist() == [want] * a.size, where


def test_no_optimizer_kernels_no_interval_inside() -> None:
    kernels = [(f"layer_{i % 7}", 1_000 * i, 1_000 * i + 500) for i in range(100)]
    tl = timeline(kernels)
    a = np.array([10_600, 50_600], np.int64)
    assert not E.inside_optimizer(tl, tl.gpu, a, a + 300).any()
