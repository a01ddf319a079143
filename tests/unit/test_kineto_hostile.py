"""Hostile Kineto traces (issue 26, class 2; issue 24, item 5): structure, not layout; any integer
a trace holds; times that do not fit; bounded memory on gzip bombs; text that is not JSON. Every
case is read with the compiled scan and without it (GH_RUN_NO_NATIVE_SCAN: orjson for every
batch): the same answer both ways, and the answer of a JSON parser's reading of the document, or
one sentence (exit 2), never an internal error or another number."""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.analysis.readers import kineto, kineto_scan, tracetext
from orchestrator.core.errors import UserError
from tests.budget import examples
from tests.fixtures.kineto_builder import kineto_event_text

REPO = Path(__file__).resolve().parents[2]


def _both(path: Path) -> Iterator[tuple[str, Any]]:
    """(path taken, load_trace's result or the UserError) with the compiled scan and without."""
    lib = kineto_scan._LIB
    for label, native in (("scan", lib), ("orjson", None)):
        kineto_scan._LIB = native
        try:
            yield label, kineto.load_trace(path)
        except UserError as exc:
            yield label, exc
        finally:
            kineto_scan._LIB = lib


def _x(
    name: str = "k", cat: str = "kernel", ts: Any = 1000.5, dur: Any = 2.25, **args: Any
) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 7, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _write(path: Path, events: list[dict[str, Any]] | list[str], layout: str = "kineto") -> Path:
    """A trace in libkineto's layout (events as dicts or as their text) or json.dumps'."""
    if layout == "json":
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
        return path
    body = ",\n".join(e if isinstance(e, str) else kineto_event_text(e) for e in events)
    path.write_text(
        '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + '\n  ],\n  "traceName": "t"\n}'
    )
    return path


