"""Inputs the analysis must bound, read fully or refuse (issue 15, classes 1 and 6), and the rank
rules (issue 14): huge and compressed traces, PyTorch <= 1.9 categories, sub-microsecond events,
SQLite files that are not nsys exports, text in numeric columns, where spec.lock.yaml may come
from, and which file names say a rank."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.readers import kineto, tracetext
from orchestrator.analysis.timeline import ranks
from orchestrator.core.errors import UserError
from tests.fixtures.kineto_builder import KinetoBuilder, training_trace, write_kineto_stream
from tests.fixtures.nsys_builder import NsysBuilder

pytestmark = pytest.mark.filterwarnings("ignore::Warning")  # pandas deprecations inside HTA
ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "nsys"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.analysis", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


# ---- class 1: bounded reads ------------------------------------------------------------------
def _gz_bomb(path: Path, mib: int) -> Path:
    """A small .json.gz whose text grows to `mib` MiB: a trace head, then spaces."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    with path.open("wb") as fh:
        fh.write(comp.compress(b'{"traceEvents": [\n'))
        block = b" " * (1 << 20)
        for _ in range(mib):
            fh.write(comp.compress(block))
        fh.write(comp.compress(b"]}"))
        fh.write(comp.flush())
    return path


def test_a_compressed_trace_beyond_the_ceiling_is_refused_in_one_line(tmp_path: Path) -> None:
    bomb = _gz_bomb(tmp_path / "bomb.pt.trace.json.gz", 300)
    assert bomb.stat().st_size < 1 << 20  # 300 MiB of text in under 1 MiB
    r = _cli("analyze", str(bomb), "--max-trace-size", "64MiB")
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "bomb.pt.trace.json.gz" in line and "64 MiB ceiling" in line
    assert "--max-trace-size" in line and "Traceback" not in r.stderr
    # the same ceiling from the environment; and a bad size is one line too
    env = {**__import__("os").environ, "GH_RUN_MAX_TRACE_SIZE": "64M"}
    assert _cli("analyze", str(bomb), env=env).returncode == 2
    bad = _cli("analyze", str(bomb), "--max-trace-size", "lots")
    assert bad.returncode == 2 and "--max-trace-size: 'lots' is not a size" in bad.stderr


