"""Issue 42, class 4: every side input is bounded, not only the traces. The GPU-metric grid is
sized by the samples an export holds (never by the range of its ids), the GPU-metrics YAML
configuration an export carries, a `spec.lock.yaml` and a `metrics.json` beside a trace go
through the bounded loaders (orchestrator/analysis/readers/side_inputs.py: size, values built
with aliases counted as used), text in GPU_METRICS is noted and left out (never read as 0), a
workload's step count cannot make the window rule build billions of rows, and C++ template
stripping is one pass. Hostile inputs of each kind are built here; the memory ones run under an
address-space limit that the unbounded code exceeded."""

from __future__ import annotations

import contextlib
import json
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.families import gpu_metrics
from orchestrator.analysis.readers import cpu_samples
from orchestrator.analysis.readers import gpu_metric_names as N
from orchestrator.analysis.readers.side_inputs import SideInputError, load_yaml
from orchestrator.analysis.timeline import step_rules
from orchestrator.core.errors import UserError
from tests.budget import examples
from tests.fixtures.recordings import export

REPO = Path(__file__).resolve().parents[2]
METRICS = REPO / "tests" / "data" / "gpu_metrics"
SAXPY = REPO / "tests" / "data" / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"
LIMIT_AS = 3 << 30  # the unbounded grid asked 11.9 GiB


def doctored(tmp_path: Path, statements: list[str], *args: tuple[Any, ...]) -> Path:
    db = tmp_path / "doctored.sqlite"
    shutil.copyfile(export(METRICS / "bf16" / "metrics_bf16.sqlite.xz"), db)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for i, s in enumerate(statements):
            conn.execute(s, args[i] if i < len(args) else ())
    return db


