"""A capture that lost its data is a failure (issue 24, item 4): the evidence rules of
`analysis/readers/capture_health.py` on stand-in exports (tests/fixtures/nsys_builder.py); the real
case (DDP reports that lost their kernels under nsys 2023.4) is in test_real_gpu_exports.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.analysis.readers import capture_health, nsys_sqlite
from orchestrator.core.errors import RuntimeFailure
from tests.fixtures.nsys_builder import NsysBuilder

MAIN = 4242


def _export(path: Path, *, kernels: int, launches: int, diagnostics: list[tuple[int, str]]) -> Path:
    b = NsysBuilder(path)
    b.add_gpu(0)
    for i in range(kernels):
        b.add_kernel(1000 * i, 1000 * i + 500, "k", launch=1000 * i - 100)
    for i in range(launches):
        b.add_runtime(50_000 + 10 * i, 50_005 + 10 * i, "cudaLaunchKernel_v7000", tid=MAIN)
    b.add_runtime(90_000, 90_010, "cudaMemcpyAsync_v3020", tid=MAIN)
    if diagnostics:
        b.db.execute(
            "CREATE TABLE DIAGNOSTIC_EVENT (timestamp INTEGER NOT NULL, timestampType INTEGER"
            " NOT NULL, source INTEGER NOT NULL, severity INTEGER NOT NULL, text TEXT NOT NULL,"
            " globalPid INTEGER)"
        )
        b.db.executemany(
            "INSERT INTO DIAGNOSTIC_EVENT VALUES (?, 1, 3, ?, ?, NULL)",
            [(i, sev, text) for i, (sev, text) in enumerate(diagnostics)],
        )
    return b.close()


def test_launches_without_kernels_are_refused(tmp_path: Path) -> None:
    path = _export(tmp_path / "x.sqlite", kernels=0, launches=3, diagnostics=[])
    with pytest.raises(RuntimeFailure, match=r"3 that launch or look up kernels .* no kernel"):
        nsys_sqlite.read_timelines(path)


def test_accepting_the_loss_reads_what_was_kept_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_RUN_ACCEPT_LOST_DATA", "1")
    path = _export(tmp_path / "x.sqlite", kernels=0, launches=3, diagnostics=[])
    (tl,) = nsys_sqlite.read_timelines(path)
    assert any("this capture lost data" in n for n in tl.notes)


def test_kernels_with_their_launches_and_a_cpu_capture_are_fine(tmp_path: Path) -> None:
    for kernels, launches in ((4, 0), (0, 0)):
        path = _export(tmp_path / f"k{kernels}.sqlite", kernels=kernels, launches=launches,
                       diagnostics=[(1, "Profiling has started.")])  # fmt: skip
        (tl,) = nsys_sqlite.read_timelines(path)
        assert tl.gpu.size == kernels and not any("lost data" in n for n in tl.notes)


@pytest.mark.parametrize(
    ("diagnostic", "refused"),
    [
        ((3, "Failed to import CUPTI activity buffer"), True),  # severity Error
        ((2, "1234 CUDA events were dropped: the buffer overflowed"), True),
        ((2, "Not all NVTX events might have been collected."), False),  # every capture
        ((2, "No NVTX events collected. Does the process use NVTX?"), False),
        # a loss whose breakdown names anything but the host's samples, or nothing
        ((2, "Some events (12) were lost (including CUDA:\t10, Perf:\t2)."), True),
        ((2, "Some events (3) were lost. Certain charts may display incorrect data."), True),
        ((3, "Some events (4) were lost (including OS Runtime: 4)."), True),
    ],
)
def test_nsys_diagnostics_that_say_data_was_lost(
    tmp_path: Path, diagnostic: tuple[int, str], refused: bool
) -> None:
    path = _export(tmp_path / "x.sqlite", kernels=2, launches=0, diagnostics=[diagnostic])
    if refused:
        with pytest.raises(RuntimeFailure, match="nsys's own diagnostics say"):
            nsys_sqlite.read_timelines(path)
    else:
        (tl,) = nsys_sqlite.read_timelines(path)
        assert tl.gpu.size == 2


# as a 2024.2 capture on a loaded 2-core CI machine wrote it (tab and all)
PERF_ONLY = (
    "Some events (\t3) were lost (including Perf:\t3). Certain charts (including CPU utilization)"
    " on the timeline may display incorrect data. Try to decrease sampling rate and start a new"
    " profiling session."
)


@pytest.mark.parametrize("severity", [2, 3])
def test_losing_only_the_hosts_samples_is_read_with_a_note(tmp_path: Path, severity: int) -> None:
    path = _export(
        tmp_path / "x.sqlite", kernels=2, launches=0, diagnostics=[(severity, PERF_ONLY)]
    )
    (tl,) = nsys_sqlite.read_timelines(path)
    assert tl.gpu.size == 2
    (note,) = [n for n in tl.notes if "sampled events" in n]
    assert "lost 3 of the host's sampled events" in note and "GPU's figures stand" in note
    assert not any("this capture lost data" in n for n in tl.notes)


def test_the_jobs_check_passes_a_loss_of_samples_and_fails_a_loss_of_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    perf = _export(tmp_path / "perf.sqlite", kernels=2, launches=0, diagnostics=[(2, PERF_ONLY)])
    assert capture_health.main([str(perf)]) == 0
    assert "lost 3 of the host's sampled events" in capsys.readouterr().err
    both = _export(
        tmp_path / "both.sqlite",
        kernels=2,
        launches=0,
        diagnostics=[(2, PERF_ONLY), (2, "Some events (7) were lost (including CUDA: 7).")],
    )
    assert capture_health.main([str(both)]) == 1
    err = capsys.readouterr().err
    assert "this capture lost data" in err and "including CUDA: 7" in err
