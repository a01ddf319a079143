"""The metric catalogue (orchestrator/analysis/catalogue/): every entry well formed, every view
names only what the catalogue declares, a run's value is its entries' values put together as
the entry says, and "not measured" follows the sources the entry names."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from orchestrator.analysis import analyze_paths
from orchestrator.analysis.catalogue import CATALOGUE, FAMILIES, views
from orchestrator.analysis.metrics import Metrics

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
    # the workload's own numbers only beside its metrics.json
    assert views.value("tokens_per_s", nsys) is None
    assert views.value("tokens_per_s", kineto) is not None
