"""What a report says, on real recordings: the verdict first (three findings, each with its
number and knob), one idle figure with its window, human units, no percentage on a near-zero
baseline, short labels and kernel names (the full name on hover), CPU-only runs without zeros,
advice in the words of the workload that ran, and one step drawn as the timeline shows it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.analysis import analyze_paths, write_report
from orchestrator.analysis.families import host, step_view
from orchestrator.analysis.metrics import Metrics, StepView
from orchestrator.analysis.presentation.compare import compare
from orchestrator.analysis.presentation.report import NCCL_COLOR
from orchestrator.analysis.readers import nsys_sqlite
from orchestrator.analysis.timeline.kernel_names import short_kernel
from tests.unit.test_analysis_report import cli

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "nsys_h100"
TRACES = DATA / "traces"
CPU = DATA / "nsys_cpu" / "smoke-profiled.sqlite"
DDP = DATA / "ddp_h200" / "kineto_straggler"


def _verdict_block(html: str) -> str:
    start = html.index('<div class="verdict" id="verdict">')
    return html[start : html.index("</div>", start)]


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ms = [analyze_paths([H100 / v], label=str(H100 / v)) for v in ("baseline", "offload")]
    return write_report(ms, tmp_path_factory.mktemp("gpu"), "gpu")


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    m = analyze_paths([CPU], label="cpu only")
    return write_report([m], tmp_path_factory.mktemp("cpu"), "cpu")


def test_the_verdict_comes_first_with_three_numbered_findings(gpu_report: dict[str, Path]) -> None:
    html = gpu_report["html"].read_text()
    run = html.index("<h2>baseline")
    assert run < html.index('id="verdict"', run) < html.index("One step on the timeline", run)
    block = _verdict_block(html[run:])
    items = re.findall(r"<li>(.*?)</li>", block, re.S)
    assert len(items) == 3
    for item in items:
        assert re.search(r"\d", item) and "Knob: <code>" in item
    # the baseline's data wait (the reference workload: its own flag, from metrics.json)
    assert "The GPU waits for input data" in items[0] and "--num-workers 4" in items[0]
    # in the seed's terms: what input costs the GPU per step (issue 28)
    assert "the GPU waits 199.5 ms per step for input" in items[0]
    # the advice is said once: what the verdict shows is not repeated below it
    section = html[run : html.index("<h2>offload", run)]
    assert section.count("ms per step for input") == 1
    assert "<b>data-loader</b>" not in section
    md = gpu_report["md"].read_text()
    first = md.index("## baseline")
    md_section = md[first : md.index("## offload", first)]
    assert "1. **The GPU waits for input data**" in md_section
    assert md_section.count("ms per step for input") == 1


def test_one_idle_figure_with_its_window_and_htas_split_once(
    gpu_report: dict[str, Path], tmp_path: Path
) -> None:
    block = _verdict_block(gpu_report["html"].read_text())
    headline = re.search(r"<p><b>(.*?)</b>", block, re.S)
    assert headline is not None
    assert headline.group(1).count("idle") == 1
    window = "GPU idle 56.3 % of the span: the 367.28 ms from the first to the last GPU activity"
    assert window in headline.group(1)
    assert "it holds the 2 traced steps" in headline.group(1)
    assert block.count("HTA&#39;s temporal breakdown") == 1
    assert "counts the same here" in block  # nsys: HTA's view is the same span
    kin = write_report([analyze_paths([TRACES / "baseline"])], tmp_path / "k", "k")
    kblock = _verdict_block(kin["html"].read_text())
    # Kineto: HTA leaves out the last step's GPU work; both figures say what they count and why
    # they differ
    assert "leaves out the GPU work launched in the last profiled step" in kblock
    assert "of the 376.59 ms span" in kblock and "They differ by 30.7 points" in kblock


def test_human_units_and_no_percentages_on_a_near_zero_baseline(
    gpu_report: dict[str, Path],
) -> None:
    html = gpu_report["html"].read_text()
    md = gpu_report["md"].read_text()
    for text in (html, md):
        assert not re.search(r"\d\.\d+e[+-]\d", text), "a number in exponent notation"
        assert not re.search(r"\d{1,3}(,\d{3}){2,}(\.\d+)? ?%", text), "a huge percentage"
    off = analyze_paths([H100 / "offload"])
    dtoh = next(c for c in off.ranks[0].copies if c.direction == "DtoH")
    assert str(dtoh.bytes) not in html  # bytes read as GiB
    assert "22.50 GiB" in html
    c = compare([analyze_paths([H100 / "baseline"]), off])
    row = next(r for r in c.rows if r.metric == "DtoH")
    assert row.values[0] == pytest.approx(8 / 2**30)  # 8 bytes copied in the baseline
    assert row.delta_rel_pct[1] is None
    assert row.change[1] == "from ~0 (+22.50 GiB)"
    assert "from ~0 (+22.50 GiB)" in html
    zero = next(r for r in c.rows if r.metric == "idle gaps")
    assert zero.change[1].endswith("%")  # an ordinary change stays a percentage


def test_short_run_labels_with_a_legend(gpu_report: dict[str, Path]) -> None:
    html = gpu_report["html"].read_text()
    legend = html[html.index('id="legend"') : html.index("</table>", html.index('id="legend"'))]
    assert f'<td class="name">{H100 / "baseline"}</td>' in legend
    header = html[html.index('<table id="comparison">') :].split("</tr>")[0]
    assert "<th>baseline</th>" in header and "<th>offload</th>" in header
    assert str(H100) not in header
    data = json.loads(gpu_report["json"].read_text())
    assert data["comparison"]["labels"] == [str(H100 / "baseline"), str(H100 / "offload")]


def test_kernel_names_are_short_with_the_full_name_on_hover(gpu_report: dict[str, Path]) -> None:
    html = gpu_report["html"].read_text()
    m = analyze_paths([H100 / "baseline"])
    long = next(k.name for k in m.ranks[0].top_kernels if len(k.name) > 120)
    short = short_kernel(long)
    assert len(short) <= 60 and short != long
    cells = re.findall(r'<td class="name" title="([^"]*)">([^<]*)</td>', html)
    from html import unescape

    assert (long, short) in [(unescape(t), unescape(s)) for t, s in cells]


def test_a_cpu_only_run_says_so_instead_of_zeros(cpu_report: dict[str, Path]) -> None:
    html = cpu_report["html"].read_text()
    md = cpu_report["md"].read_text()
    assert "no GPU timeline in this trace" in _verdict_block(html)
    assert 'id="no-gpu"' in html
    for gone in ("GPU busy over time", "Time breakdown", "busy % of span", "Top kernels"):
        assert gone not in html, gone
    assert "no GPU timeline in this trace" in md and "busy % of span" not in md
    items = re.findall(r"<li>(.*?)</li>", _verdict_block(html), re.S)
    assert items[0].startswith("<b>No GPU timeline in this trace</b>")
    assert any("median step" in i for i in items)


def _rows(v: StepView) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in v.rows:
        out.setdefault(r.kind, []).append(r.label)
    return out


def _check_bounded(v: StepView) -> None:
    width = v.end_ns - v.start_ns
    assert sum(len(r.events) for r in v.rows) <= step_view.MAX_EVENTS
    for r in v.rows:
        # merging loses no event: the counts add up to the events in the window
        assert sum(e.count for e in r.events) == r.source_events
        starts = [e.start_ns for e in r.events]
        assert starts == sorted(starts)
        assert all(0 <= e.start_ns <= e.end_ns <= width for e in r.events)
        assert all(e.busy_ns <= e.end_ns - e.start_ns for e in r.events)


def test_the_step_of_an_nsys_export_has_streams_copies_nvtx_waits_and_threads() -> None:
    m = analyze_paths([H100 / "baseline"])
    v = m.ranks[0].step_view
    assert v is not None
    assert v.window.startswith("step_") and "median of 2 step ranges" in v.window
    rows = _rows(v)
    assert rows["kernels"] == ["stream 7"]
    assert {"copies HtoD", "copies DtoH", "copies DtoD"} <= set(rows["copies"])
    assert rows["memsets"] == ["memsets"] and rows["nvtx"][0] == "NVTX"
    assert rows["waits"] == ["main thread: blocking waits"]
    assert "python3 (main)" in rows["thread"] and len(rows["thread"]) <= step_view.MAX_THREADS
    _check_bounded(v)
    kernels = next(r for r in v.rows if r.kind == "kernels")
    assert kernels.source_events > len(kernels.events)  # tiny neighbours merged
    assert 0 < kernels.busy_ns <= v.end_ns - v.start_ns


def test_the_window_is_the_median_step() -> None:
    tl = nsys_sqlite.read_timelines(CPU)[0]
    steps = sorted(host.step_rows(tl), key=lambda r: r[2])
    name, start, dur = steps[(len(steps) - 1) // 2]
    v = analyze_paths([CPU]).ranks[0].step_view
    assert v is not None and (v.start_ns, v.end_ns) == (start, start + dur)
    assert v.window.startswith(f"{name},")


def test_the_step_of_a_kineto_trace_reads_alike() -> None:
    m = analyze_paths([DDP])
    for r in m.ranks:
        v = r.step_view
        assert v is not None and v.window.startswith("ProfilerStep#")
        rows = _rows(v)
        assert len(rows["kernels"]) == 2  # compute and NCCL streams
        assert any("cudaStreamSynchronize" in e.name for x in v.rows if x.kind == "waits"
                   for e in x.events)  # fmt: skip
        assert rows["thread"] and rows["nvtx"]
        _check_bounded(v)


def test_the_report_draws_the_step_with_hover_and_nccl_in_its_colour(tmp_path: Path) -> None:
    html = write_report([analyze_paths([DDP], label="ddp")], tmp_path, "t")["html"].read_text()
    assert html.count("One step on the timeline") == 1
    svgs = re.findall(r'<div class="view">(<svg.*?</svg>)</div>', html, re.S)
    assert len(svgs) == 2  # one per rank
    assert ">stream 17<" in svgs[0] and ">main thread: blocking waits<" in svgs[0]
    assert f'fill="{NCCL_COLOR}"' in svgs[0]
    assert re.search(r"<title>ncclDevKernel_AllReduce[^<]*(ms|µs)", svgs[0])
    assert "<script" not in html


def test_a_cpu_only_step_has_no_gpu_rows(cpu_report: dict[str, Path]) -> None:
    v = analyze_paths([CPU]).ranks[0].step_view
    assert v is not None
    kinds = {r.kind for r in v.rows}
    assert kinds and not kinds & {"kernels", "copies", "memsets"}
    html = cpu_report["html"].read_text()
    svg = re.search(r'<div class="view">(<svg.*?</svg>)</div>', html, re.S)
    assert svg is not None and "stream" not in svg.group(1) and ">NVTX<" in svg.group(1)


def test_merge_events_keeps_counts_and_busy_time() -> None:
    # 100 events of 1 ns, 1 ns apart, then one long event: a 10 µs window has 12.5 ns slots
    s = np.array([*range(0, 200, 2), 5_000], dtype=np.int64)
    e = np.array([*range(1, 201, 2), 9_000], dtype=np.int64)
    names = np.array([0] * 100 + [1], dtype=np.int32)
    out = step_view.merge_events(s, e, names, ["tiny", "long"], 10_000)
    assert [x.name for x in out] == ["tiny", "long"]
    assert out[0].count == 100 and out[0].busy_ns == 100 and out[0].end_ns == 199
    assert (out[1].start_ns, out[1].end_ns, out[1].count) == (5_000, 9_000, 1)
    s2, e2 = np.arange(0, 10_000, 20), np.arange(10, 10_010, 20)
    capped = step_view.merge_events(s2, e2, np.zeros(500, dtype=np.int32), ["k"], 10_000, cap=50)
    assert len(capped) <= 50 and sum(x.count for x in capped) == 500


def _copy_run(tmp: Path, spec: str | None) -> Metrics:
    """The baseline export (its data wait fires the data-loader rule) in a run folder of
    gh-run's layout with the given spec.lock.yaml, without the workload's metrics.json."""
    run = tmp / "run"
    (run / "artifacts").mkdir(parents=True)
    shutil.copy(H100 / "baseline" / "baseline.sqlite", run / "artifacts")
    if spec is not None:
        (run / "spec.lock.yaml").write_text(spec)
    return analyze_paths([run / "artifacts"])


@pytest.mark.parametrize(
    ("spec", "kind", "words", "not_words"),
    [
        (
            "workload:\n  kind: nemo\n  script: x.py\n",
            "nemo",
            "model.data.num_workers=4",
            "--num-workers",
        ),
        (
            "workload:\n  kind: command\n  command: python\n  args: [-m, workloads.sft]\n",
            "reference",
            "--num-workers 4",
            "model.data",
        ),
        (
            "workload:\n  kind: command\n  command: bash\n  args: [-c, train.sh]\n",
            "generic",
            "DataLoader(num_workers=4",
            "model.data",
        ),
        (None, "generic", "DataLoader(num_workers=4", "model.data"),
    ],
)
def test_advice_in_the_words_of_the_workload_kind(
    tmp_path: Path, spec: str | None, kind: str, words: str, not_words: str
) -> None:
    from orchestrator.analysis import advise

    m = _copy_run(tmp_path, spec)
    assert m.workload_kind == kind
    knob = next(a.knob for a in advise(m) if a.rule == "data-loader")
    assert words in knob and not_words not in knob
    html = write_report([m], tmp_path / "r", "t")["html"].read_text()
    assert words.replace("<", "&lt;") in _verdict_block(html)


def test_the_reference_workloads_metrics_json_says_reference() -> None:
    m = analyze_paths([H100 / "baseline"])
    assert m.workload_kind == "reference"
    assert m.workload_kind_evidence == "metrics.json: workload = sft (workloads/sft.py)"


def test_analyze_json_adds_the_step_view_and_how_to_open_the_trace() -> None:
    res = CliRunner().invoke(cli(), ["analyze", "--json", str(TRACES / "baseline")])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    # the fields that were there stay; the new ones are added
    for key in ("format", "label", "sources", "ranks", "aggregate", "cross_rank"):
        assert key in data
    r = data["ranks"][0]
    assert {"span_ns", "busy_pct", "timeline", "notes"} <= set(r)
    assert r["step_view"]["rows"] and r["step_view"]["window"].startswith("ProfilerStep#")
    assert "ui.perfetto.dev" in data["sources"][0]["open_with"]
    assert data["workload_kind"] == "reference"


def test_analyze_of_a_cpu_only_trace_prints_no_gpu_zeros() -> None:
    res = CliRunner().invoke(cli(), ["analyze", str(CPU)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "no GPU timeline in this trace (no kernels, copies or memsets were traced)"
    for gone in ("GPU time", "Temporal (HTA)", "Kernels / copies", "Unified Memory"):
        assert gone not in lines, gone
    assert "Steps" in lines and "CPU / sync" in lines
    steps = next(x for x in lines if x.strip().startswith("traced steps"))
    assert steps.split()[-1] == "6"
