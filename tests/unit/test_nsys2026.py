"""Exports of the Nsight Systems people run in 2026, and PyTorch's own annotations (issue 37).

On the real nsys 2026.1.1 / 2026.2.1 exports of tests/data/nsys2026:
- the reader gives the figures a plain SQL query over the file gives (kernels, copies, memsets,
  NVTX ranges per name), with the compiled page reader and without it;
- the variants derived from them (`tests/fixtures/export_variants.py`: versioned table names, a
  versioned table beside a cut plain one, NULL-end marks, rows stored shuffled) give the same
  analysis as the originals; ranges never closed and a dropped table are named in notes;
- PyTorch's operator ranges are operators (dozens of rows, not thousands of one-off names), kept
  out of the workload's ranges and steps;
and, as pure functions: the table resolution, the split of PyTorch's names (one name and a
whole chunk at once), the operators' self times.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis import loader
from orchestrator.analysis.families import operators
from orchestrator.analysis.readers import export_tables, nsys_sqlite, sqlite_pages
from orchestrator.analysis.timeline import model as T
from orchestrator.analysis.timeline import torch_ranges
from tests.budget import examples
from tests.fixtures import export_variants, recordings

DATA = Path(__file__).resolve().parents[1] / "data" / "nsys2026"
NAMES = ["h100_2gpu_1s", "mfu_2gpu_before", "mfu_2gpu_after", "mock"]
RANGE_TYPES = (59, 60, 70)


def export(name: str) -> Path:
    return recordings.export(DATA / f"{name}.sqlite.xz")


@pytest.fixture(params=["pages", "sqlite"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reader reads the big tables: the compiled page reader or SQLite's path
    (GH_RUN_NO_NATIVE_SCAN's)."""
    if request.param == "sqlite":
        monkeypatch.setattr(sqlite_pages, "_LIB", None)
    elif not sqlite_pages.available():
        pytest.fail("the compiled page reader is not built (setup.py builds it)")
    return str(request.param)


