"""HTA's kernel types, comm/comp overlap and idle-time breakdown, and the cross-rank view: on
traces whose numbers are known by construction (Kineto and nsys stand-ins, see
tests/fixtures), and against HTA itself on synthetic multi-rank traces HTA can read."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis import advise, analyze_paths
from orchestrator.analysis.metrics import Metrics, RankMetrics
from tests.budget import examples
from tests.fixtures.kineto_builder import KinetoBuilder, write_ddp
from tests.fixtures.nsys_builder import NsysBuilder

pytestmark = pytest.mark.filterwarnings("ignore::Warning")  # pandas deprecations inside HTA

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
# (kind, name, start, end, stream, launch) in microseconds: compute A, B, C, D on stream 7, an
# all-reduce on stream 20, a copy; built so that
#   computation  = [100,200) [250,300) [305,400) [460,500)          = 285
#   communication = [150,350)                                        = 200
#   memory        = [400,420)                                        =  20
#   comp & comm   = [150,200) [250,300) [305,350)                    = 145
# and on stream 7: B waits for its launch (260 > A's end 200: host wait 50), C follows after 5
# (kernel wait, < 30 us), the copy touches C (0), D starts 40 after the copy although launched
# long before (other, 40).
EVENTS = [
    ("kernel", GEMM, 100, 200, 7, 90),
    ("kernel", GEMM, 250, 300, 7, 260),
    ("kernel", GEMM, 305, 400, 7, 240),
    ("kernel", NCCL, 150, 350, 20, 140),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 400, 420, 7, 300),
    ("kernel", GEMM, 460, 500, 7, 300),
]
TYPES = {  # largest first
    "COMPUTATION overlapping COMMUNICATION": 145,
    "COMPUTATION": 140,
    "COMMUNICATION": 55,
    "MEMORY": 20,
}


def kineto_trace(path: Path, rank: int = 0) -> Path:
    b = KinetoBuilder(rank=rank)
    for cat, name, s, e, stream, launch in EVENTS:
        b.gpu(cat, name, s, e - s, stream=stream, launch_ts=launch, bytes=4096)
    return b.write(path)


def nsys_export(path: Path) -> Path:
    """The same events in nanoseconds (x1000), each launched by a runtime call."""
    b = NsysBuilder(path)
    b.add_gpu(0)
    for cat, name, s, e, stream, launch in EVENTS:
        if cat == "kernel":
            b.add_kernel(s * 1000, e * 1000, name, stream=stream, launch=launch * 1000)
        else:
            b.add_memcpy(s * 1000, e * 1000, 2, 4096, stream=stream, launch=launch * 1000)
    return b.close()


def check_by_construction(r: RankMetrics) -> None:
    assert r.kernel_types_ns == {k: v * 1000 for k, v in TYPES.items()}
    assert list(r.kernel_types) == list(TYPES)  # largest first
    assert r.kernel_types["COMPUTATION"] == pytest.approx(100 * 140 / 360)
    assert r.comm_comp_overlap_pct == pytest.approx(100 * 145 / 200)
    ib = r.idle_breakdown
    assert ib is not None
    assert (ib.host_wait_ns, ib.kernel_wait_ns, ib.other_ns) == (50_000, 5_000, 40_000)
    assert ib.host_wait_pct == pytest.approx(100 * 50 / 95)
    assert [(s.stream, s.host_wait_ns) for s in ib.streams] == [(7, 50_000), (20, 0)]


def test_kernel_types_overlap_and_idle_breakdown_by_construction(tmp_path: Path) -> None:
    check_by_construction(analyze_paths([kineto_trace(tmp_path / "k.json")]).ranks[0])
    check_by_construction(analyze_paths([nsys_export(tmp_path / "n.sqlite")]).ranks[0])


def test_no_communication_means_no_overlap(tmp_path: Path) -> None:
    b = KinetoBuilder(rank=0)
    b.gpu("kernel", GEMM, 10, 20)
    r = analyze_paths([b.write(tmp_path / "k.json")]).ranks[0]
    assert r.comm_comp_overlap_pct is None and r.kernel_types == {"COMPUTATION": 100.0}
    assert not [a for a in advise(analyze_paths([tmp_path / "k.json"])) if a.rule == "low-overlap"]


def test_low_overlap_advice(tmp_path: Path) -> None:
    m = analyze_paths([kineto_trace(tmp_path / "k.json")])
    assert not [a for a in advise(m) if a.rule == "low-overlap"]  # 72.5 % overlapped
    b = KinetoBuilder(rank=0)
    b.gpu("kernel", GEMM, 0, 100)
    b.gpu("kernel", NCCL, 90, 110, stream=20)  # [90, 200): 10 of 110 us overlapped
    m = analyze_paths([b.write(tmp_path / "low.json")])
    (a,) = [a for a in advise(m) if a.rule == "low-overlap"]
    assert a.evidence["comm_comp_overlap_pct"] == pytest.approx(100 * 10 / 110)
    assert "overlap_grad_sync" in a.knob


# ---- HTA itself ------------------------------------------------------------------------------
def hta(files: dict[int, Path]) -> dict[str, Any]:
    """HTA's temporal, kernel-type, overlap and idle-time breakdowns of the traces."""
    mod = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis not installed")
    logging.disable(logging.WARNING)
    try:
        ta = mod.TraceAnalysis(
            trace_files={k: str(v.resolve()) for k, v in files.items()},
            trace_dir=str(next(iter(files.values())).resolve().parent),
        )
        temporal = ta.get_temporal_breakdown(visualize=False)
        types, _ = ta.get_gpu_kernel_breakdown(visualize=False)
        overlap = ta.get_comm_comp_overlap(visualize=False)
        idle, _ = ta.get_idle_time_breakdown(ranks=sorted(files), visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    return {
        "temporal": {int(r["rank"]): r for _, r in temporal.iterrows()},
        "types": {str(r["kernel_type"]): float(r["percentage"]) for _, r in types.iterrows()},
        "overlap": {
            int(r["rank"]): float(r["comp_comm_overlap_pctg"]) for _, r in overlap.iterrows()
        },
        "idle": idle,
    }


def assert_like_hta(m: Metrics, h: dict[str, Any]) -> None:
    """Within 0.5 percentage points: temporal per rank, kernel types over all ranks, overlap
    per rank; idle time per rank, stream and cause within 0.5 % of the rank's idle time."""
    for r in m.ranks:
        t = h["temporal"][r.rank]
        assert abs(r.temporal.idle_pct - t["idle_time_pctg"]) <= 0.5, r.rank
        assert abs(r.temporal.compute_pct - t["compute_time_pctg"]) <= 0.5, r.rank
        assert abs(r.temporal.non_compute_pct - t["non_compute_time_pctg"]) <= 0.5, r.rank
        if r.comm_comp_overlap_pct is not None:
            assert abs(r.comm_comp_overlap_pct - h["overlap"][r.rank]) <= 0.5, r.rank
        ib = r.idle_breakdown
        assert ib is not None
        rows = h["idle"][h["idle"]["rank"] == r.rank]
        whole = float(rows["idle_time"].sum())
        for s in ib.streams:
            for cat, ns in (("host_wait", s.host_wait_ns), ("kernel_wait", s.kernel_wait_ns),
                            ("other", s.other_ns)):  # fmt: skip
                got = rows[(rows["stream"] == s.stream) & (rows["idle_category"] == cat)]
                want = float(got["idle_time"].sum()) if len(got) else 0.0
                assert abs(ns / 1000 - want) <= 0.005 * whole, (r.rank, s.stream, cat)
    ours = m.aggregate.kernel_types
    for name in set(ours) | set(h["types"]):
        assert abs(ours.get(name, 0.0) - h["types"].get(name, 0.0)) <= 0.5, name


def test_by_construction_trace_against_hta(tmp_path: Path) -> None:
    f = kineto_trace(tmp_path / "rank0.json")
    m = analyze_paths([f])
    h = hta({0: f})
    assert_like_hta(m, h)
    assert h["types"]["COMPUTATION overlapping COMMUNICATION"] == pytest.approx(40.3)  # 145/360


@pytest.mark.parametrize(
    ("world", "straggler", "layout"), [(2, 1, "kineto"), (4, None, "kineto"), (3, 2, "json")]
)
def test_synthetic_ddp_ranks_against_hta(
    tmp_path: Path, world: int, straggler: int | None, layout: str
) -> None:
    """Data-parallel stand-ins (NCCL buckets overlapping backward, fractional microseconds,
    ProfilerSteps: HTA drops the last step): gh-run matches HTA on every breakdown."""
    paths = write_ddp(tmp_path, world, 4, 60, seed=world, straggler=straggler, straggle_us=400)
    if layout == "json":  # the same events through json.dumps: gh-run's generic parser
        for p in paths:
            doc = __import__("orjson").loads(p.read_bytes())
            p.write_text(__import__("json").dumps(doc))
    m = analyze_paths(paths)
    assert [r.rank for r in m.ranks] == list(range(world))
    assert all("last ProfilerStep" in r.temporal.basis for r in m.ranks)
    assert_like_hta(m, hta(dict(enumerate(paths))))


# ---- the cross-rank view ---------------------------------------------------------------------
@pytest.mark.parametrize(("world", "straggler"), [(2, 1), (6, 4)])
def test_straggler_is_named_with_its_evidence(tmp_path: Path, world: int, straggler: int) -> None:
    paths = write_ddp(tmp_path, world, 5, 80, seed=7, straggler=straggler, straggle_us=600)
    m = analyze_paths(paths)
    s = m.cross_rank.straggler
    assert s is not None and s.rank == straggler and s.rule == "starts collectives last"
    assert s.evidence["late_in_pct_of_collectives"] == 100.0
    # it reaches each step's first collective ~600 us late (+- the jitter of every rank),
    # the later ones of the step less late (they queue behind the first on the NCCL stream)
    sk = m.cross_rank.collective_start_skew
    assert sk is not None and sk.matched == 5 * 5 and sk.latest_rank == f"rank {straggler}"
    assert 560_000 <= sk.max_ns <= 680_000  # plus the ranks' own kernel gaps
    assert s.evidence["median_late_us"] >= 50
    assert s.evidence["collective_us_on_others"] > s.evidence["collective_us_on_straggler"]
    (a,) = [a for a in advise(m) if a.rule == "straggler"]
    assert a.rank == straggler and f"rank {straggler}" in a.message


def test_no_straggler_without_one(tmp_path: Path) -> None:
    m = analyze_paths(write_ddp(tmp_path, 4, 5, 80, seed=3))
    assert m.cross_rank.straggler is None
    sk = m.cross_rank.collective_start_skew
    # only each rank's jitter (0-20 us at the step start, random gaps between its kernels)
    assert sk is not None and sk.max_ns < 100_000 and sk.latest_share_pct < 60
    assert not [a for a in advise(m) if a.rule == "straggler"]


def test_step_time_straggler_without_collectives(tmp_path: Path) -> None:
    paths = []
    for rank, step_us in ((0, 100), (1, 100), (2, 130)):
        b = KinetoBuilder(rank=rank)
        for i in range(4):
            t = 1000 + i * 200
            b.cpu("user_annotation", f"ProfilerStep#{i + 1}", t, step_us)
            b.gpu("kernel", GEMM, t + 5, step_us - 10)
        paths.append(b.write(tmp_path / f"r{rank}.json"))
    m = analyze_paths(paths)
    s = m.cross_rank.straggler
    assert s is not None and (s.rank, s.rule) == (2, "slowest steps")
    assert s.evidence["slower_pct"] == pytest.approx(30.0)
    sk = m.cross_rank.step_time_skew
    assert sk is not None and sk.matched == 4 and sk.median_ns == 30_000


def test_spreads_name_the_worst_rank(tmp_path: Path) -> None:
    paths = write_ddp(tmp_path, 3, 4, 60, seed=5, straggler=0, straggle_us=800)
    m = analyze_paths(paths)
    by = {s.metric: s for s in m.cross_rank.metrics}
    idle = by["GPU idle"]
    assert idle.min <= idle.median <= idle.max and idle.worse == "higher"
    assert idle.worst_rank == idle.max_rank
    # the straggler's partners wait inside the collectives: least overlap elsewhere
    assert by["comm/comp overlap"].worst_rank != "rank 0"


# ---- nsys: several processes in one report ---------------------------------------------------
def test_two_processes_in_one_nsys_report_are_two_ranks(tmp_path: Path) -> None:
    b = NsysBuilder(tmp_path / "node.sqlite", pid=500)
    b.add_env({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"})
    for pid, dev in ((600, 1), (500, 0)):  # the process on device 0 is rank 2, device 1 rank 3
        b.add_cuda_stream(7, pid=pid)
        b.add_thread(pid, "pt_main_thread", pid=pid)
        for i in range(3):
            t = 1_000_000 * i + 10_000 * dev
            b.add_kernel(t, t + 400_000, GEMM, device=dev, pid=pid, launch=t - 5_000)
            b.add_kernel(t + 400_000, t + 500_000, NCCL, device=dev, stream=20, pid=pid)
        b.add_nvtx(0, 3_000_000, f"region of {pid}", tid=pid, pid=pid)
    b.add_thread(777, "loader", pid=777)
    b.add_osrt(0, 10, "pthread_cond_wait", tid=777, pid=777)
    m = analyze_paths([b.close()])
    assert [(r.rank, r.devices, r.pid) for r in m.ranks] == [(2, [0], 500), (3, [1], 600)]
    src = m.sources[0]
    assert src.ranks == [2, 3] and "SLURM_PROCID in the profiled environment" in src.rank_rule
    r2, r3 = m.ranks
    assert r2.activity.kernel_count == r3.activity.kernel_count == 6
    assert [x.name for x in r2.nvtx] == ["region of 500"]
    assert [x.name for x in r3.nvtx] == ["region of 600"]
    assert "loader" in {t.name for t in r2.threads}  # a process without GPU work: first rank
    assert r2.comm_comp_overlap_pct == 0.0
    sk = m.cross_rank.collective_start_skew
    assert sk is not None and sk.matched == 3 and sk.median_ns == 10_000


# ---- the sweeps against brute force ------------------------------------------------------------
def _view(events: list[tuple[int, int, int]]) -> Any:
    import numpy as np

    from orchestrator.analysis.families.breakdown import HtaView

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


@given(
    st.lists(
        st.tuples(st.integers(0, 300), st.integers(0, 40), st.sampled_from([0, 1, 2, 3])),
        min_size=1,
        max_size=40,
    )
)
@settings(max_examples=examples(200), deadline=None)
def test_kernel_types_and_overlap_equal_a_per_nanosecond_count(
    raw: list[tuple[int, int, int]],
) -> None:
    from orchestrator.analysis.families import breakdown, communication

    events = [(s, s + d, c) for s, d, c in raw]
    v = _view(events)
    names = {2: "COMPUTATION", 0: "COMMUNICATION", 1: "MEMORY"}
    want: dict[str, int] = {}
    comm = both = 0
    for t in range(0, 341):
        running = {c for s, e, c in events if s <= t < e and c in names}
        if running:
            key = " overlapping ".join(
                names[c] for c in (2, 0, 1) if c in running
            )  # HTA's order: COMPUTATION, COMMUNICATION, MEMORY
            want[key] = want.get(key, 0) + 1
        comm += 0 in running
        both += {0, 2} <= running
    assert breakdown.kernel_types(v) == dict(sorted(want.items(), key=lambda kv: -kv[1]))
    got = communication.comm_comp_overlap_pct(v)
    assert got == (pytest.approx(100 * both / comm) if comm else None)


DDP_H200 = Path(__file__).resolve().parents[1] / "data" / "ddp_h200"


@pytest.mark.parametrize("run", ["kineto", "kineto_straggler"])
def test_real_two_gpu_ddp_traces_against_hta(run: str) -> None:
    """The real DDP traces of two H200s (tests/data/ddp_h200): every breakdown as HTA's."""
    files = {r: DDP_H200 / run / f"sft_rank{r}.pt.trace.json.gz" for r in (0, 1)}
    if not all(f.exists() for f in files.values()):
        pytest.skip("tests/data/ddp_h200 absent")
    m = analyze_paths(list(files.values()))
    assert [r.rank for r in m.ranks] == [0, 1]
    assert all(r.comm_comp_overlap_pct is not None for r in m.ranks)
    assert_like_hta(m, hta(files))


def test_advice_on_the_real_straggler_points_at_it() -> None:
    """Rank 0 of the real straggler run has low overlap only because it waits for rank 1 inside
    the all-reduces: the advice says so and names the straggler first; the normal run names
    no straggler and no rank waits for one."""
    slow = advise(analyze_paths([DDP_H200 / "kineto_straggler"]))
    (strag,) = [a for a in slow if a.rule == "straggler"]
    assert strag.rank == 1 and strag.evidence["late_in_pct_of_collectives"] > 90
    (low,) = [a for a in slow if a.rule == "low-overlap"]
    assert low.rank == 0 and low.evidence["straggler_rank"] == 1
    assert "waiting for rank 1" in low.message and low.knob.startswith("fix the straggler")
    normal = advise(analyze_paths([DDP_H200 / "kineto"]))
    assert not [a for a in normal if a.rule == "straggler" or "straggler_rank" in a.evidence]
