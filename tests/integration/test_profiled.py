"""The profiled, containerized job end to end on the REAL dev cluster: real SLURM, real Apptainer
1.4.5 with the real test image (scripts/build-test-image.sh), real Nsight Systems 2023.4.4,
2022.4.2 and 2024.2.3 (scripts/install-nsys.sh), submitted through the real CLI. Nothing is
mocked.

jobs/smoke_profiled.yaml runs workloads/cpu_steps.py (baked into the image, with nvtx 0.2.11)
on two nodes, one report per rank (%q{SLURM_PROCID}); the job exports and summarises each
report itself; gh-run collects .nsys-rep, .sqlite and CSVs with sha256, and `analyze last`
reads the per-rank NVTX steps, the OS-runtime blocking and the thread names from them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core import tools
from orchestrator.store.db import Store
from tests import nsys_crash

pytestmark = [pytest.mark.cluster, pytest.mark.nsys_records]

REPO = Path(__file__).resolve().parents[2]
JOB = str(REPO / "jobs" / "smoke_profiled.yaml")
DEFAULT_PREFIX = "/opt/gh-run"


@pytest.fixture(scope="module")
def prefix() -> Path:
    """The tools prefix, with everything these tests run (make deps puts it there)."""
    return tools_ready()


def tools_ready() -> Path:
    """The tools prefix, or a skip naming what `make deps` has not put there."""
    p = tools.tools_prefix()
    need = [
        p / "bin" / "nsys",
        p / "bin" / "nsys-2022.4",
        p / "bin" / "nsys-2024.2",
        p / "bin" / "apptainer",
        p / "images" / "gh-run-test.sif",
    ]
    missing = [str(n) for n in need if not n.exists()]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}: `make deps` (scripts/install-tools.sh)")
    return p


def _at(prefix: Path) -> list[str]:
    """--set overrides that point the job at a tools prefix other than /opt/gh-run."""
    if str(prefix) == DEFAULT_PREFIX:
        return []
    return [
        "--set",
        f"container.image={prefix}/images/gh-run-test.sif",
        "--set",
        f"container.binds=['{prefix}:{prefix}:ro']",
        "--set",
        f"profile.nsys_path={prefix}/bin/nsys",
    ]


def _submit(cli, prefix: Path, *sets: str, ok: bool = True):  # type: ignore[no-untyped-def]
    args = [JOB, "--executor", "slurm", "--wait", "--timeout", "280", *_at(prefix)]
    for s in sets:
        args += ["--set", s]
    res = cli("submit", *args, timeout=360)
    # nsys's own crash: once more (a test that expects the job to fail too: the crash is not
    # the failure it examines)
    if res.rc != 0 and nsys_crash.once_more(res.text, expects_success=ok):
        res = cli("submit", *args, timeout=360)
    if ok:
        assert res.rc == 0, res.text
    return res


def _collected(gh_home: Path) -> tuple[Path, dict[str, dict[str, object]]]:
    run = Store(gh_home).find_run("last")
    root = gh_home / "artifacts" / run.run_id
    manifest = json.loads((root / "manifest.json").read_text())
    return root, {f["relpath"]: f for f in manifest["files"]}


def _verified(root: Path, files: dict[str, dict[str, object]], rel: str) -> Path:
    """The collected file, non-empty, with the size and sha256 the manifest recorded."""
    assert rel in files, sorted(files)
    path = root / rel
    data = path.read_bytes()
    assert data, rel
    assert len(data) == files[rel]["size"]
    assert hashlib.sha256(data).hexdigest() == files[rel]["sha256"]
    return path


def _rows(sqlite: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows of one query of the real nsys's export, read-only."""
    conn = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _nvtx_steps(sqlite: Path) -> list[str]:
    """The step ranges the real nsys recorded (text inline or through StringIds)."""
    rows = _rows(
        sqlite,
        "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59",
    )
    return sorted(r[0] for r in rows if r[0] and r[0].startswith("train_step"))


