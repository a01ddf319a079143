"""One size notation (issue 27 item 2): `units.parse_size` reads the artifact limits of a cluster
file and the Kineto trace ceiling (`--max-trace-size`, `GH_RUN_MAX_TRACE_SIZE`). Every notation
either caller accepted before they shared the parser stays accepted; each caller keeps its own
wording of a refusal, which names what the user set and how to write it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.analysis.readers import tracetext
from orchestrator.core.errors import UserError
from orchestrator.core.units import format_size, parse_size
from orchestrator.site.limits import SizeLimits

# (text, bytes): binary units in any case, with or without B / iB, spaces around and between
SIZES = [
    ("4096", 4096),
    ("4096B", 4096),
    ("4096 b", 4096),
    ("1000", 1000),
    ("1K", 1 << 10),
    ("1kb", 1 << 10),
    ("1KiB", 1 << 10),
    ("512M", 512 << 20),
    ("512m", 512 << 20),
    ("512MB", 512 << 20),
    ("512 MiB", 512 << 20),
    ("8GiB", 8 << 30),
    ("8 gib", 8 << 30),
    ("10G", 10 << 30),
    ("1.5G", 3 << 29),
    ("1.5g", 3 << 29),
    ("2T", 2 << 40),
    ("2tb", 2 << 40),
    (" 64M ", 64 << 20),
    ("64M\n", 64 << 20),
]
NOT_SIZES = ["lots", "8 parsecs", "", "G", "-1G", "1.G", "1e9", "0", "0K", "0.1", "8G 8G", "8Gb/s"]


@pytest.mark.parametrize(("text", "size"), SIZES)
def test_every_notation_reads_the_same_for_every_caller(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert tracetext.parse_size(text, "--max-trace-size") == size
    limits = SizeLimits(max_file_size=text, max_run_size=text)
    assert limits.file_bytes == limits.run_bytes == size
    assert parse_size(format_size(size)) == size  # the canonical form reads back


@pytest.mark.parametrize("text", NOT_SIZES)
def test_what_is_not_a_size_is_refused_in_each_callers_words(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a size; write e\.g\. 10G or 512M"):
        parse_size(text)
    with pytest.raises(UserError) as err:
        tracetext.parse_size(text, "--max-trace-size")
    assert str(err.value) == (
        f"--max-trace-size: {text!r} is not a size; write bytes or a number with K, M, G or T"
        " (binary units), e.g. 8GiB"
    )
    with pytest.raises(ValidationError, match="is not a size"):
        SizeLimits(max_file_size=text)


def test_the_trace_ceiling_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracetext.MAX_TRACE_ENV, "64MiB")
    assert tracetext.max_trace_bytes() == 64 << 20
    assert tracetext.max_trace_bytes(1000) == 1000  # a value given wins
    monkeypatch.setenv(tracetext.MAX_TRACE_ENV, "lots")
    with pytest.raises(UserError, match=r"^GH_RUN_MAX_TRACE_SIZE: 'lots' is not a size"):
        tracetext.max_trace_bytes()
    monkeypatch.delenv(tracetext.MAX_TRACE_ENV)
    assert tracetext.max_trace_bytes() == tracetext.DEFAULT_MAX_TRACE
