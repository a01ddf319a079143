"""nsys GPU metrics (issue 29): gh-run's readings against plain SQL over the same window, the
page reader against SQLite, names by meaning, one sampler per node, "not measured" where a run
has none. Recordings: tests/data/gpu_metrics (nsys 2024.2.3 on H200s; its README)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.catalogue import views
from orchestrator.analysis.families import gpu_metrics
from orchestrator.analysis.presentation.compare import compare
from orchestrator.analysis.readers import gpu_metric_names as N
from tests.fixtures.recordings import export, unpacked

DATA = Path(__file__).resolve().parents[1] / "data"
METRICS = DATA / "gpu_metrics"
# catalogue key -> the metric names of the 2024.2 gh100 set that make it
NAMES = {
    "sm_active_pct": ["SMs Active [Throughput %]"],
    "sm_issue_pct": ["SM Issue [Throughput %]"],
    "tensor_active_pct": ["Tensor Active [Throughput %]"],
    "dram_read_pct": ["DRAM Read Bandwidth [Throughput %]"],
    "dram_write_pct": ["DRAM Write Bandwidth [Throughput %]"],
    "pcie_rx_pct": ["PCIe RX Throughput [Throughput %]"],
    "pcie_tx_pct": ["PCIe TX Throughput [Throughput %]"],
    "nvlink_tx_pct": [
        "NVLink TX Requests User Data [Throughput %]",
        "NVLink TX Responses User Data [Throughput %]",
    ],
}


def sql(path: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn, conn:
        return conn.execute(query, args).fetchall()


def sql_mean(db: Path, gpu: int, name: str, lo: int, hi: int) -> float | None:
    """The reference: SQL's mean of one metric of one GPU (typeId - sourceId = its id here)
    over [lo, hi] of the sampler's clock."""
    (row,) = sql(
        db,
        "SELECT avg(g.value) FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS m"
        " USING (typeId, metricId) WHERE m.metricName = ? AND g.typeId - m.sourceId = ?"
        " AND g.timestamp BETWEEN ? AND ?",
        name,
        gpu,
        lo,
        hi,
    )
    return None if row[0] is None else float(row[0])


def sql_means(db: Path, gpu: int, names: set[str], lo: int, hi: int) -> dict[str, float]:
    """sql_mean of several metrics in one query (SQLite indexes GPU_METRICS anew for each
    query: over the 650,000 samples of fp32, 0.5 s of CPU a metric)."""
    marks = ", ".join("?" * len(names))
    rows = sql(
        db,
        "SELECT m.metricName, avg(g.value) FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS m"
        f" USING (typeId, metricId) WHERE m.metricName IN ({marks}) AND g.typeId - m.sourceId = ?"
        " AND g.timestamp BETWEEN ? AND ? GROUP BY m.metricName",
        *sorted(names),
        gpu,
        lo,
        hi,
    )
    return {name: float(mean) for name, mean in rows if mean is not None}


def session_start(db: Path) -> int:
    return int(sql(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0])


@pytest.mark.parametrize("variant", ["bf16", "fp32"])
def test_readings_are_within_a_point_of_sql_over_the_span(variant: str) -> None:
    folder = unpacked(METRICS / variant)
    db = folder / f"metrics_{variant}.sqlite"
    (r,) = analyze_paths([folder]).ranks
    g = r.gpu_metrics
    assert g is not None and g.device == 0 and r.devices == [0]
    assert (g.window_start_ns, g.window_end_ns) == (r.span_start_ns, r.span_end_ns)
    clock_name = "GPC Clock Frequency [MHz]"
    asked = {n for key, names in NAMES.items() if not key.startswith("nvlink") for n in names}
    means = sql_means(db, 0, asked | {clock_name}, r.span_start_ns, r.span_end_ns)
    for key, names in NAMES.items():
        if key.startswith("nvlink"):
            continue
        want = sum(means.get(n, 0) for n in names)
        got = g.value(key)
        assert got is not None and abs(got - want) < 1.0, (key, got, want)
    # clocks in MHz (sampled in Hz; the export's GpuMetricsConfig multiplier)
    clock = g.value("gpc_clock_mhz")
    hz = means.get(clock_name)
    assert clock is not None and hz is not None and clock == pytest.approx(hz / 1e6, rel=1e-9)
    assert 1000 < clock < 2100
    assert g.samples == pytest.approx(r.span_ns / 1e5, rel=0.02)  # 10 kHz
    assert g.covered_pct > 99


