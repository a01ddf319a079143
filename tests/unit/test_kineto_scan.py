"""The compiled Kineto scan (`kineto_scan`, `_kineto_scan.c`): built where a C compiler is, the
same columns as orjson on the real traces, and on hostile text either the same columns as a
JSON parser or a refusal (never a crash, never other numbers)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import kineto, kineto_scan, tracetext
from tests.budget import examples
from tests.fixtures.kineto_builder import training_trace, write_kineto_stream

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(DATA.glob("traces/*/*.pt.trace.json.gz")) + sorted(
    DATA.glob("ddp_h200/kineto*/*.pt.trace.json.gz")
)

needs_scan = pytest.mark.skipif(
    not kineto_scan.available(),
    reason="the C scan is off (not built: no C compiler at install; or GH_RUN_NO_NATIVE_SCAN)",
)


def test_the_scan_is_built_where_a_compiler_is() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: gh-run installs without the C scan and uses numpy's")
    assert kineto_scan.library_path() is not None, (
        "orchestrator/analysis/readers/_kineto_scan*.so is missing although a C compiler is here:"
        " reinstall with `pip install -e .` and read its build output"
    )


def _batches(raw: bytes) -> list[bytes]:
    return [p.text for p in tracetext.split(iter([raw])) if p.kind == "events"]


def _resolved(cols: dict[str, Any], ids: dict[str, int]) -> dict[str, list[Any]]:
    names = list(ids)
    out = {k: v.tolist() for k, v in cols.items() if k != "name"}
    out["name"] = [names[i] for i in cols["name"].tolist()]
    return out


def _scan(text: bytes) -> dict[str, list[Any]] | None:
    ids: dict[str, int] = {}
    got = kineto_scan.parse(text, ids, kineto._ARG_CATS, kineto._CATS_B)
    return None if got is None else _resolved(got[0], ids)


@needs_scan
@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_real_traces_read_alike_by_the_scan_and_orjson(path: Path) -> None:
    raw = gzip.decompress(path.read_bytes())
    batches = _batches(raw)
    assert batches
    for text in batches:
        fast, slow = _layout_scan(text), _generic(text)
        assert fast is not None and fast == slow
    # and the whole trace against orjson's objects (the generic path)
    scanned = kineto.scan(raw)
    assert scanned is not None and scanned.parser == "kineto layout scan"
    generic = kineto.from_json(orjson.loads(raw))
    assert scanned.columns() == generic.columns()
    assert (scanned.cat == kineto.KERNEL).sum() > 100


def _event(args: str = '"device": 0, "stream": 7, "correlation": 25', cat: str = "kernel") -> str:
    return (
        f'  {{\n    "ph": "X", "cat": "{cat}", "name": "k", "pid": 0, "tid": 7,\n'
        f'    "ts": 1000.500, "dur": 2.250,\n    "args": {{\n      {args}\n    }}\n  }}'
    )


@needs_scan
def test_the_layout_and_its_values_are_read_exactly() -> None:
    got = _scan(
        (
            _event('"External id": 9,"queued": 0,      "grid": [1, [2], {"a": "]"}], "device": 3,'
                   ' "stream": -7, "bytes": 640, "correlation": 123456789012345678, "x": "\\"q"')
            + ",\n" + _event('      "correlation": 4', cat="cuda_runtime").replace(
                '"ts": 1000.500, "dur": 2.250', '"ts": -0.5, "dur": 3')
            + ",\n" + '  {\n    "ph": "X", "cat": "Trace", "ts": 1, "dur": 2, "name": "t"\n  }'
            + ",\n" + _event("").replace(',\n    "args": {\n      \n    }', "")
        ).encode()
    )  # fmt: skip
    assert got is not None
    assert got["name"] == ["k", "k", "k"]  # the `Trace` span is not read
    assert got["cat"] == [kineto.KERNEL, kineto.CUDA_RT, kineto.KERNEL]
    assert got["ts"] == [1_000_500, -500, 1_000_500] and got["dur"] == [2_250, 3_000, 2_250]
    assert got["device"] == [3, -1, -1] and got["stream"] == [-7, -1, -1]
    assert got["correlation"] == [123456789012345678, 4, -1] and got["bytes"] == [640, 0, 0]


@needs_scan
@pytest.mark.parametrize(
    "old, new, why",
    [
        ('"name": "k"', '"name": "k\\"x"', "an escape in a name"),
        ('"name": "k"', '"name": "k\tx"', "a control character in a name"),
        ('"ts": 1000.500', '"ts": 1000.5001', "a fourth decimal"),
        ('"ts": 1000.500', '"ts": 1e3', "an exponent"),
        ('"ts": 1000.500', '"ts": 1000.', "a point without decimals"),
        ('"pid": 0', '"pid": 18446744073709551616', "an id past 64 bits"),
        ('"pid": 0', '"pid": 007', "leading zeros (not JSON)"),
        ('"pid": 0', '"pid": "Spans"', "a string id"),
        ('"ts": 1000.500', '"ts": 99999999999999999.5', "nanoseconds past int64"),
        ('"stream": 7', '"str\\u0065am": 7', "an escaped key (spells stream)"),
        ('"stream": 7', '"stream": 7.0', "a stream that is no integer"),
        ('"correlation": 25', '"correlation": 25\n', "an argument line broken"),
        ('"cat": "kernel", "name"', '"name": "k", "cat"', "another key order"),
        ('"ph": "X"', '"ph":  "X"', "a complete event in another spacing (found by fuzzing)"),
        ('"ph": "X"', '"p\\u0068": "X"', "a phase key spelled with an escape"),
        ("\n  }", "\n }", "the event's closing brace elsewhere"),
    ],
)
def test_the_scan_refuses_what_it_cannot_read_exactly(old: str, new: str, why: str) -> None:
    text = _event('"device": 0, "stream": 7, "correlation": 25, "grid": [1, 1]')
    assert _scan(text.encode()) is not None
    assert old in text
    assert _scan(text.replace(old, new, 1).encode()) is None, why


@needs_scan
def test_a_phase_is_the_top_level_key_of_an_event() -> None:
    """Structure, not layout: `"ph"` as a value, or inside another object, is no event's phase;
    a top-level phase the scan cannot read exactly (another key order, twice, an escaped key)
    gives the batch up to a JSON parser."""
    flow = '  {\n    "ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1, "name": "%s"\n  }'
    text = (_event() + ",\n" + flow % "ph").encode()
    assert _layout_scan(text) == _generic(text) and len(_generic(text)["ts"]) == 1  # type: ignore[index]
    for other in (
        '  {"name": "k", "ph": "X", "cat": "kernel", "pid": 0, "tid": 1, "ts": 1, "dur": 1}',
        '  {"ph": "i", "name": "n", "ph": "X", "cat": "kernel", "ts": 1, "dur": 1}',
        '  {"p\\u0068": "X", "name": "n", "cat": "kernel", "ts": 1, "dur": 1}',
    ):
        assert _scan((_event() + ",\n" + other).encode()) is None, other


@needs_scan
def test_an_event_inside_another_events_args_is_no_event() -> None:
    """Issue 26: an object laid out like a complete event inside an instant event's `args` (or a
    complete event's) was counted as a kernel by both layout scans."""
    fake = _event('"device": 0, "stream": 9')  # exactly the layout of a top-level event
    inner = '  {\n    "ph": "i", "cat": "x", "name": "n", "pid": 0, "tid": 1, "ts": 1,\n' \
        f'    "args": {fake.strip()}\n  }}'  # fmt: skip
    nested = _event('"device": 0, "stream": 7, "meta": ' + fake.strip())
    for text in (_event() + ",\n" + inner, nested):
        raw = text.encode()
        assert orjson.loads(b"[" + raw + b"]")  # JSON, and the fake is a value in it
        got = _layout_scan(raw)
        assert got is None or got == _generic(raw)
        assert len(_generic(raw)["ts"]) == 1  # type: ignore[index]