def _reference(path: Path) -> kineto.KinetoTrace:
    """Python's json reading the whole document, its events put in columns."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return kineto.from_json(json.loads(fh.read()))


# ---- structure ------------------------------------------------------------------------------
def test_memory_peak_comes_from_memory_records_only(tmp_path: Path) -> None:
    """`[memory]` as a kernel's name, as a key inside an event's args, or as the name of a record
    of another phase is no memory sample (issue 26: a peak of 1e15 bytes from such text)."""
    real = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
            "tid": 7, "ts": 5, "args": {"Total Allocated": 4096, "Device Type": 1}}  # fmt: skip
    fakes = [
        _x(name="[memory]", **{"Total Allocated": 10**15, "Device Type": 1}),
        _x(**{"[memory]": {"Total Allocated": 10**15, "Device Type": 1}}),
        {**real, "ph": "n", "args": {"Total Allocated": 10**15, "Device Type": 1}},
        {**real, "args": {"Total Allocated": 10**15, "Device Type": 0}},  # not CUDA
    ]
    for layout in ("kineto", "json"):
        f = _write(tmp_path / f"m-{layout}.json", [real, *fakes], layout)
        for label, got in _both(f):
            assert not isinstance(got, UserError), (layout, label, got)
            assert got.peak == 4096, (layout, label)
        assert _reference(f).peak == 4096


def test_text_that_is_not_json_between_events_is_refused(tmp_path: Path) -> None:
    good = kineto_event_text(_x())
    refused = 0
    for junk in ("garbage", ",", '"a"', "1", "{}}", "][", "{} {}", "nul", "1.e5"):
        for text in (f"{good},\n  {junk},\n{good}", f"{good}\n  {junk}\n{good}",
                     f"{good},\n  {junk}", f"{junk},\n{good}"):  # fmt: skip
            f = _write(tmp_path / "j.json", [text])
            try:
                json.loads(f.read_bytes())
                continue  # JSON after all (`{..}\n ,\n{..}`): not this test's case
            except ValueError:
                refused += 1
            for label, got in _both(f):
                assert isinstance(got, UserError), (junk, text, label)
                assert "not a readable PyTorch-profiler trace" in str(got)
    assert refused >= 25


# ---- any integer ----------------------------------------------------------------------------
IDS = [0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32 + 7, 2**53 + 1, 2**63 - 1, 2**64 - 2]


def _as64(v: int) -> int:
    return v - 2**64 if v >= 2**63 else v


@pytest.mark.parametrize("layout", ["kineto", "json"])
def test_ids_keep_their_64_bits(tmp_path: Path, layout: str) -> None:
    """Stream, device, pid, tid and correlation ids of 2^31 and more are read exactly (one layout
    raised OverflowError on them, the other cut stream 2^32 + 7 to 7); an unsigned id above
    2^63 - 1 keeps its 64 bits (the int64 of the same bits)."""
    events = []
    for i, v in enumerate(IDS):
        ev = _x(name=f"k{i}", device=v, stream=v, correlation=v)
        ev["pid"], ev["tid"] = v, v
        events.append(ev)
    f = _write(tmp_path / "ids.json", events, layout)
    want = [_as64(v) for v in IDS]
    answers = []
    for label, got in _both(f):
        assert not isinstance(got, UserError), (label, got)
        cols = got.columns()
        for col in ("pid", "tid", "stream", "corr", "device"):
            assert cols[col] == want, (label, col)
        answers.append(cols)
        tl = kineto.to_timeline(got, f)
        assert sorted(tl.gpu.stream.tolist()) == sorted(want)
    assert answers[0] == answers[1] == _reference(f).columns()


@pytest.mark.parametrize("field", ["stream", "correlation", "device", "pid"])
def test_an_id_beyond_64_bits_is_one_sentence(tmp_path: Path, field: str) -> None:
    ev = _x(stream=7)
    if field == "pid":
        ev["pid"] = 2**64
    else:
        ev["args"][field] = 2**64 + 5
    f = _write(tmp_path / "big.json", [_x(), ev])
    for label, got in _both(f):
        assert isinstance(got, UserError), label
        assert "beyond the 64 bits" in str(got) and str(f) in str(got)


@pytest.mark.parametrize("ts, dur", [(9.3e15, 1.0), (-9.3e15, 1.0), (9.2e15, 1e14), (1.0, 9.3e15)])
def test_times_past_int64_nanoseconds_are_refused(tmp_path: Path, ts: float, dur: float) -> None:
    """A timestamp whose nanoseconds do not fit int64 (issue 26: a span starting at -9.2e18,
    exit 0), or an end (ts + dur) that does not: one sentence, both paths."""
    f = _write(tmp_path / "t.json", [_x(), _x(ts=ts, dur=dur)], "json")
    for label, got in _both(f):
        if not isinstance(got, UserError):
            with pytest.raises(UserError) as err:
                kineto.to_timeline(got, f)
            got = err.value
        assert "64-bit nanoseconds" in str(got), label


def test_a_negative_duration_is_left_out_with_a_note(tmp_path: Path) -> None:
    """As the nsys reader drops rows whose end is before their start (issue 26: subtracted from
    kernel time silently)."""
    events = [_x(ts=1000.0, dur=10.0), _x(ts=2000.0, dur=-500.0), _x(ts=3000.0, dur=5.0)]
    for layout in ("kineto", "json"):
        f = _write(tmp_path / f"n-{layout}.json", events, layout)
        for label, got in _both(f):
            assert not isinstance(got, UserError)
            tl = kineto.to_timeline(got, f)
            assert tl.gpu.size == 2 and int((tl.gpu.end - tl.gpu.start).sum()) == 15_000, label
            assert any("1 events with a negative duration left out" in n for n in tl.notes)


# ---- what a machine without gcc reads -------------------------------------------------------
@pytest.mark.parametrize("bad", [b"k\nx", b"k\xffx", b"k\x00x", b"\xed\xa0\x80"])
def test_a_name_that_is_not_json_text_is_one_sentence(tmp_path: Path, bad: bytes) -> None:
    """A name cut by a raw newline, or holding bytes that are not UTF-8 (issue 26: an internal
    error without gcc)."""
    text = kineto_event_text(_x()).encode().replace(b'"name": "k"', b'"name": "' + bad + b'"')
    f = tmp_path / "n.json"
    f.write_bytes(b'{\n  "traceEvents": [\n' + text + b"\n  ]\n}")
    for label, got in _both(f):
        assert isinstance(got, UserError), label
        assert "not a readable PyTorch-profiler trace" in str(got) and "\n" not in str(got)


# ---- bounded memory -------------------------------------------------------------------------
def _bomb(path: Path, where: str) -> Path:
    """30 KB of gzip that expands to 30 MB of tiny objects, in the metadata or in one event."""
    with gzip.open(path, "wb", compresslevel=9) as fh:
        if where == "metadata":
            fh.write(b'{"schemaVersion": 1, "deviceProperties": [' + b"{}," * 10**7)
            fh.write(b'{}], "traceEvents": [' + kineto_event_text(_x()).encode() + b"]}")
        else:
            ev = kineto_event_text(_x(stream=7)).encode()
            fh.write(b'{\n  "schemaVersion": 1,\n  "traceEvents": [\n')
            fh.write(ev.replace(b'"stream": 7', b'"x": [' + b"{}," * 10**7 + b'{}], "stream": 7'))
            fh.write(b'\n  ],\n  "traceName": "x"\n}')
    return path


PROBE = """
import sys
from pathlib import Path
from orchestrator.analysis.readers import kineto
from orchestrator.core.errors import UserError
try:
    kineto.load_trace(Path(sys.argv[1]))
    code = 0