def _sql(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _has(path: Path, table: str) -> bool:
    return bool(_sql(path, f"SELECT 1 FROM sqlite_master WHERE name = '{table}'"))


def _gpu(path: Path, table: str) -> tuple[int, int, int]:
    """(rows, summed ns, summed bytes) of a GPU table, by SQL."""
    if not _has(path, table):
        return 0, 0, 0
    bytes_ = "coalesce(sum(bytes), 0)" if "MEMCPY" in table or "MEMSET" in table else "0"
    ((n, ns, b),) = _sql(
        path, f'SELECT count(*), coalesce(sum("end" - start), 0), {bytes_} FROM {table}'
    )
    return int(n), int(ns), int(b)


def _sql_ranges(path: Path) -> Counter[tuple[str, bool]]:
    """(name, is PyTorch's) -> count of the NVTX ranges, by SQL and the naming rule applied per
    row (`torch_ranges.split`)."""
    if not _has(path, "NVTX_EVENTS"):
        return Counter()
    rows = _sql(
        path,
        "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s"
        f' ON s.id = n.textId WHERE n.eventType IN {RANGE_TYPES} AND n."end" IS NOT NULL'
        ' AND n."end" >= n.start',
    )
    return Counter(torch_ranges.split(r[0]) if r[0] is not None else ("(unnamed)", False)
                   for r in rows)  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_each_real_2026_export_reads_as_sql_reads_it(name: str, reader: str) -> None:
    path = export(name)
    tls = nsys_sqlite.read_timelines(path)
    gpu = T.GpuTable(*(np.concatenate([getattr(t.gpu, c) for t in tls]) for c in T.GPU_COLUMNS))
    for kind, table in (
        (T.KERNEL, "CUPTI_ACTIVITY_KIND_KERNEL"),
        (T.MEMCPY, "CUPTI_ACTIVITY_KIND_MEMCPY"),
        (T.MEMSET, "CUPTI_ACTIVITY_KIND_MEMSET"),
    ):
        m = gpu.kind == kind
        n, ns, b = _gpu(path, table)
        assert (int(m.sum()), int((gpu.end - gpu.start)[m].sum())) == (n, ns), table
        if kind != T.KERNEL:
            assert int(gpu.nbytes[m].sum()) == b, table
    got: Counter[tuple[str, bool]] = Counter()
    for tl in tls:
        h = tl.host
        nvtx = np.isin(h.kind, (T.ANNOTATION, T.LIBRARY_ANNOTATION, T.CPU_OP))
        for i, k in zip(h.name[nvtx].tolist(), h.kind[nvtx].tolist(), strict=True):
            got[(tl.names[i], k == T.CPU_OP)] += 1
    want = _sql_ranges(path)
    # an operator whose name says it is a step or a data wait stays the workload's range
    want = Counter(
        {(n, op and not torch_ranges.stays_workload_range(n)): c for (n, op), c in want.items()}
    )
    assert got == want
    assert sum(want.values()) == sum(c for (_, _), c in got.items())


def _analysis(path: Path) -> dict[str, Any]:
    """`analyze --json` of one input, its own path and its notes left out (what a variant may
    change), each note kept apart."""
    m = loader.analyze_paths([path], use_records=False)
    doc = json.loads(m.model_dump_json())
    doc["label"] = None
    for s in doc["sources"]:
        s["path"] = ""
        s["notes"] = []
    for r in doc["ranks"]:
        r["source"] = ""
    return doc


def _notes(path: Path) -> list[str]:
    m = loader.analyze_paths([path], use_records=False)
    return [n for s in m.sources for n in s.notes]


@pytest.mark.parametrize("name", NAMES)
def test_the_page_reader_and_sqlite_give_the_same_analysis(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = export(name)
    native = _analysis(path)
    monkeypatch.setattr(sqlite_pages, "_LIB", None)
    assert _analysis(path) == native


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Path]]:
    """The variants of an export, derived once for both readers (deterministic: the shuffle
    has its seed), read only."""
    made: dict[str, dict[str, Path]] = {}

    def of(name: str) -> dict[str, Path]:
        if name not in made:
            made[name] = export_variants.derive(export(name), tmp_path_factory.mktemp(name))
        return made[name]

    return of


@pytest.mark.parametrize("name", NAMES)
def test_variants_give_the_analysis_of_the_original(
    name: str, derived: Callable[[str], dict[str, Path]], reader: str
) -> None:
    path = export(name)
    want = _analysis(path)
    made = derived(name)
    assert "renamed" in made and "shuffled" in made
    for variant in ("renamed", "beside", "null_ends", "shuffled"):
        if variant in made:
            assert _analysis(made[variant]) == want, variant
    notes = _notes(made["renamed"])
    for old, new in export_variants.RENAMES.items():
        if _has(path, old):
            assert f"{old}: read as {new} (a versioned name of it)" in notes
    if "beside" in made:
        assert any("holds NVTX_EVENTS_V3 and NVTX_EVENTS; read NVTX_EVENTS_V3" in n
                   for n in _notes(made["beside"]))  # fmt: skip


def test_marks_name_nothing_in_the_timeline(tmp_path: Path) -> None:
    """Marks and domain creations are no ranges, with an end or without (NULL, as nsys writes
    them): their names are not interned."""
    path = export("h100_2gpu_1s")
    marked = export_variants.null_ends(path, tmp_path / "marks.sqlite")
    conn = sqlite3.connect(marked)
    conn.execute('UPDATE NVTX_EVENTS SET "end" = start WHERE eventType = 34 AND rowid % 2 = 0')
    conn.commit()
    conn.close()
    plain, with_marks = nsys_sqlite.read_timelines(path), nsys_sqlite.read_timelines(marked)
    assert [tl.names for tl in with_marks] == [tl.names for tl in plain]
    assert not any(n.startswith(("mark ", "domain ")) for n in with_marks[0].names)