def _analyze_last(cli) -> dict[str, object]:  # type: ignore[no-untyped-def]
    res = cli("analyze", "last", "--json")
    assert res.rc == 0, res.text
    return json.loads(res.out)  # type: ignore[no-any-return]


def _thread_names(sqlite: Path) -> dict[int, set[str]]:
    """The names the real nsys recorded per thread id. nsys records every thread of the node
    it saw, so a rank's export holds the other rank's threads too (both ranks share a node
    on the dev cluster)."""
    rows = _rows(
        sqlite,
        "SELECT t.globalTid % 16777216, s.value FROM ThreadNames t"
        " JOIN StringIds s ON s.id = t.nameId",
    )
    names: dict[int, set[str]] = {}
    for tid, name in rows:
        names.setdefault(int(tid), set()).add(name)
    return names


def _check_analysis(doc: dict[str, object], ranks: int, steps: int, gh_home: Path) -> None:
    """Per rank: the NVTX steps, the OS-runtime blocking of the main thread, the thread names.
    Each thread gh-run lists carries the name nsys recorded for its id, or `thread <tid>` where
    nsys recorded none. The loader thread renames itself (`ghr-loader`), and whether nsys
    records that name depends on when it first reads the thread: 2022.4 without sampling or
    context switches never does, 2024.2 under load sometimes did not (a run here: `thread
    14798`), and a rank's export may hold the other rank's loader by name and not its own (a
    CI rehearsal under 2022.4: `thread 6750`). So names are checked thread by thread against
    the export, never as "the name appears somewhere in the file"."""
    root, files = _collected(gh_home)
    got = doc["ranks"]
    assert isinstance(got, list) and [r["rank"] for r in got] == list(range(ranks))
    for r in got:
        assert r["steps"]["count"] == steps, r["steps"]
        assert any(n["name"].startswith("train_step") for n in r["nvtx"]), r["nvtx"]
        names = {t["name"] for t in r["threads"]}
        assert "python3" in names, names
        export = _verified(root, files, f"artifacts/smoke-profiled.{r['rank']}.sqlite")
        recorded = _thread_names(export)
        for t in r["threads"]:
            want = recorded.get(t["tid"], {f"thread {t['tid']}"})
            assert t["name"] in want, (t["tid"], t["name"], want)
        busy = [t for t in r["threads"] if t["osrt_calls"] > 0]
        assert len({t["tid"] for t in busy}) >= 2, busy  # the main thread and the loader
        assert r["main_thread"] == "python3" and r["main_thread_wait_ns"] > 0, r
        waits = {
            f["name"]
            for t in r["threads"]
            if t["name"] == "python3"
            for f in t["functions"]
            if f["name"].startswith(("sem_", "pthread_cond"))
        }
        assert waits, r["threads"]
        # the step picture: the NVTX step and the host rows, no GPU rows (a CPU workload)
        view = r["step_view"]
        kinds = {row["kind"] for row in view["rows"]}
        assert "nvtx" in kinds and not kinds & {"kernels", "copies", "memsets"}, view
        assert view["window"].startswith("train_step "), view["window"]
    sources = doc["sources"]
    assert isinstance(sources, list)
    # the rank comes from the trace first (RANK in the profiled process's environment, which
    # nsys records), the per-rank report name only where the environment was not recorded
    rules = {s["rank_rule"] for s in sources}
    assert rules <= {"RANK in the profiled environment", "file name"}, rules
    # the whole timeline opens in the Nsight Systems GUI from the report beside the export
    for s in sources:
        hint = s["open_with"].split()
        assert hint[0] == "nsys-ui" and hint[1] == s["path"].removesuffix(".sqlite") + ".nsys-rep"