except UserError as exc:
    print(exc, file=sys.stderr)
    code = 2
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(int(hwm.split()[1]) // 1024)
sys.exit(code)
"""


@pytest.mark.parametrize("where", ["metadata", "event"])
@pytest.mark.parametrize("native", [True, False])
def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path, where: str, native: bool) -> None:
    """Under a 700 MB address-space limit (`ulimit -v`): one sentence, never a signal (issue
    26: 1.06 GB of RSS, and SIGSEGV under a limit); the peak RSS (the process's own VmHWM)
    stays under 300 MiB. The CLI's exit code for it is 2 (test_bounded_input)."""
    f = _bomb(tmp_path / f"{where}.json.gz", where)
    assert f.stat().st_size < 100_000

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (700 << 20, 700 << 20))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    if not native:
        env["GH_RUN_NO_NATIVE_SCAN"] = "1"
    res = subprocess.run(
        [sys.executable, "-c", PROBE, str(f)],
        cwd=REPO, env=env, capture_output=True, text=True, preexec_fn=limit, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    msg = res.stderr.strip()
    assert msg.startswith(str(f)) and "\n" not in msg and "Traceback" not in msg, msg
    assert "MiB" in msg
    assert int(res.stdout) < 300, res.stdout


# ---- the structural splitter ----------------------------------------------------------------
NAMES = st.text(alphabet=st.sampled_from('a"\\\\/{}[],:\n\t\u00e9\u2028 '), max_size=12)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(NAMES, min_size=1, max_size=30), chunk=st.integers(1, 64))
def test_escaped_quotes_and_backslashes_split_as_json_reads_them(
    names: list[str], chunk: int
) -> None:
    """Names full of escaped quotes and backslash runs, the text cut into chunks of any size
    (runs across chunk boundaries): the structural splitter's events are json's events (it
    scanned escapes one Python loop turn per quote: 2-3 MB/s)."""
    events = [_x(name=n) for n in names]
    raw = json.dumps({"traceEvents": events, "x": names}).encode()
    saved = tracetext.SCAN_BYTES
    tracetext.SCAN_BYTES = chunk
    try:
        pieces = list(tracetext.split(iter([raw]), "structure"))
    finally:
        tracetext.SCAN_BYTES = saved
    got: list[Any] = []
    first = True
    for p in pieces:
        if p.kind == "events":
            body = kineto._structure_body(p.text, first)
            assert body is not None
            if body:
                first = False
                got += json.loads(b"[" + body + b"]")
    assert got == events
    head = b"".join(p.text for p in pieces if p.kind == "head")
    tail = b"".join(p.text for p in pieces if p.kind == "tail")
    assert json.loads(head + tail) == {"traceEvents": [], "x": names}