def test_ranges_never_closed_and_a_dropped_table_are_named(tmp_path: Path) -> None:
    path = export("h100_2gpu_1s")
    made = export_variants.derive(path, tmp_path, ("open_ranges", "dropped"))
    assert any(n.startswith("3 NVTX ranges of NVTX_EVENTS left out") for n in _notes(
        made["open_ranges"]))  # fmt: skip
    m = loader.analyze_paths([made["dropped"]], use_records=False)
    assert "NVTX_EVENTS" in m.sources[0].missing
    assert any("not in this export: NVTX_EVENTS (NVTX ranges)" in n for n in m.sources[0].notes)


def test_a_table_renamed_beyond_what_gh_run_knows_gets_a_note(tmp_path: Path) -> None:
    path = export("h100_2gpu_1s")
    odd = export_variants.renamed(path, tmp_path / "odd.sqlite", {"NVTX_EVENTS": "NVTX_EVENTS_NEW"})
    notes = _notes(odd)
    assert any(
        n.startswith("NVTX_EVENTS: not in this export, but NVTX_EVENTS_NEW is") for n in notes
    )


def test_a_column_renamed_beyond_what_gh_run_knows_gets_a_note(tmp_path: Path) -> None:
    path = export("h100_2gpu_1s")
    odd = tmp_path / "col.sqlite"
    odd.write_bytes(path.read_bytes())
    conn = sqlite3.connect(odd)
    conn.execute('ALTER TABLE NVTX_EVENTS RENAME COLUMN "text" TO "label"')
    conn.commit()
    conn.close()
    notes = _notes(odd)
    assert any(n.startswith("NVTX_EVENTS has no column text") for n in notes), notes


def test_pytorch_operators_are_dozens_of_rows_and_keep_out_of_steps(tmp_path: Path) -> None:
    path = export("h100_2gpu_1s")
    raw = _sql(path, "SELECT count(DISTINCT text), count(*) FROM NVTX_EVENTS")[0]
    assert raw[0] > 10_000  # nearly every range name unique (op ids)
    m = loader.analyze_paths([path], use_records=False)
    r = m.ranks[0]
    assert 20 <= len(r.operators) <= operators.TOP_OPERATORS
    assert all(", op_id = " not in o.name for o in r.operators)
    assert not r.nvtx or all(", op_id = " not in x.name for x in r.nvtx)
    tls = nsys_sqlite.read_timelines(path)
    distinct_ops = {tl.names[i] for tl in tls for i in tl.host.name[tl.host.kind == T.CPU_OP]}
    assert 20 <= len(distinct_ops) <= 300
    # the steps do not depend on the operator ranges: the export without its NVTX table
    # finds the same ones
    bare = export_variants.dropped(path, tmp_path / "bare.sqlite")
    other = loader.analyze_paths([bare], use_records=False).ranks[0]
    assert r.steps is not None and other.steps is not None
    assert (r.steps.count, r.steps.rule, r.steps.durations_ns) == (
        other.steps.count,
        other.steps.rule,
        other.steps.durations_ns,
    )


def test_name_rules_run_once_per_distinct_name() -> None:
    tls = nsys_sqlite.read_timelines(export("h100_2gpu_1s"))
    seen: list[str] = []
    tls[0].name_mask(lambda n: seen.append(n) or True)
    assert len(seen) == len(set(seen)) == len(tls[0].names) < 500


def test_a_rule_about_some_rows_asks_only_their_names() -> None:
    """`among`: the rule is asked of the names those rows use, once each, and the mask agrees
    with the full one on them (a million distinct NVTX names cost no regex where the
    question is about kernels or CUDA calls)."""
    tl = nsys_sqlite.read_timelines(export("h100_2gpu_1s"))[0]
    kernels = tl.gpu.name[tl.gpu.kind == T.KERNEL]
    seen: list[str] = []
    some = tl.name_mask(lambda n: seen.append(n) or "nccl" in n.lower(), kernels)
    full = tl.name_mask(lambda n: "nccl" in n.lower())
    assert sorted(seen) == sorted({tl.names[i] for i in kernels.tolist()})
    assert len(seen) < len(tl.names)
    assert np.array_equal(some[kernels], full[kernels])
    others = np.setdiff1d(np.arange(len(tl.names)), kernels)
    assert not some[others].any()


