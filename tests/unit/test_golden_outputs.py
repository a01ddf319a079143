"""Golden analysis outputs: `analyze` (text, as piped and as a terminal shows it, and --json),
`compare` (text and --json) and `report` (md, json, html) of every committed export and trace
(tests/data, the xz-packed recordings unpacked), and what the state store and a campaign record
of each run (`headline`, the campaign's trace metrics), byte for byte against
tests/golden/analysis/.
Rendered job scripts have their own golden files (test_golden.py). Together they say that a
change which should not change behaviour did not.

Inputs are named by paths relative to a workspace (`data/` = tests/data, `rec/` = the unpacked
recordings), so no machine's paths reach the outputs. Each set of inputs is analysed once and
reused by every output (`analyze_runs` answers from a cache of real analyses, deep copies).

After an intended change, regenerate and review the diff by eye:
    make golden     (= GH_RUN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_golden*.py)
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.analysis import loader
from orchestrator.cli import analysis as cli_analysis
from tests.fixtures import export_variants
from tests.fixtures.recordings import unpacked

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
GOLDEN = REPO / "tests" / "golden" / "analysis"
UPDATE = os.environ.get("GH_RUN_UPDATE_GOLDEN") == "1"

# The xz-packed recordings: workspace folder -> tests/data folder
RECORDINGS = {
    "rec/ddp_nsys2024": "ddp_nsys2024",
    "rec/gpu_metrics/bf16": "gpu_metrics/bf16",
    "rec/gpu_metrics/fp32": "gpu_metrics/fp32",
    "rec/gpu_metrics/ddp": "gpu_metrics/ddp",
    "rec/unannotated/nsys/convnet_w0": "unannotated/nsys/convnet_w0",
    "rec/unannotated/nsys/convnet_w4": "unannotated/nsys/convnet_w4",
    "rec/unannotated/nsys/sft_w0": "unannotated/nsys/sft_w0",
    "rec/unannotated/nsys/sft_w4": "unannotated/nsys/sft_w4",
    "rec/memory_h200/activations": "memory_h200/activations",
    "rec/memory_h200/activations_ckpt": "memory_h200/activations_ckpt",
    "rec/nsys2026": "nsys2026",
    "rec/causes_h200/dl_backward": "causes_h200/dl_backward",
    "rec/causes_h200/dl_clean": "causes_h200/dl_clean",
    "rec/causes_h200/dl_fp32": "causes_h200/dl_fp32",
    "rec/causes_h200/dl_host": "causes_h200/dl_host",
    "rec/causes_h200/hf_fp32": "causes_h200/hf_fp32",
    "rec/causes_h200/hf_w0": "causes_h200/hf_w0",
    "rec/causes_h200/hf_w4": "causes_h200/hf_w4",
    "rec/causes_h200/img_input_w0": "causes_h200/img_input_w0",
    "rec/causes_h200/img_input_w6": "causes_h200/img_input_w6",
    "rec/causes_h200/img_pageable": "causes_h200/img_pageable",
    "rec/causes_h200/img_pinned": "causes_h200/img_pinned",
    "rec/causes_h200/ml_eager": "causes_h200/ml_eager",
    "rec/causes_h200/ml_graphs": "causes_h200/ml_graphs",
    "rec/causes_h200/ml_sync": "causes_h200/ml_sync",
    "rec/heldout_h200/run1": "heldout_h200/run1",
    "rec/heldout_h200/run2": "heldout_h200/run2",
    # the projections' held-out workloads (issue 41), each its own case
    "rec/heldout_h200_mlp": "heldout_h200/mlp",
    "rec/heldout_h200_encoder": "heldout_h200/encoder",
}
# Variants of real 2026 exports derived in the workspace (tests/fixtures/export_variants.py):
# workspace folder -> the export (in a RECORDINGS folder) they are derived from
VARIANTS = {
    "var/h100": "rec/nsys2026/h100_2gpu_1s.sqlite",
    "var/mock": "rec/nsys2026/mock.sqlite",
}

ANALYZE = ("analyze.txt", "analyze.term.txt", "analyze.json", "headline.json")
COMPARE = ("compare.txt", "compare.json")
REPORT = ("report.md", "report.json", "report.html")


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    outputs: tuple[str, ...]


def _one(name: str, arg: str, *extra: tuple[str, ...]) -> Case:
    return Case(name, (arg,), ANALYZE + tuple(x for e in extra for x in e))


CASES = [
    _one("cloverleaf", "data/nsys/cloverleaf-cuda_perlmutter.sqlite"),
    _one("saxpy", "data/nsys/saxpy-mpi-cuda_perlmutter0.sqlite"),
    _one("nsys_cpu", "data/nsys_cpu", REPORT),
    _one("nsys_h100", "data/nsys_h100", COMPARE, REPORT),
    _one("traces", "data/traces", COMPARE, REPORT),
    _one("ddp_h200_kineto", "data/ddp_h200/kineto"),
    _one("ddp_h200_kineto_straggler", "data/ddp_h200/kineto_straggler"),
    _one("ddp_h200_nsys", "data/ddp_h200/nsys"),
    _one("ddp_h200_nsys_one_report", "data/ddp_h200/nsys_one_report"),
    _one("ddp_nsys2024", "rec/ddp_nsys2024"),
    _one("gpu_metrics_bf16", "rec/gpu_metrics/bf16"),
    _one("gpu_metrics_fp32", "rec/gpu_metrics/fp32"),
    _one("gpu_metrics_ddp", "rec/gpu_metrics/ddp", REPORT),
    _one("unannotated_kineto", "data/unannotated/kineto", COMPARE, REPORT),
    _one("unannotated_nsys", "rec/unannotated/nsys", COMPARE, REPORT),
    # the planted-cause workloads (issue 35 item 7) and their pairs (issue 41)
    _one("causes_h200", "rec/causes_h200", COMPARE),
    # the held-out one, recorded after the rules were written (tests/data/heldout_h200)
    _one("heldout_h200", "rec/heldout_h200", COMPARE),
    _one("heldout_h200_mlp", "rec/heldout_h200_mlp"),
    _one("heldout_h200_encoder", "rec/heldout_h200_encoder"),
    # other projects' traces (HTA's and TraceLens's test data): unrelated runs, one folder
    _one("public_traces", "data/public_traces"),
    # real nsys 2026 exports (another project's test data) and variants derived from them
    _one("nsys2026_h100", "rec/nsys2026/h100_2gpu_1s.sqlite", REPORT),
    _one("nsys2026_mock", "rec/nsys2026/mock.sqlite"),
    Case(
        "nsys2026_mfu",
        ("rec/nsys2026/mfu_2gpu_before.sqlite", "rec/nsys2026/mfu_2gpu_after.sqlite"),
        ANALYZE + COMPARE,
    ),
    *[
        _one(f"nsys2026_h100_{v}", f"var/h100/h100_2gpu_1s.{v}.sqlite")
        for v in export_variants.VARIANTS
    ],
    _one("nsys2026_mock_renamed", "var/mock/mock.renamed.sqlite"),
    Case("compare_gpu_metrics", ("rec/gpu_metrics/bf16", "rec/gpu_metrics/fp32"), COMPARE + REPORT),
    Case(
        "compare_ddp_kineto",
        ("data/ddp_h200/kineto", "data/ddp_h200/kineto_straggler"),
        COMPARE + REPORT,
    ),
    Case(
        "compare_ddp_nsys",
        (
            "data/ddp_h200/nsys",
            "data/ddp_h200/nsys_one_report",
            "rec/ddp_nsys2024",
            "rec/gpu_metrics/ddp",
        ),
        COMPARE + REPORT,
    ),
    # an nsys export against a PyTorch-profiler trace: the sources differ
    Case("compare_mixed", ("data/ddp_h200/nsys", "data/ddp_h200/kineto"), COMPARE),
    # memory: a snapshot alone, two compared (checkpointing off and on), Kineto traces' own
    # memory events (the folder's snapshots are xz-packed: only its traces are read there)
    _one("memory_snapshot", "rec/memory_h200/activations/memory.rank0.pickle", REPORT),
    Case(
        "compare_memory",
        (
            "rec/memory_h200/activations/memory.rank0.pickle",
            "rec/memory_h200/activations_ckpt/memory.rank0.pickle",
        ),
        COMPARE + REPORT,
    ),
    _one("memory_kineto", "data/memory_h200"),
    # runs without kernels beside runs with them
    Case(
        "compare_no_gpu",
        (
            "data/nsys_cpu",
            "data/nsys/saxpy-mpi-cuda_perlmutter0.sqlite",
            "data/nsys/cloverleaf-cuda_perlmutter.sqlite",
        ),
        COMPARE + REPORT,
    ),
]
# Reports: one of a run without kernels, one of a two-rank run, the others of several runs
# (every run's section, the comparison and what changed); each export and trace is in one.
PAIRS = [(c, out) for c in CASES for out in c.outputs]

# what each output is run as; the terminal one as Rich draws it for a 100-column terminal
PIPED = {"COLUMNS": "80"}
TERMINAL = {"COLUMNS": "100", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}


def _workspace(root: Path) -> Path:
    """`data` (tests/data) and `rec` (the recordings unpacked, as real folders)."""
    (root / "data").symlink_to(DATA, target_is_directory=True)
    for dest, src in RECORDINGS.items():
        folder = root / dest
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(unpacked(DATA / src), folder)
    for dest, src in VARIANTS.items():
        export_variants.derive(root / src, root / dest)
    return root


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = _workspace(tmp_path_factory.mktemp("golden"))
    real = loader.analyze_runs
    # pickled: a pickle round trip copies a RunSet several times faster than a deep copy
    cache: dict[tuple[tuple[str, ...], str | None, int | None], bytes] = {}

    def analyze_runs(
        paths: list[Path], label: str | None = None, **kw: int | None
    ) -> loader.RunSet:
        # The same analysis for every output of a set of inputs (a copy: an output must not
        # see what another did to its models).
        key = (tuple(map(str, paths)), label, kw.get("max_trace_bytes"))
        if key not in cache:
            cache[key] = pickle.dumps(real(paths, label, **kw), pickle.HIGHEST_PROTOCOL)  # type: ignore[arg-type]
        copy: loader.RunSet = pickle.loads(cache[key])
        return copy

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        # ddp_h200/nsys lost its kernels in 2023.4's importer: refused by default (test_captures),
        # read here as a user who accepts it would, so its outputs carry the lost-data note.
        mp.setenv("GH_RUN_ACCEPT_LOST_DATA", "1")
        mp.setattr(cli_analysis, "analyze_runs", analyze_runs)
        yield root


def _app() -> typer.Typer:
    app = typer.Typer()
    cli_analysis.register(app)
    return app


def produce(case: Case, output: str, root: Path) -> str:
    """One output of a case, as the CLI writes it (a report's file read back)."""
    command, _, kind = output.partition(".")
    if command == "headline":
        return _recorded(case)
    args = ["analyze" if command == "analyze" else "compare", *case.args]
    env = TERMINAL if kind == "term.txt" else PIPED
    if command == "report":
        out = Path("out") / case.name
        args = ["report", *case.args, "--out", str(out)]
    elif kind == "json":
        args.append("--json")
    res = CliRunner(env=env).invoke(_app(), args)
    assert res.exit_code == 0, f"{case.name}: gh-run {' '.join(args)} failed:\n{res.output}"
    if command == "report":
        return (root / out / f"report.{kind}").read_text(encoding="utf-8")
    return res.stdout


def _recorded(case: Case) -> str:
    """Each run's headline numbers (what `analyze RUN_ID` stores) and campaign trace metrics."""
    from orchestrator.analysis import headline
    from orchestrator.campaign.results import trace_metrics

    found = cli_analysis.analyze_runs([Path(a) for a in case.args], label=" ".join(case.args))
    doc = [
        {"label": m.label, "headline": headline(m), "campaign": trace_metrics(m)}
        for m in found.runs
    ]
    return json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize(("case", "output"), PAIRS, ids=[f"{c.name}/{o}" for c, o in PAIRS])
def test_output_matches_golden(case: Case, output: str, workspace: Path) -> None:
    got = produce(case, output, workspace)
    golden = GOLDEN / case.name / output
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got, encoding="utf-8")
    assert golden.is_file(), f"{golden} is missing; run `make golden` and review it"
    want = golden.read_text(encoding="utf-8")
    if got != want and output.endswith(".json") and _same_json(json.loads(got), json.loads(want)):
        return  # the same document but for floats' last bits (another numpy's summation order)
    if got != want:
        import difflib

        diff = "".join(
            list(
                difflib.unified_diff(
                    want.splitlines(keepends=True),
                    got.splitlines(keepends=True),
                    f"golden/{case.name}/{output}",
                    "now",
                )
            )[:80]
        )
        pytest.fail(
            f"gh-run {output.split('.')[0]} {' '.join(case.args)} differs from its golden"
            f" output; if intended, `make golden` and review the diff:\n{diff}"
        )