@needs_scan
def test_a_stream_off_the_gpu_and_runtime_rows_is_left_to_the_generic_path() -> None:
    # HTA counts any event with a stream as GPU work; the generic path keeps it as such
    assert _scan(_event('"stream": 3', cat="cpu_op").encode()) is None
    assert _scan(_event('"device": 3', cat="cpu_op").encode()) is not None


def _generic(text: bytes) -> dict[str, list[Any]] | None:
    """What the orjson path reads from a batch, None when it is not JSON."""
    try:
        events = orjson.loads(b"[" + text.strip(b", \t\r\n") + b"]")
    except ValueError:
        return None
    b = kineto._Builder()
    kineto._generic_events(b, events)
    return b.finish({}).columns()


def _layout_scan(text: bytes) -> dict[str, list[Any]] | None:
    b = kineto._Builder()
    return b.finish({}).columns() if kineto._scan_batch(b, text) else None


_SEED = b",\n".join(
    line.encode()
    for line in (
        _event(),
        _event('"External id": 2,"Record function id": 0, "Ev Idx": 1', cat="cpu_op"),
        _event('      "cbid": 317, "correlation": 25', cat="cuda_runtime"),
        _event('"device": 0, "stream": 7, "bytes": 4096, "correlation": 26', cat="gpu_memcpy"),
        '  {\n    "ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1000.500, "cat": "ac2g",'
        ' "name": "ac2g", "bp": "e"\n  }',
    )
)
_BYTES = b'"\\\n ,.-0123456789eE{}[]:aX\x00\xff'


@needs_scan
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True),
            st.sampled_from(["replace", "insert", "delete"]),
            st.sampled_from(list(_BYTES)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_hostile_edits_read_as_json_reads_them_or_are_refused(
    edits: list[tuple[float, str, int]],
) -> None:
    text = bytearray(_SEED)
    for where, op, byte in edits:
        i = int(where * len(text))
        if op == "replace":
            text[i] = byte
        elif op == "insert":
            text[i:i] = bytes([byte])
        else:
            del text[i]
    fast = _layout_scan(bytes(text))
    if fast is None:
        return
    slow = _generic(bytes(text))
    assume(slow is not None)  # not JSON: the reader would fall back and orjson name the fault
    assert slow is not None
    # orjson reads microseconds as floats: exact to the nanosecond below 2**43 us
    assume(all(abs(v) < 2**43 * 1000 for k in ("ts", "dur") for v in fast[k]))
    assert fast == slow


@needs_scan
def test_every_prefix_of_a_batch_is_read_or_refused() -> None:
    whole = _layout_scan(_SEED)
    assert whole is not None and len(whole["ts"]) == 4
    for cut in range(len(_SEED) + 1):
        fast = _layout_scan(_SEED[:cut])
        if fast is not None:  # then it read the whole events before the cut, and no more
            end = _SEED.rfind(b"\n  }", 0, cut)
            assert fast == _layout_scan(_SEED[: end + 4] if end >= 0 else b"")


@needs_scan
def test_the_builders_layout_takes_the_scan(tmp_path: Path) -> None:
    b = training_trace(rank=4)
    f = write_kineto_stream(tmp_path / "s.json.gz", b.meta(), iter(b.events))
    raw = gzip.decompress(f.read_bytes())
    for text in _batches(raw):
        assert _scan(text) is not None
