"""The metric catalogue (orchestrator/analysis/catalogue/): every entry well formed, every view
names only what the catalogue declares, a run's value is its entries' values put together as
the entry says, and "not measured" follows the sources the entry names."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.analysis import analyze_paths, headline
from orchestrator.analysis.catalogue import CATALOGUE, FAMILIES, Entry, Metric, views
from orchestrator.analysis.metrics import Metrics
from orchestrator.cli.analysis import register
from orchestrator.core.human import dur

DATA = Path(__file__).resolve().parents[1] / "data"
# what a key's ending says of its unit (the state store and campaigns read it so)
SUFFIX_UNITS = {"_pct": "%", "_per_s": "/s", "_us": "us", "_ms": "ms", "_s": "s", "_bytes": "bytes"}


def test_every_entry_is_well_formed() -> None:
    keys = [m.key for m in CATALOGUE] + [a for m in CATALOGUE for a in m.aliases]
    assert len(keys) == len(set(keys)), "a key or alias is declared twice"
    for m in CATALOGUE:
        assert m.definition and m.label and m.group, m.key
        assert m.better in ("lower", "higher", None), m.key
        assert m.across in ("mean", "sum", "max"), m.key
        assert m.rank is not None or m.run is not None, f"{m.key}: nothing reads it"
        for key in (m.key, *m.aliases):
            ending = next((s for s in SUFFIX_UNITS if key.endswith(s)), None)
            if ending is not None:
                assert m.unit.endswith(SUFFIX_UNITS[ending]), f"{key}: its name says {ending}"
    for f in FAMILIES:
        assert f.definition and f.names and f.make, f.key


def test_views_name_only_what_the_catalogue_declares() -> None:
    known = set(views.metrics()) | set(views.families())
    layouts = {
        "analyze": views.ANALYZE,
        "compare": views.COMPARE,
        "spread": views.SPREAD,
        "ranks": views.RANKS,
    }
    for name, layout in layouts.items():
        for _, rows in layout:
            for s in rows:
                assert s.key is None or s.key in known, f"{name}: {s.key} is not in the catalogue"
    lists = [*views.HEADLINE, *views.CAMPAIGN, *views.KEY, *(k for _, _, k in views.CHANGES)]
    assert set(lists) <= known
    # every entry is shown somewhere (else it would show everywhere, as a new one)
    assert {m.key for m in CATALOGUE} <= views.placed_anywhere()


@pytest.fixture(scope="module")
def ddp() -> Metrics:
    return analyze_paths([DATA / "ddp_h200" / "kineto"])


def test_a_runs_value_puts_its_entries_together_as_the_entry_says(ddp: Metrics) -> None:
    r0, r1 = ddp.ranks
    m = views.metric
    assert m("gpu_idle_pct").run_value(ddp) == (r0.idle_pct + r1.idle_pct) / 2
    assert m("idle_gaps").run_value(ddp) == float(r0.idle_gaps.count + r1.idle_gaps.count)
    assert m("span_s").run_value(ddp) == max(r0.span_ns, r1.span_ns) / 1e9
    assert m("idle_gap_mean_us").run_value(ddp) == statistics.fmean(
        [r0.idle_gaps.mean_ns / 1e3, r1.idle_gaps.mean_ns / 1e3]
    )
    assert m("peak_gpu_memory_bytes").run_value(ddp, "GiB") == pytest.approx(
        max(r.peak_gpu_memory_bytes or 0 for r in ddp.ranks) / 2**30
    )
    skew = ddp.cross_rank.collective_start_skew
    assert skew is not None
    assert m("collective_start_skew_us").run_value(ddp) == skew.median_ns / 1e3
    # an alias is the same number under the name campaigns watch
    assert views.value("gpu_compute_pct", ddp) == views.value("hta_compute_pct", ddp)


def test_not_measured_follows_the_sources() -> None:
    kineto = analyze_paths([DATA / "traces" / "baseline"])
    cpu_only = analyze_paths([DATA / "nsys_cpu"])
    nsys = analyze_paths([DATA / "nsys_h100" / "baseline"])
    m = views.metric
    # OS-runtime calls: nsys exports that traced them, never Kineto
    assert m("osrt_s").sources.measured(nsys) and not m("osrt_s").sources.measured(kineto)
    assert m("cpu_op_s").sources.measured(kineto) and not m("cpu_op_s").sources.measured(nsys)
    assert views.value("osrt_s", kineto) is None
    # Unified Memory: nsys only
    assert views.value("um_share_pct", kineto) is None
    assert views.value("um_share_pct", nsys) == 0.0
    # no kernels: no GPU figure, but the host's are there
    assert views.value("gpu_idle_pct", cpu_only) is None
    assert views.value("osrt_s", cpu_only) is not None
    # unchecked, as the state store's headline has always read a trace without kernels
    assert views.value("gpu_idle_pct", cpu_only, check=False) == 0.0
    # the workload's own numbers only beside its metrics.json (nsys exports too, issue 35)
    bare = analyze_paths([DATA / "nsys" / "cloverleaf-cuda_perlmutter.sqlite"])
    assert views.value("tokens_per_s", bare) is None
    assert views.value("tokens_per_s", nsys) is not None
    assert views.value("tokens_per_s", kineto) is not None


# ---- a new metric: its family's function plus one entry
def longest_kernel_ns(e: Entry) -> float | None:
    """The family function of the new metric: the entry's longest kernel (ns)."""
    import numpy as np

    from orchestrator.analysis.timeline import model as T

    kernels = e.rows.kind == T.KERNEL
    if not bool(kernels.any()):
        return None
    return float(np.max(e.rows.end[kernels] - e.rows.start[kernels]))