def test_bf16_and_fp32_tell_apart_what_busy_does_not() -> None:
    """Both runs keep the GPU busy; the tensor cores work in bf16 and idle in fp32 (README:
    28.9 % and 2.1 % over the capture window)."""
    bf16 = analyze_paths([unpacked(METRICS / "bf16")])
    fp32 = analyze_paths([unpacked(METRICS / "fp32")])
    assert (views.value("gpu_busy_pct", bf16) or 0) > 90 < (views.value("gpu_busy_pct", fp32) or 0)
    t16, t32 = views.value("tensor_active_pct", bf16), views.value("tensor_active_pct", fp32)
    assert t16 is not None and t32 is not None and t16 > 5 * t32 and t16 > 20
    c = compare([bf16, fp32], ["bf16", "fp32"])
    (row,) = [x for x in c.rows if x.key == "tensor_active_pct"]
    assert row.measured == [True, True] and row.delta_abs[1] is not None and row.delta_abs[1] < -20


def test_per_step_means_match_sql_over_each_step() -> None:
    folder = unpacked(METRICS / "bf16")
    db = folder / "metrics_bf16.sqlite"
    (r,) = analyze_paths([folder]).ranks
    assert r.gpu_metrics is not None and r.steps is not None
    steps = r.gpu_metrics.steps
    assert len(steps) == r.steps.count == 2
    assert [s.end_ns - s.start_ns for s in steps] == sorted(r.steps.durations_ns) or [
        s.end_ns - s.start_ns for s in steps
    ] == r.steps.durations_ns
    for s in steps:
        # [start, end): the step's samples
        (n,) = sql(
            db,
            "SELECT count(DISTINCT timestamp) FROM GPU_METRICS WHERE timestamp >= ?"
            " AND timestamp < ? AND typeId = (SELECT min(typeId) + 0 FROM GPU_METRICS g"
            " JOIN TARGET_INFO_GPU_METRICS m USING (typeId, metricId)"
            " WHERE g.typeId - m.sourceId = 0)",
            s.start_ns,
            s.end_ns,
        )[0]
        assert s.samples == n
        want = sql_mean(db, 0, "Tensor Active [Throughput %]", s.start_ns, s.end_ns - 1)
        assert want is not None and abs(s.means["tensor_active_pct"] - want) < 1.0


def test_the_lane_covers_the_step_view_window() -> None:
    (r,) = analyze_paths([unpacked(METRICS / "bf16")]).ranks
    assert r.gpu_metrics is not None and r.step_view is not None
    lane = r.gpu_metrics.lane
    assert lane is not None and lane.start_ns == r.step_view.start_ns
    sm = lane.series["sm_active_pct"]
    assert len(sm) == gpu_metrics.LANE_BUCKETS
    assert all(v is not None and 0 <= v <= 100 for v in sm)
    # the lane's buckets average to the window's mean (equal buckets, ~equal samples each)
    mean = float(np.mean([v for v in sm if v is not None]))
    steps = {s.start_ns: s for s in r.gpu_metrics.steps}
    assert abs(mean - steps[r.step_view.start_ns].means["sm_active_pct"]) < 2.0


def test_one_sampler_gives_both_ddp_ranks_their_gpu() -> None:
    """Only rank 0's nsys sampled (README); rank 1's GPU (device 1) is found in rank 0's report
    by its UUID and read in rank 1's clock (the reports' session starts differ by 497 ms)."""
    folder = unpacked(METRICS / "ddp")
    r0db, r1db = folder / "metrics_ddp.rank0.sqlite", folder / "metrics_ddp.rank1.sqlite"
    m = analyze_paths([folder])
    by_rank = {r.rank: r for r in m.ranks}
    g0, g1 = by_rank[0].gpu_metrics, by_rank[1].gpu_metrics
    assert g0 is not None and g1 is not None
    assert (g0.device, g1.device) == (0, 1) and g0.uuid != g1.uuid
    assert g0.sampler == g1.sampler == r0db.name
    assert "UUID" in g1.attribution
    shift = session_start(r1db) - session_start(r0db)
    r1 = by_rank[1]
    for key, names in NAMES.items():
        want = sum(
            sql_mean(r0db, 1, n, r1.span_start_ns + shift, r1.span_end_ns + shift) or 0
            for n in names
        )
        got = g1.value(key)
        assert got is not None and abs(got - want) < 1.0, (key, got, want)
    # rank 1's window opened 497 ms before the sampler's: part of it has no samples
    assert 20 < g1.covered_pct < 60
    assert g0.covered_pct > 99
    assert all((g.value("nvlink_tx_pct") or 0) > 1 for g in (g0, g1))  # the all-reduce