# ------------------------------------------------------------------ resolution (pure)


def test_the_highest_version_wins_and_others_are_noted() -> None:
    s = export_tables.resolve(["NVTX_EVENTS", "NVTX_EVENTS_V2", "NVTX_EVENTS_V10"], ["NVTX_EVENTS"])
    assert s.name("NVTX_EVENTS") == "NVTX_EVENTS_V10"
    (note,) = s.notes(["NVTX_EVENTS"])
    assert "read NVTX_EVENTS_V10" in note and "NVTX_EVENTS_V2" in note


def test_older_names_and_case_resolve_without_notes() -> None:
    s = export_tables.resolve(
        ["EXPORT_META_DATA", "nvtx_events"], ["META_DATA_EXPORT", "NVTX_EVENTS"]
    )
    assert s.name("META_DATA_EXPORT") == "EXPORT_META_DATA"
    assert s.name("NVTX_EVENTS") == "nvtx_events"
    assert "NVTX_EVENTS" in s and "META_DATA_EXPORT" in s
    assert s.notes(["META_DATA_EXPORT", "NVTX_EVENTS"]) == []


def test_a_key_with_no_table_and_no_lookalike_is_plainly_absent() -> None:
    s = export_tables.resolve(["StringIds", "OSRT_API_V2_OLD"], ["NVTX_EVENTS", "OSRT_API"])
    assert "NVTX_EVENTS" not in s and s.name("NVTX_EVENTS") == "NVTX_EVENTS"
    assert "OSRT_API" not in s
    notes = s.notes(["NVTX_EVENTS", "OSRT_API"])
    assert len(notes) == 1 and "OSRT_API_V2_OLD" in notes[0]


def test_a_table_gh_run_knows_is_no_lookalike_of_another() -> None:
    s = export_tables.resolve(
        ["TARGET_INFO_GPU_METRICS"], ["TARGET_INFO_GPU", "TARGET_INFO_GPU_METRICS"]
    )
    assert "TARGET_INFO_GPU" not in s and s.notes(["TARGET_INFO_GPU"]) == []


def test_columns_resolve_by_their_spellings_in_any_case() -> None:
    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    assert export_tables.column({"shortName", "start"}, kernel, "name") == "shortName"
    assert export_tables.column({"DemangledName"}, kernel, "name") == "DemangledName"
    assert export_tables.column({"START"}, "NVTX_EVENTS", "start") == "START"
    assert export_tables.column({"begin"}, "NVTX_EVENTS", "start") is None


# ------------------------------------------------------------------ PyTorch's names (pure)


def test_pytorch_names_split_as_emit_nvtx_writes_them() -> None:
    assert torch_ranges.split("aten::mul, op_id = 322567") == ("aten::mul", True)
    assert torch_ranges.split("aten::mul, seq = 46174, op_id = 993406") == ("aten::mul", True)
    assert torch_ranges.split("aten::add, sizes = [[3, 4], [3, 4]]") == ("aten::add", True)
    assert torch_ranges.split("loss, step 3, op_id = 9") == ("loss, step 3", True)
    assert torch_ranges.split("forward, backward") == ("forward, backward", False)
    assert torch_ranges.split("aten::mul") == ("aten::mul", False)
    assert torch_ranges.stays_workload_range("ProfilerStep#3")
    assert torch_ranges.stays_workload_range("enumerate(DataLoader)#_SingleProcessDataLoaderIter")
    assert not torch_ranges.stays_workload_range("aten::mul")


_NAME_PART = st.text(alphabet=st.characters(blacklist_characters="\x1e\x1f"), max_size=12)
_SUFFIX = st.sampled_from(
    [
        "",
        ", seq = 3",
        ", op_id = 77",
        ", seq = 1, op_id = 2",
        ", sizes = [[1, 2], []]",
        ", op_id = 5, input_op_ids = [(1, 0)]",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_NAME_PART, _SUFFIX), min_size=1, max_size=8))