def test_two_ranks_in_the_real_container_under_the_real_nsys(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    """nsys on the host around `apptainer exec --nv` (no GPU here: --nv is harmless), 2 nodes,
    one report per rank, exported and summarised in the job, collected with sha256."""
    res = _submit(cli, prefix)
    assert "COMPLETED" in res.out
    root, files = _collected(gh_home)
    script = (root / "run" / "job.sbatch").read_text()
    assert "apptainer \\\n  exec \\\n  --nv" in script  # nsys wraps the runtime, --nv rendered
    for rank in (0, 1):
        _verified(root, files, f"artifacts/smoke-profiled.{rank}.nsys-rep")
        sqlite = _verified(root, files, f"artifacts/smoke-profiled.{rank}.sqlite")
        for report in ("osrt_sum", "nvtx_sum"):
            csv = _verified(root, files, f"artifacts/smoke-profiled.{rank}_{report}.csv")
            assert "Time (%)" in csv.read_text()
        # the NVTX pitfall: nvtx 0.2.11 in the image is recorded by nsys 2023.4
        assert _nvtx_steps(sqlite) == [f"train_step {i}" for i in range(6)]
        # the rank variables reached the workload inside the container
        seen = json.loads(_verified(root, files, f"artifacts/steps_rank{rank}.json").read_text())
        assert seen["rank"] == rank and seen["env"]["SLURM_PROCID"] == str(rank)
        assert seen["nvtx"] == "0.2.11"
    _check_analysis(_analyze_last(cli), ranks=2, steps=6, gh_home=gh_home)


def test_nsys_inside_the_image_with_a_clean_environment(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    """The seed's pattern, nsys inside the image, with --cleanenv: the rank variables get in
    through APPTAINERENV_*, nsys expands %q{SLURM_PROCID} inside, the post-processing runs in
    the container too."""
    nsys = f"{prefix}/bin/nsys"
    _submit(
        cli,
        prefix,
        "profile.nsys_placement=container",
        f"profile.nsys_path={nsys}",
        "container.cleanenv=true",
    )
    root, files = _collected(gh_home)
    script = (root / "run" / "job.sbatch").read_text()
    assert "--cleanenv \\\n  --bind" in script
    assert f"gh-run-test.sif \\\n  {nsys} \\\n  profile" in script  # nsys inside the image
    assert 'export APPTAINERENV_SLURM_PROCID="${SLURM_PROCID}"' in script
    for rank in (0, 1):
        sqlite = _verified(root, files, f"artifacts/smoke-profiled.{rank}.sqlite")
        assert _nvtx_steps(sqlite) == [f"train_step {i}" for i in range(6)]
        seen = json.loads(_verified(root, files, f"artifacts/steps_rank{rank}.json").read_text())
        assert seen["env"]["RANK"] == str(rank) and seen["env"]["WORLD_SIZE"] == "2"
    _check_analysis(_analyze_last(cli), ranks=2, steps=6, gh_home=gh_home)


def test_containall_keeps_rank_variables_and_binds(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path, tmp_path: Path
) -> None:
    """--containall (private /tmp, PID and IPC namespaces, clean environment) with nsys inside
    the image: the rank variables still arrive (asked for: a single-process job gets none unless
    its spec says `workload.distributed_env`, tests/integration/test_job_env.py), and a job bind
    writes through to the host."""
    shared = tmp_path / "shared"
    shared.mkdir()
    _submit(
        cli,
        prefix,
        "resources.nodes=1",
        "workload.distributed_env=true",
        "profile.nsys_placement=container",
        f"profile.nsys_path={prefix}/bin/nsys",
        "container.containall=true",
        f"container.binds=['{prefix}:{prefix}:ro', '{shared}:/data']",
        "workload.args=[/opt/gh-run-test/cpu_steps.py, --steps, '3', --out, /data]",
    )
    seen = json.loads((shared / "steps_rank0.json").read_text())  # written inside, read here
    assert seen["env"] == {"RANK": "0", "SLURM_PROCID": "0", "WORLD_SIZE": "1"}
    root, files = _collected(gh_home)
    assert _nvtx_steps(_verified(root, files, "artifacts/smoke-profiled.sqlite")) == [
        f"train_step {i}" for i in range(3)
    ]


def test_a_workload_exit_code_passes_through_nsys_and_the_container(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    res = _submit(
        cli,
        prefix,
        "resources.nodes=1",
        "workload.args=[/opt/gh-run-test/cpu_steps.py, --steps, '2', --exit-code, '3']",
        ok=False,
    )
    assert res.rc == 1, res.text
    run = Store(gh_home).find_run("last")
    assert (run.state, run.exit_code) == ("FAILED", 3)
    root, files = _collected(gh_home)
    _verified(root, files, "artifacts/smoke-profiled.nsys-rep")  # the report is kept


def test_the_same_job_under_nsys_2022_4(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    """Rendered for 2022.4: its stats report names (osrtsum, nvtxsum), no CPU sampling or
    context switches (2022.4 may never finish with them here: docs/profiling.md)."""
    _submit(
        cli,
        prefix,
        "profile.nsys_version=2022.4",
        f"profile.nsys_path={prefix}/bin/nsys-2022.4",
        "profile.sample=none",
        "profile.cpuctxsw=none",
    )
    root, files = _collected(gh_home)
    for rank in (0, 1):
        sqlite = _verified(root, files, f"artifacts/smoke-profiled.{rank}.sqlite")
        conn = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        conn.close()
        assert "EXPORT_META_DATA" in tables and "META_DATA_EXPORT" not in tables
        assert _nvtx_steps(sqlite) == [f"train_step {i}" for i in range(6)]
        for report in ("osrtsum", "nvtxsum"):
            _verified(root, files, f"artifacts/smoke-profiled.{rank}_{report}.csv")
    doc = _analyze_last(cli)
    assert {s["tool_version"] for s in doc["sources"]} == {"2022.4.2.1"}
    _check_analysis(doc, ranks=2, steps=6, gh_home=gh_home)


def test_the_same_job_under_nsys_2024_2(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path
) -> None:
    """Rendered for 2024.2 (issue 24): its report names, its export schema (3.11.1, with nsys's
    own diagnostics in DIAGNOSTIC_EVENT), and the same readings as under 2023.4."""
    _submit(
        cli,
        prefix,
        "profile.nsys_version=2024.2",
        f"profile.nsys_path={prefix}/bin/nsys-2024.2",
    )
    root, files = _collected(gh_home)
    for rank in (0, 1):
        sqlite = _verified(root, files, f"artifacts/smoke-profiled.{rank}.sqlite")
        conn = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        meta = dict(conn.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
        conn.close()
        assert meta["EXPORT_PRODUCT_VERSION"].startswith("2024.2.3")
        assert meta["EXPORT_SCHEMA_VERSION"] == "3.11.1"
        assert "DIAGNOSTIC_EVENT" in tables
        assert _nvtx_steps(sqlite) == [f"train_step {i}" for i in range(6)]
        for report in ("osrt_sum", "nvtx_sum"):
            csv = _verified(root, files, f"artifacts/smoke-profiled.{rank}_{report}.csv")
            assert "Time (%)" in csv.read_text()
    doc = _analyze_last(cli)
    assert {s["tool_version"] for s in doc["sources"]} == {"2024.2.3.38"}
    _check_analysis(doc, ranks=2, steps=6, gh_home=gh_home)


def test_a_missing_image_is_refused_before_submit(  # type: ignore[no-untyped-def]
    dev_cluster, cli, gh_home: Path, prefix: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.sif"
    res = _submit(cli, prefix, f"container.image={missing}", ok=False)
    assert res.rc == 2, res.text
    assert f"container.image: {missing} does not exist on this machine" in res.err
    assert not (gh_home / "runs").exists() or not any((gh_home / "runs").iterdir())
    assert Store(gh_home).list_runs() == []