NEW = Metric(
    "longest_kernel_us", "Kernels", "longest kernel", "us",
    "the longest kernel of the entry", rank_unit="ns", across="max", better="lower",
    compute=longest_kernel_ns,
)  # fmt: skip
H100 = DATA / "nsys_h100"


@pytest.fixture
def new_metric() -> Iterator[Metric]:
    CATALOGUE.append(NEW)
    try:
        yield NEW
    finally:
        CATALOGUE.remove(NEW)


def _longest_by_sql(run: str) -> int:
    with contextlib.closing(sqlite3.connect(H100 / run / f"{run}.sqlite")) as db, db:
        row = db.execute('SELECT max("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    return int(row[0])


def test_a_new_metric_shows_in_analyze_compare_report_and_campaigns(
    new_metric: Metric, tmp_path: Path
) -> None:
    want = {run: _longest_by_sql(run) for run in ("baseline", "workers4")}
    runner = CliRunner(env={"COLUMNS": "200"})
    app = typer.Typer()
    register(app)
    base, other = (str(H100 / run) for run in want)

    # analyze: computed on every entry, in --json and as a row of its group
    res = runner.invoke(app, ["analyze", base, "--json"])
    assert res.exit_code == 0, res.output
    (rank,) = json.loads(res.stdout)["ranks"]
    assert rank["figures"] == {"longest_kernel_us": want["baseline"]}
    res = runner.invoke(app, ["analyze", base])
    lines = res.stdout.splitlines()
    row = next(x for x in lines if x.strip().startswith("longest kernel"))
    assert row.split()[-2:] == dur(want["baseline"]).split()
    assert lines[lines.index(row) - 1].strip() == "Kernels"  # its group, a new one at the end

    # compare: a row of its group, in its unit, with the change
    res = runner.invoke(app, ["compare", base, other, "--json"])
    (cmp_row,) = [r for r in json.loads(res.stdout)["rows"] if r["metric"] == "longest kernel"]
    assert cmp_row["group"] == "Kernels" and cmp_row["unit"] == "us"
    assert cmp_row["values"] == [want["baseline"] / 1e3, want["workers4"] / 1e3]
    assert cmp_row["measured"] == [True, True]

    # the report: in the comparison and in each run's per-rank table
    res = runner.invoke(app, ["report", base, other, "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "r" / "report.md").read_text().splitlines()
    per_rank = [x for x in md if x.startswith("| longest kernel |")]  # each run's own table
    assert [x.replace("\\", "") for x in per_rank] == [
        f"| longest kernel | {dur(want[run])} |" for run in want
    ]
    assert sum(x.startswith("| Kernels | longest kernel |") for x in md) == 1  # the comparison
    html = (tmp_path / "r" / "report.html").read_text()
    assert "longest kernel" in html

    # campaigns: a metric thresholds can watch, recorded from each run's trace, and stored
    from orchestrator.campaign.model import METRICS
    from orchestrator.campaign.results import trace_metrics

    assert "longest_kernel_us" in METRICS
    m = analyze_paths([H100 / "baseline"])
    assert trace_metrics(m)["longest_kernel_us"] == want["baseline"] / 1e3
    assert headline(m)["longest_kernel_us"] == want["baseline"] / 1e3


def test_without_the_entry_nothing_shows_it() -> None:
    """The other side: no entry, no figure (the fixture above removes it again)."""
    m = analyze_paths([H100 / "baseline"])
    assert m.ranks[0].figures == {}
    assert "longest_kernel_us" not in views.campaign_keys()


def test_the_metrics_documentation_is_current() -> None:
    """docs/metrics.md's catalogue section is what the catalogue says (regenerate it with
    `python -m orchestrator.analysis.catalogue docs/metrics.md`, or `make golden`)."""
    from orchestrator.analysis.catalogue import docs

    path = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
    if os.environ.get("GH_RUN_UPDATE_GOLDEN") == "1":
        docs.rewrite(path)
    text = path.read_text(encoding="utf-8")
    assert docs.markdown() in text, (
        "docs/metrics.md's catalogue section is stale: run"
        " `python -m orchestrator.analysis.catalogue docs/metrics.md` and review the diff"
    )
    for m in CATALOGUE:
        assert f"| `{m.key}`" in text