def read_limited(db: Path) -> dict[str, Any]:
    """gpu_metrics.read of `db` in a process whose address space is LIMIT_AS: GPUs read and
    notes, or the failure."""
    code = (
        "import json, sqlite3, sys; from pathlib import Path;"
        "from orchestrator.analysis.families import gpu_metrics as G;"
        "p = Path(sys.argv[1]); c = sqlite3.connect(f'file:{p}?mode=ro', uri=True);"
        "s = G.read(p, c); print(json.dumps({'gpus': sorted(s.gpus), 'notes': s.notes}))"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))

    res = subprocess.run(
        [sys.executable, "-c", code, str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return dict(json.loads(res.stdout))


def _series(n: int) -> str:
    return (
        f"WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < {n})"
    )


def _scatter(ids: int, per_type: bool) -> list[str]:
    """`ids` metric ids (or type ids) of one sample each, every sample at a time of its own."""
    if per_type:
        return [
            f"{_series(ids)} INSERT INTO TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName,"
            " metricId, metricName) SELECT 900000 + value, 900000 + value, 't', 1, 'Scatter'"
            " FROM s",
            f"{_series(ids)} INSERT INTO GPU_METRICS (timestamp, typeId, metricId, value)"
            " SELECT 1000 + value, 900000 + value, 1, 5 FROM s",
        ]
    return [
        f"{_series(ids)} INSERT INTO TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName,"
        " metricId, metricName) SELECT (SELECT min(typeId) FROM GPU_METRICS), (SELECT"
        " min(sourceId) FROM TARGET_INFO_GPU_METRICS), 't', 100000 + value, 'Scatter ' || value"
        " FROM s",
        f"{_series(ids)} INSERT INTO GPU_METRICS (timestamp, typeId, metricId, value)"
        " SELECT 7 + value * 13, (SELECT min(typeId) FROM GPU_METRICS), 100000 + value, 5 FROM s",
    ]


@pytest.mark.parametrize("ids", [2_000, 40_000])
@pytest.mark.parametrize("per_type", [False, True], ids=["metric ids", "type ids"])
def test_scattered_metric_ids_never_size_the_grid(tmp_path: Path, ids: int, per_type: bool) -> None:
    db = doctored(tmp_path, _scatter(ids, per_type))
    got = read_limited(db)
    notes = " ".join(got["notes"])
    if per_type:  # every scattered typeId names GPU 0 (typeId - sourceId): the sampler stays
        assert "name a GPU another typeId names too" in notes, notes
        with contextlib.closing(sqlite3.connect(db)) as c:
            real = c.execute(
                "SELECT count(DISTINCT typeId) FROM GPU_METRICS WHERE typeId > 1000000"
            ).fetchone()[0]
        assert len(got["gpus"]) == real, got
    else:
        assert "not the grid a sampler writes" in notes, notes


def test_text_null_fractions_and_negatives_in_gpu_metrics_are_noted_not_zero(
    tmp_path: Path,
) -> None:
    db = doctored(
        tmp_path,
        [
            "UPDATE GPU_METRICS SET value = 'n/a' WHERE rowid % 11 = 0",
            "UPDATE GPU_METRICS SET value = value + 0.5 WHERE rowid % 17 = 0",
            "UPDATE GPU_METRICS SET value = -3 WHERE rowid % 19 = 0",
        ],
    )
    with contextlib.closing(sqlite3.connect(db)) as conn:
        got = gpu_metrics.read(db, conn)
        bad = conn.execute(
            "SELECT count(*) FROM GPU_METRICS WHERE typeof(value) != 'integer' OR value < 0"
        ).fetchone()[0]
        typ, mid, name = conn.execute(
            "SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS"
            " WHERE metricName LIKE 'SMs Active%' ORDER BY typeId LIMIT 1"
        ).fetchone()
        (mean,) = conn.execute(
            "SELECT avg(value) FROM GPU_METRICS g, ANALYSIS_DETAILS a WHERE typeId = ? AND"
            " metricId = ? AND typeof(value) = 'integer' AND value >= 0 AND timestamp >= 0"
            " AND timestamp <= a.duration",
            (typ, mid),
        ).fetchone()
    assert any(f"{bad} row(s) hold what is not a count" in n for n in got.notes), got.notes
    g = next(g for g in got.gpus.values() if name in g.names)
    col = g.values[:, g.names.index(name)]
    assert abs(float(np.nanmean(col)) - mean) < 1e-9


BOMBS = {
    "billion laughs": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9)
    ),
    "merge keys": "a: &a {x: 1, y: 2, z: 3}\n"
    + "".join(
        f"k{i}: &k{i} {{<<: [{', '.join(['*a'] + [f'*k{j}' for j in range(max(0, i - 8), i)])}],"
        f" v{i}: 1}}\n"
        for i in range(200)
    ),
    "a self-referencing alias": "a: &a [1, *a]\n",
    # 12 KB: 1000 sets x 1000 metrics x 1000 sub-metrics when walked (a cubic loop before)
    "sets x metrics x sub-metrics": "s: &s {name: MHz, multiplier: 1}\n"
    + "u: &u ["
    + ", ".join(["*s"] * 1000)
    + "]\n"
    + "m: &m {name: M, subMetrics: *u}\n"
    + "n: &n {metrics: ["
    + ", ".join(["*m"] * 1000)
    + "]}\n"
    + "metricSets: ["
    + ", ".join(["*n"] * 1000)
    + "]\n",
    "too large": "x: " + "y" * (5 << 20) + "\n",
    "not YAML": "metricSets: [\n",
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_hostile_gpu_metrics_configuration_is_noted(tmp_path: Path, name: str) -> None:
    db = doctored(
        tmp_path,
        ["UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'GpuMetricsConfig'"],
        (BOMBS[name],),
    )
    got = read_limited(db)
    assert any("GpuMetricsConfig is not read" in n for n in got["notes"]), got["notes"]
    assert got["gpus"]


def test_the_bounded_loader_reads_as_safe_load_reads() -> None:
    import yaml

    with contextlib.closing(
        sqlite3.connect(export(METRICS / "bf16" / "metrics_bf16.sqlite.xz"))
    ) as c:
        (cfg,) = c.execute(
            "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'GpuMetricsConfig'"
        ).fetchone()
    assert load_yaml(cfg) == yaml.safe_load(cfg)
    assert N.read_multipliers(cfg) == (N.multipliers(cfg), None)
    bad = "metricSets: [{metrics: [{name: M, subMetrics: [{name: MHz, multiplier: [1]}]}]}]"
    assert N.read_multipliers(bad) == ({}, N.read_multipliers(bad)[1])
    assert "not numbers" in str(N.read_multipliers(bad)[1])
    with pytest.raises(SideInputError, match="more than"):
        load_yaml(BOMBS["billion laughs"])


def _beside(tmp_path: Path, name: str, text: str | bytes) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    f = run / SAXPY.name
    shutil.copyfile(SAXPY, f)
    (run / name).write_bytes(text.encode() if isinstance(text, str) else text)
    return f


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("spec.lock.yaml", BOMBS["billion laughs"] + "workload: {args: *j}\n", "more than 100000"),
        ("spec.lock.yaml", BOMBS["merge keys"], "more than 100000 values"),
        ("spec.lock.yaml", BOMBS["a self-referencing alias"], "more than 100000 values"),
        ("metrics.json", "[" * 5000 + "]" * 5000, "not readable JSON"),
        ("metrics.json", b" " * (17 << 20), "more than the 16 MiB"),
    ],
    ids=["spec aliases", "spec merges", "spec self", "json nesting", "json size"],
)
def test_a_hostile_file_beside_a_trace_is_one_sentence(
    tmp_path: Path, name: str, text: str | bytes, words: str
) -> None:
    from orchestrator.analysis import loader

    f = _beside(tmp_path, name, text)
    with pytest.raises(UserError) as got:
        loader.analyze_paths([f])
    assert words in got.value.message and name in got.value.message, got.value.message


def test_a_huge_step_count_is_no_evidence() -> None:
    found, why = step_rules._profiler_window((1_000, 2_001_000), (10**15, "metrics.json x"))
    assert found is None and "not used" in why and "2000 (one per 1 us" in why
    found, _ = step_rules._profiler_window((1_000, 2_001_000), (2_000, "metrics.json x"))
    assert found is not None and len(found.rows) == 2_000


def _reference_strip(text: str) -> str:
    """The former stripping: innermost template arguments removed until nothing changes."""
    rx = re.compile(r"<[^<>]*>")
    out, prev = text, ""
    while out != prev:
        prev, out = out, rx.sub("", out)
    return out


@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet="ab<>(): ", max_size=60))
def test_template_stripping_is_the_former_one_in_one_pass(text: str) -> None:
    assert cpu_samples.strip_templates(text) == _reference_strip(text)


def test_a_deeply_nested_name_is_stripped() -> None:
    name = "at::f" + "<std::vector" * 22_000 + ">" * 22_000 + "::call(int)"
    assert cpu_samples.short(name) == "at::f::call"
