"""The snapshot reader (readers/safe_pickle.py, readers/torch_snapshot.py): the real H200
snapshots read; hostile files (a pickle that would run code, a truncated one, one too large,
values of the wrong type or shape) refused in one sentence naming the file, with nothing
unpickled that is not plain data."""

from __future__ import annotations

import pickle
import pickletools
import struct
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import loader
from orchestrator.analysis.readers import safe_pickle, torch_snapshot
from orchestrator.analysis.timeline import memory as M
from orchestrator.core.errors import UserError
from tests.fixtures.recordings import unpacked

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "memory_h200"
CASES = ["activations", "activations_ckpt", "activations_timeline", "adam", "leak", "fragment"]


def real(case: str = "adam") -> Path:
    return unpacked(DATA / case) / "memory.rank0.pickle"


def refused(path: Path, *needles: str) -> str:
    with pytest.raises(UserError) as info:
        torch_snapshot.read(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text, text
    for n in needles:
        assert n in text, text
    return text


@pytest.mark.parametrize("case", CASES)
def test_real_snapshots_read_with_their_hooks_marks(case: str) -> None:
    tls = torch_snapshot.read(real(case))
    assert len(tls) == 1
    tl = tls[0]
    raw = pickle.loads(real(case).read_bytes())  # our own recording: plain pickle is fine here
    trace = raw["device_traces"][0]
    assert tl.events.size_n == len(trace)
    assert tl.events.t_ns.tolist() == [e["time_us"] * 1000 for e in trace]
    codes = [M.ACTIONS[e["action"]] for e in trace]
    assert tl.events.action.tolist() == codes
    assert tl.events.size.tolist() == [e["size"] for e in trace]
    assert tl.marks_source is not None and "hook" in tl.marks_source
    assert tl.mode == ("timeline" if case == "activations_timeline" else "snapshot")
    assert tl.rank == 0 and tl.total_memory and tl.total_memory > 100 * 2**30
    stacked = [e for e in trace if e.get("frames")]
    assert bool(stacked) == (case != "activations_timeline")
    for i, e in enumerate(trace):
        if e.get("frames"):
            st = tl.stacks[int(tl.events.stack[i])]
            assert [(f.filename, f.name, f.line) for f in st] == [
                (f["filename"], f["name"], f["line"]) for f in e["frames"][:128]
            ]
            break


def test_a_snapshot_taken_by_hand_reads_with_pytorchs_own_annotations(tmp_path: Path) -> None:
    raw = pickle.loads(real("adam").read_bytes())
    raw.pop("gh_run")  # what torch.cuda.memory._dump_snapshot writes: no hook
    path = tmp_path / "dump_snapshot.pickle"
    path.write_bytes(pickle.dumps(raw))
    (tl,) = torch_snapshot.read(path)
    assert tl.mode is None and tl.rank is None
    assert tl.marks_source is not None and "Optimizer.step" in tl.marks_source
    m = loader.analyze_paths([path])
    use = m.ranks[0].memory
    assert use is not None and use.source == "torch snapshot (taken by hand, with stacks)"
    # no forward/backward marks: the optimizer's state still comes from its frames
    state = use.category("optimizer_state")
    # the two moments (1 GiB) and fused Adam's 8 step tensors
    assert state is not None and 2**30 <= state.bytes <= 2**30 + 8 * 512


# ---- hostile input
class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, ("echo pwned > /tmp/gh-run-should-not-exist",))


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = Path("/tmp/gh-run-should-not-exist")
    marker.unlink(missing_ok=True)
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"device_traces": [[_Evil()]], "segments": []}))
    refused(path, "posix.system", "plain data")
    assert not marker.exists()


@pytest.mark.parametrize(
    "obj",
    [
        # a class, a builtin callable, a set through the reduce protocol
        pytest.param(pickle.dumps(complex(1, 2)), id="complex"),
        pytest.param(pickle.dumps(slice(1, 2)), id="slice"),
        pytest.param(pickle.dumps(range(3), protocol=2), id="range"),
    ],
)
def test_any_global_is_refused(tmp_path: Path, obj: bytes) -> None:
    path = tmp_path / "g.pickle"
    path.write_bytes(obj)
    refused(path, "which is code, not data")


