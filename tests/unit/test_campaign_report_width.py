"""Issue 36: the campaign report was 1,502 px wide at 640 and 1280 px viewports: its variant
table (every recorded figure a column, every cell the same 30-word warm-up sentence) ran off
the page. Measured in a real headless Chromium: the page is no wider than its window at either
width, the warm-up's sentence is said once, and the variants' table holds the watched metrics.

The nights are the canary's recorded ones (tests/data/campaign_noise, as
test_campaign_noise_history replays them): 7 variants, every CPU figure and phase recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.campaign import report
from orchestrator.store.db import Store
from tests.browser import page_width
from tests.unit.test_campaign_noise_history import CANARY, _nights, _replay


@pytest.fixture(scope="module")
def canary_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("canary")
    home = tmp / "home"
    mp = pytest.MonkeyPatch()
    mp.setenv("GH_RUN_HOME", str(home))
    try:
        store = Store(home)
        results = _replay(store, home, CANARY, _nights()[:2])
        return report.write(store, results[-1], tmp / "report")["html"]
    finally:
        mp.undo()


@pytest.mark.parametrize("viewport", [640, 1280])
def test_the_campaign_report_fits_its_window(
    canary_report: Path, tmp_path: Path, viewport: int
) -> None:
    scroll, client = page_width(canary_report, viewport, tmp_path)
    assert client <= viewport
    assert scroll <= client, f"{scroll} px of page in a {client} px window"


def test_a_shared_note_is_said_once(canary_report: Path) -> None:
    html = canary_report.read_text()
    assert html.count("of history, the band needs 3") == 1
    table = html[
        html.index('id="variants-table"') : html.index(
            "</table>", html.index('id="variants-table"')
        )
    ]
    header = table[: table.index("</tr>")]
    assert header.count("<th>") + header.count("<th ") == 2 + 2  # variant, state, 2 watched