def test_the_page_reader_reads_what_sqlite_holds() -> None:
    """`read` through the page reader against SQL: per GPU and metric, the count and the sum
    of the samples inside the capture window."""
    db = export(METRICS / "fp32" / "metrics_fp32.sqlite.xz")
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn, conn:
        got = gpu_metrics.read(db, conn)
    (end,) = sql(db, "SELECT duration FROM ANALYSIS_DETAILS")[0]
    ref = sql(
        db,
        "SELECT g.typeId - m.sourceId, m.metricName, count(*), sum(g.value) FROM GPU_METRICS g"
        " JOIN TARGET_INFO_GPU_METRICS m USING (typeId, metricId)"
        " WHERE g.timestamp BETWEEN 0 AND ? GROUP BY 1, 2",
        end,
    )
    mult = N.multipliers(
        sql(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'GpuMetricsConfig'")[0][0]
    )
    assert sorted(got.gpus) == [0, 1] and len(ref) == 60
    for gpu, name, n, total in ref:
        g = got.gpus[gpu]
        col = g.values[:, g.names.index(name)]
        assert int(np.count_nonzero(~np.isnan(col))) == n
        assert float(np.nansum(col)) == pytest.approx(total * mult.get(name, 1.0), rel=1e-12)
    assert got.uuids[0] != got.uuids[1]


def _doctored(tmp_path: Path, statements: list[str]) -> Path:
    db = tmp_path / "doctored.sqlite"
    shutil.copyfile(export(METRICS / "bf16" / "metrics_bf16.sqlite.xz"), db)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for s in statements:
            conn.execute(s)
    return db


def test_samples_outside_the_capture_window_and_unknown_types_are_left_out(tmp_path: Path) -> None:
    db = _doctored(
        tmp_path,
        [
            # before the capture, after it, and of a type no name row describes
            "INSERT INTO GPU_METRICS VALUES (-5000, (SELECT min(typeId) FROM GPU_METRICS), 3, 99)",
            "INSERT INTO GPU_METRICS SELECT duration + 10, (SELECT min(typeId) FROM GPU_METRICS),"
            " 3, 99 FROM ANALYSIS_DETAILS",
            "INSERT INTO GPU_METRICS VALUES (1000, 12345, 3, 99)",
        ],
    )
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        got = gpu_metrics.read(db, conn)
    (end,) = sql(db, "SELECT duration FROM ANALYSIS_DETAILS")[0]
    for g in got.gpus.values():
        assert g.times.min() >= 0 and g.times.max() <= end
    assert any("12345" in n for n in got.notes)


def test_names_are_read_by_meaning_and_unknown_metrics_stay(tmp_path: Path) -> None:
    """A GH200-like set: PCIe renamed to C2C, an unknown metric, ids shuffled (names, never
    ids or positions)."""
    db = _doctored(
        tmp_path,
        [
            "UPDATE TARGET_INFO_GPU_METRICS SET metricName = 'NVLink-C2C RX Throughput"
            " [Throughput %]' WHERE metricName = 'PCIe RX Throughput [Throughput %]'",
            "UPDATE TARGET_INFO_GPU_METRICS SET metricName = 'Frobnicator Load [Throughput %]'"
            " WHERE metricName = 'PCIe TX Throughput [Throughput %]'",
            # swap the ids of SMs Active and Tensor Active in both tables
            "UPDATE TARGET_INFO_GPU_METRICS SET metricId = 1000 + metricId WHERE metricId IN"
            " (3, 5)",
            "UPDATE TARGET_INFO_GPU_METRICS SET metricId = CASE metricId WHEN 1003 THEN 5"
            " ELSE 3 END WHERE metricId >= 1000",
            "UPDATE GPU_METRICS SET metricId = CASE metricId WHEN 3 THEN 5 ELSE 3 END"
            " WHERE metricId IN (3, 5)",
        ],
    )
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.move(db, folder / db.name)
    (r,) = analyze_paths([folder]).ranks
    ref = analyze_paths([unpacked(METRICS / "bf16")]).ranks[0].gpu_metrics
    g = r.gpu_metrics
    assert g is not None and ref is not None
    assert g.value("sm_active_pct") == pytest.approx(ref.value("sm_active_pct"))
    assert g.value("tensor_active_pct") == pytest.approx(ref.value("tensor_active_pct"))
    assert g.value("c2c_rx_pct") == pytest.approx(ref.value("pcie_rx_pct"))
    assert g.value("pcie_rx_pct") is None and g.value("pcie_tx_pct") is None
    (unknown,) = [x for x in g.metrics if x.name.startswith("Frobnicator")]
    assert unknown.key is None and unknown.unit == "%"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("SMs Active [Throughput %]", "sm_active_pct"),
        ("SM Active", "sm_active_pct"),  # 2022.4's sets: no bracket
        ("Tensor Active [Throughput %]", "tensor_active_pct"),
        ("DRAM Read Throughput", "dram_read_pct"),
        ("DRAM Write Bandwidth [Throughput %]", "dram_write_pct"),
        ("PCIe TX Throughput [Throughput %]", "pcie_tx_pct"),
        ("C2C Read Throughput [GB/s]", "c2c_rx_gb_s"),
        ("NVLink-C2C TX Throughput [Throughput %]", "c2c_tx_pct"),
        ("GPC Clock Frequency [MHz]", "gpc_clock_mhz"),
        ("NVLink RX Responses User Data [Throughput %]", "nvlink_rx_pct"),
        ("NVLink RX Responses Protocol Data [Throughput %]", None),
        ("Compute Warps in Flight [Avg]", None),
        ("Compute Warps in Flight [Throughput %]", None),
        ("GPC Clock Frequency [Throughput %]", None),
    ],
)
def test_known_spellings(name: str, key: str | None) -> None:
    assert N.key_of(name) == key


