"""Bounded reading of Chrome-trace JSON (Kineto) files: memory in proportion to events, not bytes.

A trace is never held whole. `chunks` streams the file's text (gzip decompressed on the fly)
in `CHUNK_BYTES` pieces and refuses, in one sentence, a text that grows past the ceiling
(`max_trace_bytes`: `--max-trace-size`, `GH_RUN_MAX_TRACE_SIZE`, default `DEFAULT_MAX_TRACE`),
so a 3 MB `.json.gz` that expands to many GiB costs the ceiling's worth of reading and no
memory. `split` turns that text into `Piece`s: the document's text around the `traceEvents`
array (`head`, `tail`: what the metadata is read from) and batches of whole events, which the
Kineto reader parses into columns one batch at a time.

Two ways to find event boundaries:
- libkineto's layout: every event is written as `\\n  {` ... `\\n  }` at an indent of two
  spaces, and JSON strings cannot hold a raw newline, so `\\n  },\\n  {` is a boundary wherever
  it appears (`bytes.rfind`, no scan of the text);
- any other layout (`json.dumps` output, rewritten traces): `Structure` tracks strings and
  brace depth over the bytes with numpy (structural characters only) and cuts after each
  top-level event.
The first is tried when the head looks like libkineto's; the reader falls back to the second
(`LayoutError`) when a batch it got does not parse.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchestrator.core import units
from orchestrator.core.errors import UserError

CHUNK_BYTES = 8 << 20
# one event (or the white space between two) larger than this is refused: the splitter holds it
# whole, and a JSON parser may make Python objects of it (orjson: up to ~60 bytes for each 3
# bytes of `{},`); the largest event of the public traces of HTA, TraceLens and our recordings
# is far smaller (issue 26: 30 KB of gzip drove the reader to 1 GB with 256 MiB here)
MAX_EVENT_BYTES = 8 << 20
# the document's text around the events array (its metadata: tens of KB in real traces) larger
# than this is refused: it is parsed whole into Python objects
MAX_HEAD_BYTES = 4 << 20
# batches for the generic (orjson) path stay small: orjson's objects take ~11x their text
GENERIC_BATCH_BYTES = 4 << 20
DEFAULT_MAX_TRACE = 8 << 30
MAX_TRACE_ENV = "GH_RUN_MAX_TRACE_SIZE"


def parse_size(text: str, what: str) -> int:
    """A size the user set for `what` (a flag or variable) → bytes, in the one size notation
    (`units.parse_size`: `8GiB`, `512M`, `1.5g`, `1000`); a UserError naming `what` otherwise."""
    try:
        return units.parse_size(text)
    except ValueError:
        raise UserError(
            f"{what}: {text!r} is not a size; write bytes or a number with K, M, G or T"
            " (binary units), e.g. 8GiB"
        ) from None


def max_trace_bytes(value: int | None = None) -> int:
    """The ceiling on a trace's uncompressed text: the value given, else $GH_RUN_MAX_TRACE_SIZE,
    else DEFAULT_MAX_TRACE."""
    if value is not None:
        return value
    env = os.environ.get(MAX_TRACE_ENV)
    if env:
        return parse_size(env, MAX_TRACE_ENV)
    return DEFAULT_MAX_TRACE


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def chunks(path: Path, ceiling: int) -> Iterator[bytes]:
    """The file's text in CHUNK_BYTES pieces, gunzipped when it starts with gzip's magic; a
    UserError once more than `ceiling` bytes of text came out."""
    total = 0
    try:
        with path.open("rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            fh = gzip.GzipFile(fileobj=raw) if gz else raw
            while True:
                # one byte beyond the ceiling is enough to know it is exceeded
                b = fh.read(min(CHUNK_BYTES, ceiling + 1 - total))
                if not b:
                    return
                total += len(b)
                if total > ceiling:
                    kind = "uncompressed text" if gz else "text"
                    raise UserError(
                        f"{path}: the trace's {kind} exceeds the {_gib(ceiling)} ceiling;"
                        f" raise it with --max-trace-size (or {MAX_TRACE_ENV}) if the trace is"
                        " genuine, or profile fewer steps"
                    )
                yield b
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise UserError(
            f"{path}: not a readable PyTorch-profiler trace ({exc}); pass the .json or .json.gz"
            " written by torch.profiler"
        ) from exc


@dataclass
class Piece:
    """A part of the document: `head` / `tail` text around the events array, or `events`
    (whole events separated by commas and white space)."""

    kind: str  # "head" | "events" | "tail"
    text: bytes


class LayoutError(Exception):
    """The text is not in the layout the splitter assumed."""


# libkineto: `  "traceEvents": [` then events at an indent of two spaces
_KINETO_HEAD = re.compile(rb'"traceEvents": (\[)\s*\n  \{\n')
KINETO_CUT = b"\n  },\n  {"
_KINETO_END = b"\n  }\n  ]"


def split(stream: Iterator[bytes], layout: str = "auto") -> Iterator[Piece]:
    """Pieces of a Chrome-trace document (see the module docstring). `layout`: "auto" (libkineto's
    boundaries when the head looks like libkineto's, else the structural scan), "structure"."""
    buf = b""
    it = iter(stream)
    if layout == "auto":
        for chunk in it:
            buf += chunk
            m = _KINETO_HEAD.search(buf)
            if m:
                yield Piece("head", buf[: m.start(1) + 1])
                yield from _kineto_split(buf[m.start(1) + 1 :], it)
                return
            if len(buf) >= CHUNK_BYTES or b'"traceEvents"' in buf:
                break
    yield from Structure().split(buf, it)


def _kineto_split(buf: bytes, it: Iterator[bytes]) -> Iterator[Piece]:
    """libkineto layout: cut at `\\n  },\\n  {`; the array ends at `\\n  }\\n  ]`."""
    seen = 0  # the end was not in buf[:seen] (a later chunk cannot change that)
    while True:
        end = buf.find(_KINETO_END, max(0, seen - len(_KINETO_END)))
        seen = len(buf)
        if end >= 0:
            yield Piece("events", buf[: end + 4])
            yield Piece("tail", buf[end + 7 :])
            for chunk in it:
                yield Piece("tail", chunk)
            return
        if len(buf) >= CHUNK_BYTES:
            cut = buf.rfind(KINETO_CUT)
            if cut > 0:
                yield Piece("events", buf[: cut + 4])
                buf = buf[cut + 5 :]
                seen = len(buf)
            elif len(buf) > CHUNK_BYTES + MAX_EVENT_BYTES:  # no boundary of this layout
                raise LayoutError("no event boundary of libkineto's layout in 16 MiB")
        nxt = next(it, None)
        if nxt is None:
            raise LayoutError("no end of the traceEvents array in libkineto's layout")
        buf += nxt


_QUOTE, _BSLASH, _OPEN_O, _CLOSE_O, _OPEN_A, _CLOSE_A = b'"\\{}[]'
_LUT = np.zeros(256, dtype=bool)
_LUT[[_QUOTE, _BSLASH, _OPEN_O, _CLOSE_O, _OPEN_A, _CLOSE_A]] = True
_DELTA = np.zeros(256, dtype=np.int64)
_DELTA[[_OPEN_O, _OPEN_A]] = 1
_DELTA[[_CLOSE_O, _CLOSE_A]] = -1
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*$')


class Structure:
    """The structural scan of any JSON layout: string state and brace depth carried across
    chunks, vectorised over the structural characters of each chunk."""

    def __init__(self) -> None:
        self.in_str = False
        self.escape = False  # the previous chunk ended inside a string on an odd backslash run
        self.depth = 0
        self.arr_depth: int | None = None  # depth inside the events array
        self.phase = "head"

    def _scan(self, b: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, characters and depth-after of the structural characters outside strings."""
        a = np.frombuffer(b, dtype=np.uint8)
        pos = np.flatnonzero(_LUT[a])
        ch = a[pos]
        quote = ch == _QUOTE
        if (ch == _BSLASH).any() or self.escape:
            quote = self._unescaped(a, pos, ch, quote)
        # string state before each structural character: carried state xor quotes so far
        q = np.cumsum(quote, dtype=np.int64)
        before = (q - quote + self.in_str) & 1
        outside = (before == 0) & ~quote & (ch != _BSLASH)
        pos, ch = pos[outside], ch[outside]
        depth = self.depth + np.cumsum(_DELTA[ch])
        self.in_str = bool((int(q[-1]) + self.in_str) & 1) if q.size else self.in_str
        self.escape = self._ends_escaped(a)
        if depth.size:
            self.depth = int(depth[-1])
        return pos, ch, depth

    def _unescaped(
        self, a: np.ndarray, pos: np.ndarray, ch: np.ndarray, quote: np.ndarray
    ) -> np.ndarray:
        """Quotes that end or start a string: not preceded by an odd run of backslashes (the run
        may begin in the previous chunk: `self.escape`). Vectorised over the backslashes and the
        quotes (one Python turn per quote took 2-3 MB/s of text full of escaped quotes)."""
        quote = quote.copy()
        bpos = np.flatnonzero(ch == _BSLASH)
        bpos = pos[bpos]  # positions of the backslashes in the chunk
        qi = np.flatnonzero(quote)
        qpos = pos[qi]
        if bpos.size == 0:
            if self.escape and qpos.size and qpos[0] == 0:
                quote[qi[0]] = False
            return quote
        # the first backslash of the run each backslash belongs to
        first = np.ones(bpos.size, dtype=bool)
        first[1:] = bpos[1:] != bpos[:-1] + 1
        run_start = bpos[np.maximum.accumulate(np.where(first, np.arange(bpos.size), 0))]
        # the backslash right before each quote, if any, and the length of its run
        j = np.maximum(np.searchsorted(bpos, qpos) - 1, 0)
        has = bpos[j] == qpos - 1
        run = np.where(has, qpos - run_start[j], 0)
        # a run that starts the chunk continues the previous chunk's
        reaches = np.where(has, run_start[j] == 0, qpos == 0)
        run += reaches & self.escape
        quote[qi[run % 2 == 1]] = False
        return quote

    def _ends_escaped(self, a: np.ndarray) -> bool:
        if not self.in_str or a.size == 0 or a[-1] != _BSLASH:
            return False
        run = 0
        while run < a.size and a[a.size - 1 - run] == _BSLASH:
            run += 1
        return bool((run + (1 if run == a.size and self.escape else 0)) % 2)

    def split(self, buf: bytes, it: Iterator[bytes]) -> Iterator[Piece]:
        head = bytearray()
        pending = b""  # scanned, not yet handed out
        for more in _chain(buf, it):
            if self.phase == "tail":
                yield Piece("tail", more)
                continue
            base = len(pending)
            pending += more
            pos, ch, depth = self._scan(more)
            pos += base
            cut = 0
            if self.phase == "head":
                start = self._events_start(pending, pos, ch, depth, head)
                if start is None:
                    head += pending
                    pending = b""
                    if len(head) > MAX_HEAD_BYTES:
                        raise LayoutError(
                            f"more than {MAX_HEAD_BYTES >> 20} MiB before the events"
                            if b'"traceEvents"' in head
                            else f"no traceEvents list in the first {MAX_HEAD_BYTES >> 20} MiB"
                            " (real traces hold tens of KB of metadata before it)"
                        )
                    continue
                head += pending[: start + 1]
                yield Piece("head", bytes(head))
                self.phase = "events"
                keep = pos > start
                pos, ch, depth = pos[keep], ch[keep], depth[keep]
                cut = start + 1
            assert self.arr_depth is not None
            ends = pos[(ch == _CLOSE_O) & (depth == self.arr_depth)]
            closed = pos[(ch == _CLOSE_A) & (depth == self.arr_depth - 1)]
            stop = int(closed[0]) if closed.size else None
            if stop is not None:
                ends = ends[ends < stop]
            for piece_end in _batch_ends(ends, cut, GENERIC_BATCH_BYTES):
                yield Piece("events", pending[cut : piece_end + 1])
                cut = piece_end + 1
            if stop is not None:
                yield Piece("events", pending[cut:stop])
                self.phase = "tail"
                yield Piece("tail", pending[stop:])
                pending = b""
                continue
            pending = pending[cut:]
            rest = pending.strip(b" \t\r\n")
            if len(rest) <= 1 and rest in (b"", b","):
                # only white space between events: nothing to keep but the separator (the
                # reader checks the separators)
                pending = rest
            elif len(pending) > MAX_EVENT_BYTES:
                raise LayoutError(f"an event of more than {MAX_EVENT_BYTES >> 20} MiB")
        if self.phase == "head":
            raise LayoutError("no traceEvents list")
        if self.phase == "events":
            raise LayoutError("the traceEvents array does not end")

    def _events_start(
        self, buf: bytes, pos: np.ndarray, ch: np.ndarray, depth: np.ndarray, head: bytearray
    ) -> int | None:
        """Position of the `[` that opens the events array: the value of a top-level
        `"traceEvents"` key, or a top-level array itself (the Chrome format's array form)."""
        opens = np.flatnonzero(ch == _OPEN_A)
        for i in opens.tolist():
            d = int(depth[i])
            p = int(pos[i])
            if d == 1 and not head and not buf[:p].strip():
                self.arr_depth = 1
                return p
            if d == 2:
                before = (bytes(head[-64:]) + buf[max(0, p - 64) : p])[-64:]
                if _EVENTS_KEY.search(before):
                    self.arr_depth = 2
                    return p
        return None


# the structural scan's arrays take up to ~50 bytes for each structural byte of what it scans
# (`{},{},...`: two in three bytes), so it scans the chunks in pieces of this size
SCAN_BYTES = 1 << 20


def _chain(first: bytes, it: Iterator[bytes]) -> Iterator[bytes]:
    """The text in pieces of at most SCAN_BYTES: what was read ahead, then the rest."""
    for b in itertools.chain([first], it):
        for i in range(0, len(b), SCAN_BYTES):
            yield b[i : i + SCAN_BYTES]


def _batch_ends(ends: np.ndarray, start: int, size: int) -> Iterator[int]:
    """Event ends (positions of their `}`) at which to cut batches of about `size` bytes; the
    last end always (so nothing whole stays behind)."""
    if ends.size == 0:
        return
    mark = start + size
    while True:
        i = int(np.searchsorted(ends, mark))
        if i >= ends.size:
            yield int(ends[-1])
            return
        yield int(ends[i])
        mark = int(ends[i]) + size