def test_memory_follows_events_not_bytes(tmp_path: Path) -> None:
    """256 MiB of text (white space between a few events, gzipped to ~0.25 MiB) is read in
    bounded memory: the reader never holds the text, only the events' columns (its peak was
    87 MiB here, the same as for 512 MiB of text)."""
    b = training_trace(rank=0, steps=2)
    path = tmp_path / "padded.pt.trace.json.gz"
    meta = b.meta()
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    with path.open("wb") as fh:
        text = json.dumps({**meta, "traceEvents": []})
        head, tail = text.split('"traceEvents": []')
        fh.write(comp.compress((head + '"traceEvents": [').encode()))
        events = [json.dumps(e) for e in b.events]
        half = len(events) // 2
        fh.write(comp.compress(",\n".join(events[:half]).encode() + b","))
        pad = b" " * (1 << 20)
        for _ in range(256):
            fh.write(comp.compress(pad))
        fh.write(comp.compress(",\n".join(events[half:]).encode() + b"]" + tail.encode()))
        fh.write(comp.flush())
    # The peak is the probe's own address space (VmHWM), not ru_maxrss: Linux carries the
    # parent's resident size across fork and exec into ru_maxrss, so a pytest process that has
    # grown to 500 MiB by the end of the suite would be blamed on the reader.
    probe = (
        "import sys; from pathlib import Path;"
        "from orchestrator.analysis import analyze_paths;"
        "m = analyze_paths([Path(sys.argv[1])]);"
        "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'));"
        "print(m.ranks[0].activity.kernel_count, int(hwm.split()[1]) // 1024)"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    kernels, rss_mib = map(int, r.stdout.split())
    whole = analyze_paths([b.write(tmp_path / "plain.json")]).ranks[0].activity.kernel_count
    assert kernels == whole > 0
    assert rss_mib < 200  # the text alone is 256 MiB; the interpreter with numpy ~90 MiB


def test_parse_size() -> None:
    assert tracetext.parse_size("8GiB", "x") == 8 << 30
    assert tracetext.parse_size("512m", "x") == 512 << 20
    assert tracetext.parse_size("1.5G", "x") == 3 << 29
    assert tracetext.parse_size("1000", "x") == 1000
    with pytest.raises(UserError, match="not a size"):
        tracetext.parse_size("8 parsecs", "x")


@pytest.mark.parametrize("layout", ["kineto", "json"])
def test_batches_of_a_large_trace_equal_the_whole(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny chunks and batches (so every event boundary lands somewhere awkward) give the same
    columns as reading the text at once."""
    b = training_trace(rank=1, steps=6)
    f = b.write(tmp_path / "t.json", layout=layout)
    whole = kineto.load_trace(f)
    monkeypatch.setattr(tracetext, "CHUNK_BYTES", 997)
    monkeypatch.setattr(tracetext, "GENERIC_BATCH_BYTES", 1531)
    small = kineto.load_trace(f)
    assert small.columns() == whole.columns() and small.thread_names == whole.thread_names
    assert small.meta == whole.meta and small.peak == whole.peak


def test_escaped_quotes_and_odd_spacing_in_the_generic_splitter(tmp_path: Path) -> None:
    doc = {
        "distributedInfo": {"rank": 3},
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": 'k"{[}]\\', "pid": 0, "tid": 7, "ts": 1.5,
             "dur": 2, "args": {"stream": 7, "device": 0, "correlation": 1}},
            {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
             "args": {"stream": 7, "device": 0}},
        ],
        "after": ["]", "}", {"x": "traceEvents"}],
    }  # fmt: skip
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(doc, indent=3))
    t = kineto.load_trace(p)
    assert t.names[t.name[0]] == 'k"{[}]\\' and kineto.trace_rank(t) == 3
    assert t.meta["after"] == ["]", "}", {"x": "traceEvents"}]
    q = tmp_path / "array.json"  # the Chrome format's bare array
    q.write_text(json.dumps(doc["traceEvents"]))
    assert kineto.load_trace(q).cat.size == 2


# ---- class 6: odd but legal traces -----------------------------------------------------------
def test_pytorch_1_9_categories_are_read_fully(tmp_path: Path) -> None:
    new = analyze_paths([training_trace(rank=0).write(tmp_path / "new.json")]).ranks[0]
    old_b = training_trace(rank=0)
    for ev in old_b.events:  # PyTorch <= 1.9 names
        cat = ev.get("cat")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cpu_op"):
            ev["cat"] = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset",
                         "cuda_runtime": "Runtime", "cpu_op": "Operator"}[cat]  # fmt: skip
        elif cat == "user_annotation" and ev["name"].startswith("ProfilerStep"):
            ev["cat"] = "Operator"
    old = analyze_paths([old_b.write(tmp_path / "old.json")]).ranks[0]
    assert old.activity == new.activity and old.activity.kernel_count > 0
    assert old.copies == new.copies and old.top_kernels == new.top_kernels
    assert old.sync == new.sync and old.idle_gaps == new.idle_gaps
    assert old.steps is not None and old.steps == new.steps
    assert old.temporal == new.temporal and old.kernel_types == new.kernel_types
    assert {t.name: t.cpu_op_ns for t in old.threads} == {t.name: t.cpu_op_ns for t in new.threads}


def test_sub_microsecond_events_never_give_shares_outside_0_to_100(tmp_path: Path) -> None:
    """Events shorter than 1 us inside one microsecond: HTA's rounding (start up, end down)
    turns them inside out. gh-run counts them as empty, says how many, and keeps every share
    inside 0-100 % (its former copy of HTA's rule said -100 % idle, 200 % compute; HTA itself
    stops on an assertion)."""
    b = KinetoBuilder(rank=0)
    for i in range(50):
        b.gpu("kernel", "void tiny_kernel<float>", 1000 + 10 * i + 0.1, 0.5)
    r = analyze_paths([b.write(tmp_path / "rank0.json")]).ranks[0]
    t = r.temporal
    assert t.clamped_events == 50
    for v in (t.idle_pct, t.compute_pct, t.non_compute_pct):
        assert 0.0 <= v <= 100.0
    assert any("50 GPU events shorter than 1 µs" in n for n in r.notes)
    assert 0 <= r.idle_pct <= 100 and r.busy_ns == 50 * 500
    hta = pytest.importorskip("hta.trace_analysis")
    ta = hta.TraceAnalysis(trace_files={0: str(tmp_path / "rank0.json")}, trace_dir=str(tmp_path))
    with pytest.raises(AssertionError):  # HTA's own check: non_compute_time >= 0
        ta.get_temporal_breakdown(visualize=False)


@pytest.mark.parametrize("kind", ["zero-byte", "other sqlite", "state store"])
def test_a_sqlite_file_that_is_not_an_nsys_export_is_refused(tmp_path: Path, kind: str) -> None:
    p = tmp_path / "trace.sqlite"
    if kind == "zero-byte":
        p.write_bytes(b"")
    else:
        db = sqlite3.connect(p)
        db.execute("CREATE TABLE runs (run_id TEXT, state TEXT)" if kind == "state store"
                   else "CREATE TABLE t (x INTEGER)")  # fmt: skip
        db.commit()
        db.close()
    with pytest.raises(UserError, match="not an nsys export"):
        analyze_paths([p])
    r = _cli("analyze", str(p))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_run_whose_trace_is_not_an_export_stores_no_metrics(
    gh_home: Path, tmp_path: Path
) -> None:
    from orchestrator.cli.analysis import register
    from orchestrator.store.db import Store
    from tests.unit.test_store_artifacts import make_run

    run_dir = tmp_path / "run"
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "artifacts" / "sft.0.sqlite").write_bytes(b"")
    Store(gh_home).add_run(make_run(run_dir, run_id="r-88"))
    import typer

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["analyze", "r-88"])
    assert isinstance(res.exception, UserError) and res.exception.exit_code == 2
    assert "not an nsys export" in str(res.exception)
    assert Store(gh_home).metrics("r-88") == {}


def test_text_in_numeric_nsys_columns_is_left_out_not_an_error(tmp_path: Path) -> None:
    b = NsysBuilder(tmp_path / "odd.sqlite")
    for i in range(6):
        b.add_kernel(1000 * i, 1000 * i + 500, "k", launch=1000 * i - 10)
    b.add_memcpy(7000, 7100, 1, 64)
    b.add_nvtx(0, 9000, "step_1", tid=1)
    b.add_nvtx(0, 9000, "step_2", tid=1)
    b.add_osrt(0, 100, "poll", tid=1)
    path = b.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 1")
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 'later' WHERE rowid = 2")
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 3")
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 'lots' WHERE rowid = 1")
    db.execute("UPDATE NVTX_EVENTS SET \"end\" = 'x' WHERE text = 'step_2'")
    db.execute("UPDATE OSRT_API SET start = 1.5")
    db.commit()
    db.close()
    m = analyze_paths([path])
    r = m.ranks[0]
    assert r.activity.kernel_count == 4 and r.activity.memcpy_count == 1
    assert [x.name for x in r.nvtx] == ["step_*"] and r.nvtx[0].count == 1
    notes = m.sources[0].notes
    assert any("2 rows of CUPTI_ACTIVITY_KIND_KERNEL left out" in n for n in notes), notes
    res = _cli("analyze", str(path))
    assert res.returncode == 0 and "Traceback" not in res.stderr


def test_spec_lock_is_read_from_the_trace_s_own_run_folder_only(tmp_path: Path) -> None:
    spec = "workload:\n  kind: nemo\n  cpu_offloading_layers: 8\n"
    # a spec.lock.yaml up in an unrelated parent folder says nothing about this trace
    (tmp_path / "spec.lock.yaml").write_text(spec)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    f = training_trace(rank=0).write(deep / "t.json")
    assert analyze_paths([f]).ranks[0].offloading is None
    # gh-run's run folder: <run>/spec.lock.yaml beside <run>/artifacts/<...>/trace
    run = tmp_path / "run"
    (run / "artifacts" / "rank0").mkdir(parents=True)
    g = training_trace(rank=0).write(run / "artifacts" / "rank0" / "t.json")
    (run / "spec.lock.yaml").write_text(spec)
    assert analyze_paths([g]).ranks[0].offloading is True
    # the collected layout: <store>/<run id>/run/spec.lock.yaml
    (run / "spec.lock.yaml").unlink()
    (run / "run").mkdir()
    (run / "run" / "spec.lock.yaml").write_text(spec)
    assert analyze_paths([g]).ranks[0].offloading is True
    # beside the trace itself
    (deep / "spec.lock.yaml").write_text(spec)
    assert analyze_paths([f]).ranks[0].offloading is True


# ---- ranks -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-3.json", 3),
        ("rank3.pt.trace.json", 3),
        ("sft_r3.json", 3),
        ("worker_r1.1623143089861.pt.trace.json", 1),
        # PyTorch's default `<worker>.<epoch_ms>.pt.trace.json`: a timestamp, never a rank
        ("gpu-node-7_12345.1623143089861.pt.trace.json", None),
        ("worker0.1623143089861.pt.trace.json", None),
        ("worker1.1623143089862.pt.trace.json.gz", None),
        ("host.1623143089861.pt.trace.json.gz", None),
        # job ids
        ("sft_4242817.sqlite", None),
        ("sft_42.sqlite", None),
        ("slurm-1234.json", None),
        ("slurm-12345678.json", None),
        # gh-run's own per-rank names
        ("sft.12.nsys-rep", 12),
        ("sft.12.sqlite", 12),
    ],
)
def test_rank_in_a_file_name(name: str, rank: int | None) -> None:
    assert ranks.rank_from_name(Path(name)) == rank


def test_rank_assignment_notes_and_collisions(tmp_path: Path) -> None:
    def c(name: str, by_trace: tuple[int, str] | None = None) -> ranks.Claim:
        return ranks.Claim(Path(name), by_trace)

    got = ranks.assign(
        [
            c("a.1623143089861.pt.trace.json"),  # nothing: rank 0, noted
            c("b.json", (2, "distributedInfo.rank")),
            c("rank2.json"),  # rank 2 is taken: renumbered
            c("c.json"),
        ]
    )
    assert [(a.rank, a.rule) for a in got] == [
        (0, "file order"),
        (2, "distributedInfo.rank"),
        (1, "file order"),
        (3, "file order"),
    ]
    assert got[0].note is not None and "no rank in the trace or its name" in got[0].note
    assert got[2].note is not None and "also b.json's" in got[2].note
    multi = ranks.assign(
        [ranks.Claim(Path("n.sqlite"), (1, "SLURM_PROCID in the profiled environment"), i, 4)
         for i in range(4)]
    )  # fmt: skip
    assert [a.rank for a in multi] == [4, 5, 6, 7]
    assert multi[1].rule.endswith("process 2 of 4")


def test_pytorch_default_trace_name_is_rank_0_with_a_note(tmp_path: Path) -> None:
    b = training_trace(rank=0)
    b.rank = None  # no distributedInfo
    m = analyze_paths([b.write(tmp_path / "gpu-node-1_4242.1623143089861.pt.trace.json")])
    assert m.ranks[0].rank == 0 and m.sources[0].rank_rule == "file order"
    assert m.sources[0].rank_note is not None and "no rank" in m.sources[0].rank_note


def test_nsys_rank_from_the_profiled_environment(tmp_path: Path) -> None:
    for sep in ("\x00", ";"):
        b = NsysBuilder(tmp_path / "sft.sqlite")
        b.add_kernel(0, 10, "k")
        b.add_env({"HOME": "/root", "SLURM_PROCID": "5", "SLURM_NTASKS": "8"}, separator=sep)
        m = analyze_paths([b.close()])
        assert m.ranks[0].rank == 5
        assert m.sources[0].rank_rule == "SLURM_PROCID in the profiled environment"
    # the real MPI export: rank 0 of 2 (PMI_RANK and SLURM_PROCID say so)
    p = REAL / "saxpy-mpi-cuda_perlmutter0.sqlite"
    if p.exists():
        src = analyze_paths([p]).sources[0]
        assert src.rank == 0 and "in the profiled environment" in src.rank_rule


def test_distributed_info_wins_over_the_name(tmp_path: Path) -> None:
    f = training_trace(rank=6).write(tmp_path / "rank2.json")
    m = analyze_paths([f])
    assert m.ranks[0].rank == 6 and m.sources[0].rank_rule == "distributedInfo.rank"


def test_write_kineto_stream_round_trip(tmp_path: Path) -> None:
    b = training_trace(rank=4)
    f = write_kineto_stream(tmp_path / "s.json.gz", b.meta(), iter(b.events))
    with gzip.open(f, "rb") as fh:
        assert fh.read(2) == b"{\n"
    t = kineto.load_trace(f)
    assert t.parser == "kineto layout scan" and kineto.trace_rank(t) == 4