def test_a_chunk_strips_as_each_name_splits(parts: list[tuple[str, str]]) -> None:
    names = [a + b for a, b in parts]
    joined = torch_ranges.strip_joined("\x1f".join(names), "\x1f", "\x1e").split("\x1f")
    want = [(op + "\x1e") if is_op else op for op, is_op in map(torch_ranges.split, names)]
    assert joined == want


# ------------------------------------------------------------------ self times (pure)


def _self_reference(s: list[int], e: list[int]) -> list[int]:
    """Self time by definition: duration minus the durations of the intervals directly inside
    (the innermost enclosing interval is the parent), pairwise."""
    n = len(s)
    out = [e[i] - s[i] for i in range(n)]
    for j in range(n):
        if e[j] == s[j]:
            continue
        parents = [i for i in range(n) if i != j and e[i] > s[i] and s[i] <= s[j] and e[j] <= e[i]
                   and (s[i], -e[i], i) < (s[j], -e[j], j)]  # fmt: skip
        if parents:
            p = max(parents, key=lambda i: (s[i], -e[i], i))
            out[p] -= e[j] - s[j]
    return out


def _nested(rnd: random.Random, lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    t = lo
    while t < hi and rnd.random() < 0.8:
        a = t + rnd.randrange(0, 3)
        b = min(hi, a + rnd.randrange(0, 40))
        if b < a:
            break
        out.append((a, b))
        if depth and b - a > 4:
            out += _nested(rnd, a, b, depth - 1)
        t = b
    return out


@pytest.mark.parametrize("seed", range(40))
def test_self_times_are_durations_minus_direct_children(seed: int) -> None:
    rnd = random.Random(seed)
    rows = _nested(rnd, 0, 400, 4)
    rnd.shuffle(rows)
    if not rows:
        return
    s = np.array([a for a, _ in rows], dtype=np.int64)
    e = np.array([b for _, b in rows], dtype=np.int64)
    got = operators._self_times(s, e)
    assert got is not None
    assert got.tolist() == _self_reference(s.tolist(), e.tolist())


def test_operators_that_do_not_nest_have_no_self_time() -> None:
    s = np.array([0, 5], dtype=np.int64)
    e = np.array([10, 15], dtype=np.int64)  # the second ends after the first
    assert operators._self_times(s, e) is None


# ------------------------------------------------------------------ NCCL operations by id


GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def _two_ranks(path: Path, key: str) -> Path:
    """A stand-in export (tests/fixtures/nsys_builder.py) of two processes, each with NCCL
    kernels and a stand-in table of NCCL operations carrying the documented id columns
    (`commHash`, `seqNumber`, `operationId`; no real export met holds one, so the table's name is
    this test's own). Rank 1 lacks operation 2 and starts each other one 10 us after rank 0;
    its kernels are offset so that matching them by position pairs the wrong ones."""
    from tests.fixtures.nsys_builder import NsysBuilder, global_pid

    b = NsysBuilder(path, pid=500)
    b.add_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
    b.db.execute(
        "CREATE TABLE NCCL_OPERATIONS (start INTEGER NOT NULL, end INTEGER, globalPid INTEGER,"
        " commHash INTEGER, seqNumber INTEGER, operationId INTEGER)"
    )
    for pid, dev, late in ((500, 0, 0), (600, 1, 10_000)):
        b.add_cuda_stream(7, pid=pid)
        b.add_thread(pid, "pt_main_thread", pid=pid)
        for seq in range(1, 5):
            t = 1_000_000 * seq
            b.add_kernel(t, t + 400_000, GEMM, device=dev, pid=pid, launch=t - 5_000)
            if pid == 600 and seq == 2:
                continue  # not captured on rank 1
            b.add_kernel(t + 400_000 + late, t + 500_000, NCCL_KERNEL, device=dev, stream=20,
                         pid=pid)  # fmt: skip
            row = (t + 400_000 + late, t + 500_000, global_pid(pid), -77 if key == "comm" else
                   None, seq if key == "comm" else None, 1000 + seq)  # fmt: skip
            b.db.execute("INSERT INTO NCCL_OPERATIONS VALUES (?,?,?,?,?,?)", row)
    return b.close()


@pytest.mark.parametrize("key", ["comm", "operation"])
def test_collectives_are_matched_by_the_id_every_rank_shares(tmp_path: Path, key: str) -> None:
    m = loader.analyze_paths([_two_ranks(tmp_path / "two.sqlite", key)], use_records=False)
    sk = m.cross_rank.collective_start_skew
    assert sk is not None
    named = "commHash + seqNumber" if key == "comm" else "operationId"
    assert sk.how == (
        f"3 NCCL operations matched by their shared id ({named}, NCCL_OPERATIONS);"
        " 1 operations not on every rank left out"
    )
    assert sk.matched == 3 and sk.median_ns == sk.max_ns == 10_000


def test_without_an_id_collectives_are_matched_by_position(tmp_path: Path) -> None:
    path = _two_ranks(tmp_path / "two.sqlite", "comm")
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE NCCL_OPERATIONS")
    conn.commit()
    conn.close()
    sk = loader.analyze_paths([path], use_records=False).cross_rank.collective_start_skew
    assert (
        sk is not None
        and sk.how == "the first 3 collectives of each rank (their counts differ: [4, 3])"
    )


@pytest.mark.parametrize("seed", range(10))
def test_thread_keys_are_thread_groups_keys(seed: int) -> None:
    from orchestrator.analysis.families import host

    rnd = np.random.default_rng(seed)
    n, threads = int(rnd.integers(1, 3000)), int(rnd.integers(1, 100))
    pid = rnd.integers(0, 4, size=n).astype(np.int64) * 1000
    tid = pid + rnd.integers(0, threads, size=n)
    assert host.thread_keys(pid, tid) == set(host.thread_groups(pid, tid)[0])
    one = np.full(n, 7, dtype=np.int64)
    keys, inv = host.thread_groups(one, one + 1)
    assert keys == [(7, 8)] and not inv.any()


HOSTILE_NAMES = [
    "forward",
    "aten::mul, op_id = 3",
    "a\x1fb, seq = 2",  # the chunk separator inside a name
    "mark\x1e, op_id = 9",  # the operator mark inside a name
    "\x02lead, seq = 1",  # the text prefix inside a name
    "",  # an empty name (not NULL)
    "ProfilerStep#4, op_id = 77",
    "x, y",
]


@pytest.mark.parametrize("with_marks", [False, True])
def test_names_with_the_readers_own_characters_read_as_sql_reads_them(
    tmp_path: Path, reader: str, with_marks: bool
) -> None:
    """A stand-in export (tests/fixtures/nsys_builder.py) whose range names hold the characters
    the NVTX reader joins and marks names with, registered strings (textId) among them; with
    marks (NULL ends) the reader takes its other path (rows picked by rowid)."""
    from tests.fixtures.nsys_builder import NsysBuilder

    b = NsysBuilder(tmp_path / "odd.sqlite")
    b.add_gpu(0)
    b.add_kernel(0, 10, "k")
    t = 100
    for i in range(3):
        for j, name in enumerate(HOSTILE_NAMES):
            b.add_nvtx(t, t + 5, name, tid=b.pid, registered=bool((i + j) % 2))
            if with_marks:
                b.add_nvtx(t, None, f"mark {j}", tid=b.pid, event_type=34)
            t += 10
    path = b.close()
    tls = nsys_sqlite.read_timelines(path)
    got: Counter[tuple[str, bool]] = Counter()
    for tl in tls:
        h = tl.host
        nvtx = np.isin(h.kind, (T.ANNOTATION, T.LIBRARY_ANNOTATION, T.CPU_OP))
        for i, k in zip(h.name[nvtx].tolist(), h.kind[nvtx].tolist(), strict=True):
            got[(tl.names[i], k == T.CPU_OP)] += 1
    want = Counter(
        {(n, op and not torch_ranges.stays_workload_range(n)): c
         for (n, op), c in _sql_ranges(path).items()}
    )  # fmt: skip
    assert got == want
    assert got[("a\x1fb", True)] == 3 and got[("mark\x1e", True)] == 3
    assert got[("\x02lead", True)] == 3 and got[("", False)] == 3
