"""compare, advice, reports (HTML opened in headless Chromium), and the CLI commands."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.analysis import Metrics, advise, analyze_paths, compare, write_report
from orchestrator.cli.analysis import register
from orchestrator.core.errors import UserError
from tests.fixtures.kineto_builder import KinetoBuilder, training_trace
from tests.fixtures.nsys_builder import NsysBuilder

MAIN = 10


def nsys_run(path: Path, *, idle_gap: int, copies: int, sgemm: bool, um: int) -> Path:
    """A run of 20 steps: kernels with a host gap per step, optional HtoD/DtoH traffic."""
    b = NsysBuilder(path)
    b.add_gpu(0)
    b.add_thread(MAIN, "pt_main_thread")
    t = 0
    for step in range(20):
        s0 = t
        b.add_nvtx(t, t + idle_gap, "dataloader_next", tid=MAIN)
        b.add_osrt(t, t + idle_gap, "pthread_cond_wait", tid=MAIN)
        t += idle_gap
        for _ in range(10):
            name = "ampere_sgemm_128x64_tn" if sgemm else "sm90_xmma_gemm_bf16bf16_bf16f32"
            b.add_kernel(t, t + 10_000, name)
            t += 11_000
        for _ in range(copies):
            b.add_memcpy(t, t + 5_000, 1, 1 << 20)
            b.add_memcpy(t + 5_000, t + 10_000, 2, 1 << 20)
            t += 10_000
        for _ in range(um):
            b.add_memcpy(t, t + 2_000, 11, 4096, migration_cause=2)
            t += 2_000
        b.add_nvtx(s0, t, f"step_{step}", tid=MAIN)
        b.add_gpu_memory(s0, 1000 + 100 * copies)
        b.add_gpu_memory(t - 1, 1000 + 100 * copies, free=True)
    return b.close()


@pytest.fixture()
def runs(tmp_path: Path) -> tuple[Metrics, Metrics]:
    base = analyze_paths(
        [nsys_run(tmp_path / "base.sqlite", idle_gap=200_000, copies=0, sgemm=False, um=0)],
        label="base",
    )
    other = analyze_paths(
        [nsys_run(tmp_path / "other.sqlite", idle_gap=1_000, copies=5, sgemm=True, um=5)],
        label="other",
    )
    return base, other


def test_compare_rows_and_deltas(runs: tuple[Metrics, Metrics]) -> None:
    base, other = runs
    c = compare([base, other])
    assert c.labels == ["base", "other"]
    rows = {(r.group, r.metric): r for r in c.rows}
    groups = {r.group for r in c.rows}
    assert {"GPU memory", "Kernel continuity", "CPU activity", "Sync overhead"} <= groups
    idle = rows[("GPU time", "idle")]
    assert idle.values == [base.aggregate.idle_pct_mean, other.aggregate.idle_pct_mean]
    assert idle.delta_abs[0] == 0 and idle.delta_abs[1] == pytest.approx(
        other.aggregate.idle_pct_mean - base.aggregate.idle_pct_mean
    )
    assert idle.delta_rel_pct[1] == pytest.approx(100 * idle.delta_abs[1] / idle.values[0])
    htod = rows[("Memory traffic", "HtoD")]
    assert htod.values[0] == 0 and htod.delta_rel_pct[1] is None  # baseline 0: no ratio
    assert htod.values[1] == pytest.approx(100 * (1 << 20) / 2**30)


def test_advice_rules_fire_with_evidence(runs: tuple[Metrics, Metrics]) -> None:
    base, other = runs
    base_rules = {a.rule: a for a in advise(base)}
    other_rules = {a.rule: a for a in advise(other)}
    assert "data-loader" in base_rules and "data-loader" not in other_rules
    assert "num_workers" in base_rules["data-loader"].knob
    assert base_rules["data-loader"].evidence["idle_pct"] == base.ranks[0].idle_pct
    assert {"host-device-copies", "fp32-kernels", "unified-memory"} <= set(other_rules)
    # stand-in traces with no run folder around them: the generic wording, not NeMo's
    assert "torch.autocast" in other_rules["fp32-kernels"].knob
    assert "trainer.precision" not in other_rules["fp32-kernels"].knob
    assert other_rules["fp32-kernels"].evidence["fp32_gemm_pct_of_kernel_time"] == 100.0
    # copies without evidence of offloading: generic copy advice that never says offloading
    copies = other_rules["host-device-copies"]
    assert "offload-traffic" not in other_rules
    assert "offload" not in f"{copies.cause} {copies.knob} {copies.message}".lower()
    assert "pin" in copies.knob and copies.evidence["htod_dtoh_pct_of_gpu_activity"] >= 10
    assert not {"host-device-copies", "fp32-kernels", "unified-memory"} & set(base_rules)


def test_offload_advice_needs_evidence_of_offloading(tmp_path: Path) -> None:
    """The same copy-heavy export gets the offloading wording only when the run's spec says
    offloading was on (gh-run's layout: <run>/spec.lock.yaml beside <run>/artifacts/)."""
    run = tmp_path / "run"
    (run / "artifacts").mkdir(parents=True)
    f = nsys_run(run / "artifacts" / "sft.0.sqlite", idle_gap=1_000, copies=5, sgemm=False, um=0)
    assert {a.rule for a in advise(analyze_paths([f]))} >= {"host-device-copies"}
    (run / "spec.lock.yaml").write_text(
        "name: x\nworkload:\n  kind: nemo\n  cpu_offloading_layers: 8\n"
    )
    m = analyze_paths([f])
    assert m.ranks[0].offloading is True
    rules = {a.rule: a for a in advise(m)}
    assert "host-device-copies" not in rules
    off = rules["offload-traffic"]
    assert "cpu_offloading_num_layers" in off.knob
    assert "spec.lock.yaml: workload.cpu_offloading_layers = 8" in off.message
    assert off.evidence["htod_dtoh_pct_of_gpu_activity"] >= 10
    (run / "spec.lock.yaml").write_text("workload: [unclosed\n")
    with pytest.raises(UserError, match=r"spec\.lock\.yaml"):
        analyze_paths([f])


def write(tmp_path: Path, runs: tuple[Metrics, Metrics]) -> dict[str, Path]:
    kin = analyze_paths([training_trace(rank=0).write(tmp_path / "k_rank0.json")], label="kineto")
    return write_report([*runs, kin], tmp_path / "rep", "test <report>")


def test_report_files_carry_the_same_numbers(tmp_path: Path, runs: tuple[Metrics, Metrics]) -> None:
    paths = write(tmp_path, runs)
    html = paths["html"].read_text()
    md = paths["md"].read_text()
    data = json.loads(paths["json"].read_text())
    assert len(data["runs"]) == 3 and data["comparison"]["labels"] == ["base", "other", "kineto"]
    busy = f"{runs[0].ranks[0].busy_pct:.1f} %"
    assert busy in html and busy.replace(".", "\\.") in md  # Markdown escapes the point
    assert "test &lt;report&gt;" in html  # escaped
    assert not re.search(r"<script|https?://|src=", html)  # self-contained, no network
    assert html.count("<svg") >= 6


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    b = KinetoBuilder(rank=0)
    b.gpu("kernel", "<script>alert(1)</script>", 10, 5)
    b.gpu("kernel", "k2", 30, 5)
    m = analyze_paths([b.write(tmp_path / "x.json")])
    html = write_report([m], tmp_path / "r", "t")["html"].read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_report_in_headless_chromium(tmp_path: Path, runs: tuple[Metrics, Metrics]) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    html = write(tmp_path, runs)["html"]
    flags = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,2400", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    console = [ln for ln in done.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert console == []
    dom = subprocess.run(
        [*flags, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.stdout.count('class="plot"') >= 6
    assert 'class="series"' in dom.stdout and 'class="bar"' in dom.stdout
    assert [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln] == []
    keep = Path(__file__).resolve().parents[2] / "bench" / "out"
    if keep.is_dir():  # for a human look at the screenshot
        shutil.copy(shot, keep / "report.png")


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_cli_analyze_json_compare_report(tmp_path: Path, runs: tuple[Metrics, Metrics]) -> None:
    a = nsys_run(tmp_path / "a.sqlite", idle_gap=5_000, copies=1, sgemm=False, um=0)
    b = training_trace(rank=0).write(tmp_path / "b.json")
    runner = CliRunner(env={"COLUMNS": "250"})
    res = runner.invoke(cli(), ["analyze", str(a), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {"rank", "temporal"} <= set(doc["ranks"][0])
    assert set(doc["ranks"][0]["temporal"]) >= {"idle_pct", "compute_pct", "non_compute_pct"}
    res = runner.invoke(cli(), ["analyze", str(a)])
    assert res.exit_code == 0 and "HTA" in res.output
    res = runner.invoke(cli(), ["compare", str(a), str(b)])
    assert res.exit_code == 0 and "Kernel continuity" in res.output
    res = runner.invoke(cli(), ["report", str(a), str(b), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0 and (tmp_path / "o" / "report.html").exists()


def test_module_entry_point_exit_codes(tmp_path: Path) -> None:
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "orchestrator.analysis", "analyze", str(tmp_path / "nope.sqlite")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "no such file" in r.stderr


TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Rich takes these as a terminal (CliRunner's output is not one): the width-fitted layout
AS_TERMINAL = {"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1"}


def test_cli_tables_fit_80_and_100_columns(tmp_path: Path) -> None:
    a = nsys_run(tmp_path / "a.sqlite", idle_gap=5_000, copies=1, sgemm=False, um=0)
    b = training_trace(rank=0).write(tmp_path / "b.json")
    res = CliRunner(env={"COLUMNS": "80", **AS_TERMINAL}).invoke(cli(), ["analyze", str(a)])
    assert res.exit_code == 0, res.output
    lines = ANSI.sub("", res.output).splitlines()
    assert max(len(x) for x in lines) <= 80
    # one row per metric, one column per rank, values with units
    assert any(x.split()[:1] == ["metric"] and "rank 0" in x for x in lines)
    for group in ("GPU time", "Temporal (HTA)", "Kernels / copies", "Memory traffic"):
        assert any(x.strip() == group for x in lines), group
    for group in ("Unified Memory", "Steps", "CPU / sync"):
        assert any(x.strip() == group for x in lines), group
    compute = next(x for x in lines if x.strip().startswith("compute"))
    assert compute.rstrip().endswith("%")
    span = next(x for x in lines if x.strip().startswith("span"))
    assert re.search(r"\d (s|ms|µs)$", span.rstrip()), span
    assert any(x.startswith("full timeline: nsys-ui ") for x in lines)
    res = CliRunner(env={"COLUMNS": "100"}).invoke(cli(), ["compare", str(a), str(b)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(x) for x in lines) <= 100
    header = next(x for x in lines if x.split()[:2] == ["metric", "unit"])
    assert "a.sqlite" not in header and " a " in f" {header} " and " b " in f" {header} "
    assert any("peak GPU memory" in x for x in lines)


def test_analyze_piped_prints_plain_full_values(tmp_path: Path) -> None:
    """Piped (not a terminal), `analyze` prints plain aligned text, as `status` does: no box, no
    colour, no value or kernel name cut to 80 columns, and how to open the whole timeline."""
    res = CliRunner(env={"COLUMNS": "80"}).invoke(cli(), ["analyze", str(TRACES / "fp32")])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "\x1b" not in out and "─" not in out and "…" not in out
    lines = out.splitlines()
    assert max(len(x) for x in lines) > 80  # long kernel names stay whole
    header = next(x for x in lines if x.split()[:1] == ["metric"])
    assert header.split() == ["metric", "rank", "0"]
    kernels = lines.index(
        next(x for x in lines if x.split() == ["count", "total", "share", "kernel"])
    )
    first = lines[kernels + 1]
    m = analyze_paths([TRACES / "fp32"])
    assert first.endswith(m.ranks[0].top_kernels[0].name)  # in full, last on its line
    hint = next(x for x in lines if x.startswith("full timeline: "))
    assert "ui.perfetto.dev" in hint and "sft_rank0.pt.trace.json.gz" in hint


def test_analyze_of_a_run_id_stores_headline(gh_home: Path, tmp_path: Path) -> None:
    from orchestrator.store.db import Store
    from tests.unit.test_store_artifacts import make_run

    src = TRACES / "baseline"
    if not (src / "metrics.json").exists():
        pytest.skip("workload traces absent")
    run_dir = tmp_path / "run"
    shutil.copytree(src, run_dir / "artifacts")
    Store(gh_home).add_run(make_run(run_dir, run_id="r-77"))
    res = CliRunner(env={"COLUMNS": "80"}).invoke(cli(), ["analyze", "r-77", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    stored = Store(gh_home).metrics("r-77")
    assert stored["gpu_idle_pct"] == pytest.approx(doc["aggregate"]["idle_pct_mean"])
    assert stored["hta_compute_pct"] == pytest.approx(doc["ranks"][0]["temporal"]["compute_pct"])
    assert stored["peak_gpu_memory_bytes"] == 18242181632
    assert stored["step_time_median_s"] == pytest.approx(0.262670387)
    assert {"memcpy_share_pct", "um_share_pct", "gpu_compute_pct", "kernel_pct"} <= set(stored)
    # a plain path stores nothing
    res = CliRunner().invoke(cli(), ["analyze", str(run_dir / "artifacts"), "--json"])
    assert res.exit_code == 0 and Store(gh_home).metrics("r-77") == stored


# ---- advice on the real inputs ---------------------------------------------------------------
REAL_NSYS = Path(__file__).resolve().parents[1] / "data" / "nsys"


def _real_input(rel: str) -> Path:
    p = REAL_NSYS / rel if rel.endswith(".sqlite") else TRACES / rel
    if not p.exists():
        pytest.skip(f"{p} absent")
    return p


def _advice_lines(p: Path) -> list[str]:
    res = CliRunner(env={"COLUMNS": "200"}).invoke(cli(), ["analyze", str(p)])
    assert res.exit_code == 0, res.output
    return [ln for ln in res.output.splitlines() if ln.startswith("advice ")]


@pytest.mark.parametrize(
    ("rel", "fires", "silent"),
    [
        # CloverLeaf: idle GPU, a helper thread in poll() all along, no data ranges; its sync
        # calls (94 % of the span) wait for a busy GPU: 1.5 % of the span while it is idle, so
        # no sync-overhead (issue 28: a host waiting for a busy GPU is not overhead)
        ("cloverleaf-cuda_perlmutter.sqlite", set(), {"data-loader", "sync-overhead"}),
        # MPI saxpy: copies dominate, nothing is offloaded
        ("saxpy-mpi-cuda_perlmutter0.sqlite", {"host-device-copies"}, {"offload-traffic"}),
        # workers 0, data-bound (179 of 263 ms per step in data)
        ("baseline", {"data-loader"}, {"offload-traffic", "host-device-copies", "fp32-kernels"}),
        ("workers4", set(), {"data-loader", "offload-traffic", "fp32-kernels"}),
        ("offload", {"data-loader", "offload-traffic"}, {"host-device-copies"}),
        ("lora", {"data-loader"}, {"offload-traffic", "fp32-kernels"}),
        ("fp32", {"data-loader", "fp32-kernels"}, {"offload-traffic"}),
    ],
)
def test_advice_on_real_inputs(rel: str, fires: set[str], silent: set[str]) -> None:
    p = _real_input(rel)
    lines = _advice_lines(p)
    rules = {ln.split()[1].rstrip(":") for ln in lines}
    assert fires <= rules and not silent & rules, lines
    if "offload-traffic" not in rules:
        assert not any("offload" in ln.lower() for ln in lines), lines
    # every share of the span an advice cites is a share: at most 100 %
    for a in advise(analyze_paths([p])):
        for key in ("data_wait_pct_of_span", "main_thread_wait_pct_of_span"):
            assert 0 <= a.evidence.get(key, 0) <= 100, (a.rule, a.evidence)


# ---- wide tables in the browser ----------------------------------------------------------------
def test_wide_comparison_scrolls_inside_the_page(
    tmp_path: Path, runs: tuple[Metrics, Metrics]
) -> None:
    """Three runs make the comparison wider than a narrow window: the table scrolls in its own
    box and the page itself does not grow sideways. Measured by Chromium's layout through a
    test-only page that frames the report (the report itself stays script-free)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    html = write(tmp_path, runs)["html"]
    probe = tmp_path / "probe.html"
    probe.write_text(
        "<!DOCTYPE html><html><body style='margin:0'>"
        f"<iframe id='f' src='{html.as_uri()}' style='width:640px;height:600px'></iframe>"
        "<pre id='out'>pending</pre><script>"
        "document.getElementById('f').addEventListener('load', function () {"
        " var d = this.contentDocument, page = d.documentElement,"
        "  box = d.getElementById('comparison').parentElement;"
        " document.getElementById('out').textContent = JSON.stringify({"
        "  page: [page.scrollWidth, page.clientWidth], box: [box.scrollWidth, box.clientWidth],"
        "  overflow: getComputedStyle(box).overflowX}); });"
        "</script></body></html>"
    )
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    m = re.search(r"<pre id=\"out\">(\{.*?\})</pre>", dom.stdout)
    assert m, dom.stdout[-2000:] + dom.stderr[-2000:]
    got = json.loads(m.group(1).replace("&quot;", '"'))
    page_scroll, page_client = got["page"]
    box_scroll, box_client = got["box"]
    assert box_scroll > box_client  # the table is wider than the window ...
    assert got["overflow"] == "auto"  # ... and scrolls inside its box
    assert page_scroll <= page_client  # the page does not overflow


@pytest.mark.parametrize(
    ("v", "base", "shown"),
    [
        (112.3, 100, "+12.3 %"),
        (50, 100, "-50.0 %"),
        (850, 10, "×85"),
        (10, 850, "×0.012"),  # a factor, never a fraction (×1/85)
        (1, 142, "×0.007"),
        (22.5, 7.5e-9, "from ~0 (+22.50 GiB)"),  # 8 bytes copied, then 22.5 GiB
        (7.5e-9, 22.5, "to ~0 (-22.50 GiB)"),
        (1, 0, "new"),
        (3, 3, "="),
        (None, 1, "-"),
    ],
)
def test_change_is_short_and_readable(v: float | None, base: float, shown: str) -> None:
    from orchestrator.analysis.presentation.compare import change_text

    assert change_text(v, base, "GiB") == shown