def test_persistent_ids_and_extension_codes_are_refused(tmp_path: Path) -> None:
    persid = tmp_path / "p.pickle"
    persid.write_bytes(b"\x80\x04P0\n.")  # PERSID '0'
    refused(persid, "persistent id")
    ext = tmp_path / "e.pickle"
    ext.write_bytes(b"\x80\x04\x82\x01.")  # EXT1 1: no extension registry entry
    refused(ext, "refused as a memory snapshot")


def test_truncated_trailing_and_empty_files_are_refused(tmp_path: Path) -> None:
    data = real().read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(data[: len(data) // 2])
    refused(cut, "refused as a memory snapshot")
    more = tmp_path / "more.pickle"
    more.write_bytes(data + b"\x80\x04N.")
    refused(more, "bytes follow the pickle's end")
    empty = tmp_path / "empty.pickle"
    empty.write_bytes(b"")
    refused(empty, "ends early")


def test_a_file_over_the_ceiling_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.pickle"
    path.write_bytes(real().read_bytes())
    with pytest.raises(UserError) as info:
        torch_snapshot.read(path, max_bytes=1000)
    assert "ceiling" in str(info.value) and "--max-trace-size" in str(info.value)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([1, 2, 3], "not a PyTorch memory snapshot"),
        ({"device_traces": "x", "segments": []}, "`device_traces` is a str"),
        ({"device_traces": [[{"action": "alloc", "addr": 1, "size": "8"}]]}, "size is a str"),
        ({"device_traces": [[{"action": "alloc", "addr": 1.5, "size": 8}]]}, "addr is a float"),
        ({"device_traces": [[{"action": 7, "addr": 1, "size": 8}]]}, "no text `action`"),
        ({"device_traces": [[{"action": "alloc", "addr": 1, "size": -8}]]}, "negative"),
        ({"device_traces": [[{"action": "alloc", "addr": 1, "size": 8, "time_us": "now"}]]},
         "time_us is a str"),
        ({"device_traces": [[{"action": "alloc", "addr": 1, "size": 8, "frames": "f"}]]},
         "frames are a str"),
        ({"device_traces": [[{"action": "alloc", "addr": 1, "size": 8, "frames": [{"line": 1}]}]]},
         "frame has no text"),
        ({"device_traces": [["alloc"]]}, "not a dict"),
        ({"segments": [{"device": 0, "total_size": "big"}]}, "total_size is a str"),
        ({"segments": [{"device": 0, "total_size": 8, "blocks": [{"size": 8, "state":
          "active_allocated", "address": None}]}]}, "address is a NoneType"),
        ({"device_traces": [], "segments": [], "gh_run": {"marks": [[1, "fwd_begin"]]}},
         "mark is not"),
    ],
)  # fmt: skip
def test_values_of_the_wrong_type_are_refused_in_one_sentence(
    tmp_path: Path, data: Any, needle: str
) -> None:
    path = tmp_path / "bad.pickle"
    path.write_bytes(pickle.dumps(data))
    refused(path, needle)


def test_deep_nesting_is_refused_or_read_without_recursion(tmp_path: Path) -> None:
    # a list nested a million deep, built by the opcode stream (no recursion in the writer)
    depth = 1_000_000
    body = b"\x80\x04" + b"]" * depth + b"a" * (depth - 1)
    path = tmp_path / "deep.pickle"
    path.write_bytes(body + b".")
    refused(path, "not a PyTorch memory snapshot")
    trace = tmp_path / "deep_trace.pickle"
    # {"device_traces": [[[[...]]]]}: the trace's event is a list, not a dict
    nested = b"\x80\x04}\x8c\rdevice_traces" + b"]" * depth + b"a" * (depth - 1) + b"s."
    trace.write_bytes(nested)
    refused(trace, "not a dict")


