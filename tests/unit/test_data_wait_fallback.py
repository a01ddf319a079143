"""Issue 15, class 9: the no-GPU-span fallback of the data-wait union. A trace with data-loader
ranges but no GPU activity has no span to clip them to: the data wait is all of the ranges
(the mutant that drops the fallback, or clips to an empty span, reads 0). Through the public
analysis entry point, so it holds whatever the readers' layout."""

from __future__ import annotations

from pathlib import Path

from orchestrator.analysis import analyze_paths
from tests.fixtures.kineto_builder import KinetoBuilder


def _ranges(b: KinetoBuilder) -> int:
    """Two disjoint data-loader ranges (30 us and 45 us) and an unrelated one."""
    b.cpu("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 30)
    b.cpu("user_annotation", "get_batch", 400, 45)
    b.cpu("user_annotation", "forward", 500, 300)
    return (30 + 45) * 1000


def test_without_gpu_activity_the_data_wait_is_all_of_the_ranges(tmp_path: Path) -> None:
    b = KinetoBuilder(rank=0)
    want = _ranges(b)
    [rank] = analyze_paths([b.write(tmp_path / "cpu_only.pt.trace.json")]).ranks
    assert rank.span_ns == 0
    assert rank.data_wait_ns == want


def test_with_gpu_activity_the_data_wait_is_clipped_to_the_span(tmp_path: Path) -> None:
    b = KinetoBuilder(rank=0)
    _ranges(b)
    b.gpu("kernel", "k", 410, 100)  # the span is [410, 510) us: 35 us of get_batch inside
    [rank] = analyze_paths([b.write(tmp_path / "gpu.pt.trace.json")]).ranks
    assert rank.span_ns == 100_000
    assert rank.data_wait_ns == 35_000
