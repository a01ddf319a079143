"""A page's width as a real browser lays it out: Debian's Chromium, headless, no network, a
fresh profile each time. The page is framed by a test-only probe page at the viewport's width
(the reports themselves carry no script and forbid one), and the probe reads the framed
document's scrollWidth and clientWidth once it has loaded: a page wider than its window
scrolls sideways (scrollWidth > clientWidth)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--virtual-time-budget=10000",
)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return found


def page_width(page: Path, viewport: int, scratch: Path) -> tuple[int, int]:
    """(scrollWidth, clientWidth) of `page`'s document in a window `viewport` px wide."""
    scratch.mkdir(parents=True, exist_ok=True)
    probe = scratch / f"probe-{viewport}.html"
    probe.write_text(
        "<!DOCTYPE html><html><body style='margin:0'>"
        f"<iframe id='f' src='{page.resolve().as_uri()}' "
        f"style='width:{viewport}px;height:900px;border:0'></iframe>"
        "<pre id='out'>pending</pre><script>"
        "document.getElementById('f').addEventListener('load', function () {"
        " var e = this.contentDocument.documentElement;"
        " document.getElementById('out').textContent ="
        "  JSON.stringify([e.scrollWidth, e.clientWidth]); });"
        "</script></body></html>"
    )
    res = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={scratch / f'profile-{viewport}'}",
            f"--window-size={viewport + 40},1000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    m = re.search(r"<pre id=\"out\">(\[\d+,\d+\])</pre>", res.stdout)
    assert m, res.stdout[-2000:] + res.stderr[-2000:]
    scroll, client = json.loads(m.group(1))
    return int(scroll), int(client)
