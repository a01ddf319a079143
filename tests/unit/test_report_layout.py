"""The HTML report's layout (structure, not pixels): several runs open with what changed (the
verdict `compare` prints) and a short table of what matters, the whole comparison folded below;
advice said once; the per-rank table grows down, not off the page; charts as wide as the page
with text that is never scaled (11 px at 640 px as at 1280 px), time axes with values in one
unit, legends off the curves; kernels of one short name told apart; no histogram of two steps;
a step picture's legend that names only the rows it draws. Checked in headless Chromium too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from orchestrator.analysis import analyze_paths, compare, write_report
from orchestrator.analysis.presentation.report import HIST_MIN_STEPS, tick_label, time_unit
from tests.unit.test_analysis_report import nsys_run

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "nsys_h100"
TRACES = DATA / "traces"
DDP = DATA / "ddp_h200" / "kineto_straggler"
CPU = DATA / "nsys_cpu" / "smoke-profiled.sqlite"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("reports")
    runs = {
        "two": [analyze_paths([H100 / "baseline"], label="baseline"),
                analyze_paths([H100 / "workers4"], label="workers4")],
        "three": [analyze_paths([H100 / "baseline"], label="baseline"),
                  analyze_paths([H100 / "workers4"], label="workers4"),
                  analyze_paths([TRACES / "baseline"], label="kineto")],
        "ddp": [analyze_paths([DDP], label="ddp")],
        "cpu": [analyze_paths([CPU], label="cpu")],
        "kineto": [analyze_paths([TRACES / "baseline"], label="kineto")],
    }  # fmt: skip
    return {k: write_report(ms, out / k, k)["html"] for k, ms in runs.items()}


def _html(reports: dict[str, Path], name: str) -> str:
    return reports[name].read_text()


def test_several_runs_open_with_what_changed_then_what_matters(reports: dict[str, Path]) -> None:
    html = _html(reports, "two")
    c = compare([analyze_paths([H100 / "baseline"]), analyze_paths([H100 / "workers4"])])
    finding = c.changes[0].finding
    changed = html.index('id="what-changed"')
    key = html.index('id="key-metrics"')
    every = html.index('<details id="all-metrics">')
    first_run = html.index("<h2>baseline")
    assert html.index("<h2>") == html.index("<h2>What changed")
    assert changed < html.index(unescape(finding).replace("'", "&#39;")) < key < every < first_run
    rows = re.findall(
        r"<tr id=\"key-[^\"]*\"><td class=\"name\"><a [^>]*>([^<]*)</a>", html[key:every]
    )
    assert 3 <= len(rows) <= 10
    # one step figure (the traced steps' mean), then the workload's own throughput where its
    # metrics.json lies beside the export (nsys exports fold it in too, issue 35)
    assert rows[:4] == [
        "step time mean", "throughput (workload)", "idle", "memcpy share of GPU activity",
    ]  # fmt: skip
    # each figure of the short table is defined one click away, under it
    defs = html[html.index('id="key-definitions"') : every]
    assert 'id="def-step_time_mean_ms"' in defs and "traced training-step ranges" in defs
    assert 'href="#def-step_time_mean_ms"' in html[changed:key]  # from "what changed" too
    # the long table is behind a fold, with every row
    folded = html[every : html.index("</details>", every)]
    assert folded.count('<tr><td class="name">') == len(c.rows)
    # three runs: one line of what changed per run against the first
    three = _html(reports, "three")
    block = three[three.index('id="what-changed"') : three.index('id="key-metrics"')]
    assert block.count("against A:") == 2  # three runs: letters, with the legend
    assert "not measured" in three and "the sources differ" in block


def test_advice_is_said_once(reports: dict[str, Path]) -> None:
    html = _html(reports, "ddp")
    verdict = html[html.index('id="verdict"') : html.index("</div>", html.index('id="verdict"'))]
    assert "One rank holds the others back" in verdict
    # the straggler, the overlap and the data-loader advice are in the verdict: not repeated
    # below it (no "More advice" is left). No sync-overhead: rank 0's syncs (67 % of its span)
    # wait for NCCL kernels that run, 0.1 % of the span with the GPU idle (issue 28)
    assert html.count("starts its collectives last in 100% of 86 matched") == 1
    assert html.count("the GPU waits 101.3 ms per step for input") == 1
    assert "<h3>More advice" not in html and "sync-overhead" not in html
    assert 'id="straggler"' not in html


def test_the_per_rank_table_grows_down(reports: dict[str, Path]) -> None:
    html = _html(reports, "ddp")
    table = html[
        html.index('<table class="ranks">') : html.index(
            "</table>", html.index('<table class="ranks">')
        )
    ]
    head = re.findall(r"<th[^>]*>([^<]*)</th>", table.split("</tr>")[0])
    assert head == ["metric", "rank 0", "rank 1"]
    rows = table.split("</tr>")[1:-1]
    assert len(rows) >= 10 and all(r.count("<td") == 3 for r in rows)


def test_charts_fill_the_page_without_scaling_their_text(reports: dict[str, Path]) -> None:
    html = _html(reports, "ddp")
    svgs = re.findall(r"<svg class=\"plot\"[^>]*>", html)
    assert len(svgs) >= 6
    for tag in svgs:
        assert 'width="100%"' in tag and "viewBox" not in tag and 'font-size="11"' in tag
    assert not re.search(r'<text[^>]*font-size="[0-9]"', html)  # nothing below 10 px
    assert "min-width: 820px" not in html


def test_the_busy_chart_has_a_time_axis_and_its_legend_below(reports: dict[str, Path]) -> None:
    html = _html(reports, "ddp")
    start = html.index("<title>GPU busy fraction over time</title>")
    svg = html[start : html.index("<h3>", start)]
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert {"0", "100 ms", "200 ms", "300 ms"} <= set(labels)
    plot_bottom = max(
        int(y) + int(h)
        for y, h in re.findall(r'<svg x="0" y="(\d+)" width="100%" height="(\d+)"', svg)
    )
    for who in ("rank 0", "rank 1"):
        y = re.search(rf'<text x="[^"]*" dx="14" y="(\d+)">{who}</text>', svg)
        assert y is not None and int(y.group(1)) > plot_bottom  # below the plot, not on a curve


@pytest.mark.parametrize(
    ("width_ns", "ticks"),
    [
        (290_000_000, ["0", "100 ms", "200 ms"]),
        (2_500_000, ["0", "0.5 ms", "1 ms", "1.5 ms", "2 ms", "2.5 ms"]),
        (1_500_000, ["0", "500 µs", "1000 µs", "1500 µs"]),
        (45_000, ["0", "10 µs", "20 µs", "30 µs", "40 µs"]),
        (4_000_000_000, ["0", "1 s", "2 s", "3 s", "4 s"]),
    ],
)
def test_time_axes_read_in_one_unit_without_needless_decimals(
    width_ns: int, ticks: list[str]
) -> None:
    from orchestrator.analysis.presentation.report import _ticks

    unit, factor = time_unit(width_ns)
    assert [tick_label(t, unit, factor) for t in _ticks(width_ns)] == ticks


def test_step_picture_axis_starts_at_0_without_decimals(reports: dict[str, Path]) -> None:
    html = _html(reports, "two")
    view = re.search(r'<div class="view">(<svg.*?</svg>)</div>', html, re.S)
    assert view is not None
    labels = re.findall(
        r'<text[^>]*text-anchor="(?:start|middle|end)"[^>]*>([^<]*)</text>', view.group(1)
    )
    assert labels[:3] == ["0", "100 ms", "200 ms"]
    assert not any(re.search(r"\.\d+ ms|0 ns", x) for x in labels)


def test_kernels_of_one_short_name_are_distinct_rows(reports: dict[str, Path]) -> None:
    html = _html(reports, "two")
    table = html[html.index('<table class="kernels">') :]
    table = table[: table.index("</table>")]
    names = re.findall(r'<td class="name" title="[^"]*">([^<]*)</td>', table)
    assert len(names) == 15 and len(set(names)) == len(names)
    assert any(" · " in n for n in names)


def test_no_histogram_of_two_steps(reports: dict[str, Path], tmp_path: Path) -> None:
    html = _html(reports, "two")
    dist = html[html.index("<h3>Step-time distribution") :]
    assert "too few steps for a histogram" in dist and "Step-time distribution, rank" not in dist
    many = analyze_paths(
        [nsys_run(tmp_path / "s.sqlite", idle_gap=1000, copies=0, sgemm=False, um=0)]
    )
    assert many.ranks[0].steps is not None and many.ranks[0].steps.count >= HIST_MIN_STEPS
    out = write_report([many], tmp_path / "r", "t")["html"].read_text()
    assert "<title>Step-time distribution, rank 0</title>" in out


def test_the_step_legend_names_only_the_rows_drawn(reports: dict[str, Path]) -> None:
    cpu = _html(reports, "cpu")
    legend = cpu[cpu.index("<h3>One step on the timeline") :]
    legend = legend[: legend.index("</p>")]
    assert "NVTX ranges purple" in legend
    for absent in ("GPU streams", "copies by direction", "CPU threads teal", "blocking waits"):
        assert absent not in legend, absent
    gpu = _html(reports, "ddp")
    assert "GPU streams (kernels green, NCCL blue)" in gpu and "CPU threads teal" in gpu


def test_gpu_side_ranges_sit_beside_their_cpu_side(reports: dict[str, Path]) -> None:
    html = _html(reports, "kineto")
    table = html[html.index('<table class="ranges">') :]
    table = table[: table.index("</table>")]
    assert "backward [gpu]" not in table and ">backward</td>" in table
    assert "GPU side, total" in table and "autograd threads" in html


def test_settings_are_shown_with_their_source(reports: dict[str, Path]) -> None:
    html = _html(reports, "two")
    settings = re.search(r'<p class="muted" id="settings">(.*?)</p>', html, re.S)
    assert settings is not None
    assert 'title="metrics.json: config.num_workers = 0">data-loader workers 0' in settings.group(1)


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return found


@pytest.mark.parametrize("name", ["two", "ddp", "cpu"])
def test_at_640_px_nothing_overflows_and_chart_text_stays_readable(
    reports: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """Chromium lays the report out in a 640 px frame: the page does not grow sideways, no step
    picture needs more than its box, and no chart text is drawn below 10 px."""
    chromium = _chromium()
    probe = tmp_path / "probe.html"
    probe.write_text(
        "<!DOCTYPE html><html><body style='margin:0'>"
        f"<iframe id='f' src='{reports[name].as_uri()}' style='width:640px;height:600px'></iframe>"
        "<pre id='out'>pending</pre><script>"
        "document.getElementById('f').addEventListener('load', function () {"
        " var d = this.contentDocument, page = d.documentElement, small = 99, views = 0;"
        " d.querySelectorAll('svg.plot text').forEach(function (t) {"
        "  var h = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;"
        "  if (t.textContent.trim()) small = Math.min(small, h); });"
        " d.querySelectorAll('.view').forEach(function (v) {"
        "  views = Math.max(views, v.scrollWidth - v.clientWidth); });"
        " document.getElementById('out').textContent = JSON.stringify({"
        "  page: [page.scrollWidth, page.clientWidth], small: small, views: views}); });"
        "</script></body></html>"
    )
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--virtual-time-budget=10000", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    m = re.search(r"<pre id=\"out\">(\{.*?\})</pre>", dom.stdout)
    assert m, dom.stdout[-2000:] + dom.stderr[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"'))
    assert got["page"][0] <= got["page"][1]
    assert got["views"] == 0
    assert 10 <= got["small"] < 99