def test_memo_references_bound_what_the_reader_builds(tmp_path: Path) -> None:
    # 200,000 events that all share one frames list (as real pickles share them): read once
    frames = [{"filename": "/x.py", "name": "f", "line": 1}] * 10_000
    ev = [{"action": "alloc", "addr": i, "size": 512, "frames": frames} for i in range(200_000)]
    path = tmp_path / "shared.pickle"
    path.write_bytes(pickle.dumps({"device_traces": [ev], "segments": []}, protocol=4))
    (tl,) = torch_snapshot.read(path)
    assert len(tl.stacks) == 1 and len(tl.stacks[0]) == torch_snapshot.MAX_FRAMES


def test_only_plain_opcodes_reach_the_data(tmp_path: Path) -> None:
    """What a real snapshot's opcodes are: nothing that names a global or calls one."""
    ops = {op.name for op, _, _ in pickletools.genops(real("leak").read_bytes())}
    assert not ops & {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ",
                      "NEWOBJ_EX", "PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4"}  # fmt: skip


def test_safe_pickle_reads_plain_data_like_pickle(tmp_path: Path) -> None:
    data = {"a": [1, 2.5, "x", None, True, (1, 2)], "b": {"c": b"\x00", "d": {1, 2}}}
    path = tmp_path / "plain.pickle"
    path.write_bytes(pickle.dumps(data))
    assert safe_pickle.load(path) == data
    big_int = tmp_path / "int.pickle"
    big_int.write_bytes(b"\x80\x04\x8a" + struct.pack("<B", 9) + b"\x01" * 9 + b".")
    assert isinstance(safe_pickle.load(big_int), int)


# ---- edges of the history (small snapshots written here: stand-ins of the format, named so)
def _snapshot(tmp: Path, trace: list[dict[str, Any]], segments: list[Any] | None = None) -> Path:
    path = tmp / "standin.pickle"
    path.write_bytes(pickle.dumps({"device_traces": [trace], "segments": segments or []}))
    return path


def test_a_history_without_marks_is_unknown_not_guessed(tmp_path: Path) -> None:
    trace = [
        {"action": "segment_alloc", "addr": 0, "size": 2 << 20, "time_us": 1},
        {"action": "alloc", "addr": 0, "size": 512, "time_us": 2},
        {"action": "free_requested", "addr": 0, "size": 512, "time_us": 3},
        {"action": "alloc", "addr": 512, "size": 1024, "time_us": 4},
    ]
    segs = [{"device": 0, "total_size": 2 << 20, "blocks": [
        {"size": 512, "state": "inactive"},
        {"size": 1024, "state": "active_allocated", "address": 512},
        {"size": (2 << 20) - 1536, "state": "inactive"}]}]  # fmt: skip
    m = loader.analyze_paths([_snapshot(tmp_path, trace, segs)])
    use = m.ranks[0].memory
    assert use is not None and use.peak_allocated_bytes == 1024 and use.peak_step is None
    assert use.peak_reserved_bytes == 2 << 20 and use.largest_free_block_bytes == (2 << 20) - 1536
    (unknown,) = [c for c in use.categories if c.name != "cache"]
    assert unknown.name == "unknown" and "no step marks" in unknown.how
    assert use.steps == [] and use.growth_per_step_bytes is None


def test_segments_alone_and_an_empty_trace_read(tmp_path: Path) -> None:
    segs = [{"device": 0, "total_size": 4096, "blocks": [
        {"size": 4096, "state": "active_allocated", "address": 7}]}]  # fmt: skip
    m = loader.analyze_paths([_snapshot(tmp_path, [], segs)])
    use = m.ranks[0].memory
    assert use is not None and use.events == 0 and use.peak_allocated_bytes is None
    empty = tmp_path / "e"
    empty.mkdir()
    m = loader.analyze_paths([_snapshot(empty, [])])
    assert m.ranks == []  # nothing held, nothing happened: no entry