def _same_json(a: object, b: object) -> bool:
    """The same JSON document, floats equal to 12 significant digits: numpy's sums (pairwise,
    SIMD) may differ in the last bit between numpy versions (seen: numpy 2.5 under Python 3.12
    against 2.4 under 3.11, 61.70764434271282 for 61.70764434271281); every other value, key and
    order exactly."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_json_goldens_tolerate_only_the_last_bits_of_floats() -> None:
    assert _same_json({"x": [61.70764434271281]}, {"x": [61.70764434271282]})
    assert not _same_json({"x": 61.707644}, {"x": 61.707645})
    assert not _same_json({"x": 1.0, "y": 2}, {"y": 2, "x": 1.0})  # key order is output
    assert not _same_json({"x": 1}, {"x": 1.0})
    assert not _same_json([1.0, 2.0], [1.0])


def test_every_input_is_covered() -> None:
    """Every committed export and trace is an input of some case, and no golden file is left
    without its case."""
    used = [a for c in CASES for a in c.args]
    inputs = [
        p
        for p in DATA.rglob("*")
        if p.name.endswith((".sqlite", ".sqlite.xz", ".json.gz"))
        or (p.name.endswith(".json") and "traceEvents" in p.read_text(errors="replace")[:4096])
    ]
    assert inputs
    for p in inputs:
        rel = p.relative_to(DATA).as_posix()
        rec = {v: k for k, v in RECORDINGS.items()}
        unpacked_name = p.name.removesuffix(".xz")  # a recording is analysed unpacked
        names = {f"data/{rel}"} | {
            f"{rec[f]}/{unpacked_name}" for f in rec if rel.startswith(f + "/")
        }
        assert any(n == a or n.startswith(a.rstrip("/") + "/") for n in names for a in used), (
            f"tests/data/{rel} is in no golden case; add it to CASES"
        )
    if not UPDATE:
        expected = {(c.name, o) for c, o in PAIRS}
        stale = {(p.parent.name, p.name) for p in GOLDEN.glob("*/*") if p.is_file()} - expected
        assert not stale, f"golden files without a case: {sorted(stale)}; delete them"