def test_multipliers_come_from_the_config() -> None:
    cfg = (
        "version: 3\nmetricSets:\n  - name: x\n    metrics:\n      - name: GPC Clock Frequency\n"
        "        subMetrics:\n          - name: MHz\n            multiplier: 1.0e-06\n"
        "      - name: SM Active\n        subMetrics:\n          - name: Throughput %\n"
    )
    assert N.multipliers(cfg) == {"GPC Clock Frequency [MHz]": 1e-6}
    old = "metricSets:\n- metrics:\n  - name: GPC Clock Frequency\n    id: gpc__x.avg.per_second\n"
    assert N.multipliers(old) == {"GPC Clock Frequency": 1e-6}
    assert N.multipliers("{not yaml") == {} and N.multipliers(None) == {}


def test_a_run_without_samples_reads_not_measured() -> None:
    m = analyze_paths([DATA / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"])
    assert all(r.gpu_metrics is None for r in m.ranks)
    for key in ("sm_active_pct", "tensor_active_pct", "gpc_clock_mhz"):
        assert views.value(key, m) is None
        assert key not in views.campaign_values(m)
    bf16 = analyze_paths([unpacked(METRICS / "bf16")])
    c = compare([m, bf16], ["none", "bf16"])
    (row,) = [x for x in c.rows if x.key == "tensor_active_pct"]
    assert row.measured == [False, True] and row.values[0] is None

    # the per-entry tables show the group only where an entry was sampled
    def shown(ranks: Any) -> list[str]:
        return [r.label for g, rows in views.rows("analyze", ranks) for r in rows if "nsys" in g]

    assert shown(m.ranks) == []
    assert "tensor cores active" in shown(bf16.ranks) and "NVLink-C2C receive" not in shown(
        bf16.ranks
    )


def test_the_report_draws_the_lane_and_the_verdict_line_only_where_sampled() -> None:
    from orchestrator.analysis.presentation.report import svg_step_view
    from orchestrator.analysis.presentation.verdict import verdict

    bf16 = analyze_paths([unpacked(METRICS / "bf16")])
    (r,) = bf16.ranks
    assert r.step_view is not None and r.gpu_metrics is not None
    svg = str(svg_step_view(r.step_view, "t", r.gpu_metrics.lane))
    assert "tensor cores active: mean" in svg and "SMs active: mean" in svg
    assert "NVLink-C2C" not in svg  # a set without C2C draws no C2C strip
    assert str(svg_step_view(r.step_view, "t")).count("nsys GPU metrics") == 0
    v = verdict(bf16, [])
    assert v.sm is not None and "SMs active 89 %" in v.sm and "tensor cores 36 %" in v.sm
    none = analyze_paths([DATA / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"])
    assert verdict(none, []).sm is None
