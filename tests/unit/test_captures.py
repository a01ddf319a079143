"""Runs are not ranks: inputs from separate captures are separate runs (analysed one by one,
with the evidence, and `compare` offered); the ranks of one job are read together as before.
Real recordings (six unrelated H100 runs, two-rank DDP jobs in Kineto and nsys) and built ones
for the evidence the recordings lack (hosts, job ids, launcher arguments, no time at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.analysis import analyze_runs
from orchestrator.analysis.captures import APART_NS, Capture, find_spec, separated, split, tied
from tests.fixtures.kineto_builder import training_trace
from tests.fixtures.nsys_builder import NsysBuilder
from tests.fixtures.recordings import unpacked
from tests.unit.test_analysis_report import cli

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "nsys_h100"
DDP = DATA / "ddp_h200"
T0 = 1_795_420_000_000_000_000  # a Unix time in ns (2026)


def test_a_folder_of_unrelated_runs_is_not_merged() -> None:
    found = analyze_runs([H100], label=str(H100))
    assert len(found.runs) == 6
    assert sorted(Path(m.label or "").name for m in found.runs) == sorted(
        p.name for p in H100.iterdir() if p.is_dir()
    )
    assert all(len(m.ranks) == 1 and m.ranks[0].rank == 0 for m in found.runs)
    why = " ".join(found.why)
    # each export says its job had one rank, and the captures are minutes apart
    assert "each is a whole job by itself (WORLD_SIZE=1 in the profiled environment)" in why
    assert "apart (the ranks of a job run together)" in why
    assert "their commands differ" in why


@pytest.mark.parametrize(
    ("folder", "rule"),
    [
        (DDP / "kineto", "distributedInfo.rank"),
        # the nsys 2024.2 recording: 2023.4's reports of the same job lost their kernels and
        # are refused as lost captures
        (DATA / "ddp_nsys2024", "RANK in the profiled environment"),
    ],
)
def test_the_ranks_of_one_job_are_still_one_run(folder: Path, rule: str) -> None:
    if any(folder.glob("*.sqlite.xz")):
        folder = unpacked(folder)
    found = analyze_runs([folder])
    assert len(found.runs) == 1 and not found.why
    m = found.runs[0]
    assert [r.rank for r in m.ranks] == [0, 1]
    assert m.inputs_tied_by == [f"distinct ranks of world size 2 ({rule})"]
    assert [s.rank_rule for s in m.sources] == [rule, rule]


def test_two_ddp_jobs_are_two_runs_of_two_ranks() -> None:
    found = analyze_runs([DDP / "kineto", DDP / "kineto_straggler"])
    assert [len(m.ranks) for m in found.runs] == [2, 2]
    assert [Path(m.label or "").name for m in found.runs] == ["kineto", "kineto_straggler"]
    assert any(w.startswith("both are rank 0 (distributedInfo.rank)") for w in found.why)
    # the straggler is found within its own job, not across the two
    assert found.runs[1].cross_rank.straggler is not None
    assert found.runs[1].cross_rank.straggler.rank == 1


def test_one_export_of_two_processes_stays_one_run_of_two_ranks() -> None:
    found = analyze_runs([DDP / "nsys_one_report"])
    assert len(found.runs) == 1 and len(found.runs[0].ranks) == 2


def _unranked(path: Path, base_ns: int | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    b = training_trace(rank=0)
    b.rank = None  # no distributedInfo, and the names carry no rank
    b.base_time_ns = base_ns
    return b.write(path)


def test_unranked_traces_captured_together_are_ranks_apart_are_runs(tmp_path: Path) -> None:
    together = [_unranked(tmp_path / "t" / f"w{i}.json", T0) for i in range(2)]
    found = analyze_runs([tmp_path / "t"])
    assert len(found.runs) == 1 and len(found.runs[0].ranks) == 2
    assert found.runs[0].inputs_tied_by == ["captured at the same time on one host"]
    assert {s.rank_rule for s in found.runs[0].sources} == {"file order"}
    apart = [_unranked(tmp_path / "a" / f"w{i}.json", T0 + i * 60 * 10**9) for i in range(2)]
    found = analyze_runs([tmp_path / "a"])
    assert len(found.runs) == 2 and "apart" in found.why[0]
    # no capture time at all, no rank: nothing ties them, so they are not merged
    for i in range(2):
        _unranked(tmp_path / "n" / f"w{i}.json", None)
    found = analyze_runs([tmp_path / "n"])
    assert len(found.runs) == 2
    assert found.why == [
        "nothing ties them (no rank in the traces or their names, no capture time that both"
        " record): e.g. w0 and w1"
    ]
    assert together and apart


def _export(path: Path, *, start: int, host: str, argv: list[str], env: dict[str, str]) -> Path:
    b = NsysBuilder(path)
    b.add_gpu(0)
    b.add_kernel(1_000, 50_000, "k")
    b.add_session(start, host)
    b.add_command(argv)
    b.add_env(env, separator=";")
    return b.close()


def test_nsys_exports_of_one_multi_node_job_are_ranks(tmp_path: Path) -> None:
    argv = ["python3", "train.py", "--lr", "1e-4"]
    for r, host in enumerate(("node1", "node2")):
        env = {"RANK": str(r), "WORLD_SIZE": "2", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
        # launcher-given rank arguments are not a different command
        _export(tmp_path / f"job.{r}.sqlite", start=T0 + r * 10**6, host=host,
                argv=[*argv, f"--local_rank={r}"], env=env)  # fmt: skip
    found = analyze_runs([tmp_path])
    assert len(found.runs) == 1
    assert found.runs[0].inputs_tied_by == [
        "distinct ranks of world size 2 (RANK in the profiled environment)"
    ]


def test_a_requeued_job_is_two_runs_though_its_job_id_is_the_same(tmp_path: Path) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "1", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
    for i in range(2):
        _export(tmp_path / f"attempt{i}.sqlite", start=T0 + i * 3600 * 10**9, host="n1",
                argv=["python3", "train.py"], env=env)  # fmt: skip
    found = analyze_runs([tmp_path])
    assert len(found.runs) == 2
    assert "their captures are 1.0 h apart (the ranks of a job run together)" in " ".join(found.why)


def _cap(**kw: object) -> Capture:
    return Capture(path=Path(str(kw.pop("name", "x"))), kind="nsys", **kw)  # type: ignore[arg-type]


def test_the_evidence_each_rule_uses() -> None:
    now = (T0, T0 + 10**9)
    later = (T0 + 10**9 + APART_NS + 1, T0 + 2 * 10**9 + APART_NS + 1)
    # different SLURM jobs: separate, whatever else they share
    a = _cap(window=now, job={"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0"})
    b = _cap(window=now, job={"SLURM_JOB_ID": "2", "SLURM_STEP_ID": "0"})
    assert [k for k, _ in separated(a, b)] == ["job"]
    # one torchrun run id ties two unranked inputs
    a, b = _cap(job={"TORCHELASTIC_RUN_ID": "r"}), _cap(job={"TORCHELASTIC_RUN_ID": "r"})
    assert not separated(a, b) and tied(a, b) == "the same TORCHELASTIC_RUN_ID (r)"
    # one rendezvous port ties nothing (two runs one after another may use it)
    a, b = (
        _cap(job={"MASTER_ADDR": "n", "MASTER_PORT": "29500"}),
        _cap(job={"MASTER_ADDR": "n", "MASTER_PORT": "29500"}),
    )
    assert not separated(a, b) and tied(a, b) is None
    # unranked on two hosts: separate; on one host at one time: tied
    a, b = _cap(window=now, host="n1"), _cap(window=now, host="n2")
    assert [k for k, _ in separated(a, b)] == ["host"]
    b.host = "n1"
    assert tied(a, b) == "captured at the same time on one host"
    # ranked on two hosts: the ranks of a multi-node job
    a = _cap(window=now, host="n1", ranks=[0], world=(2, "WORLD_SIZE=2"), rank_rule="RANK")
    b = _cap(window=now, host="n2", ranks=[1], world=(2, "WORLD_SIZE=2"), rank_rule="RANK")
    assert not separated(a, b) and tied(a, b) is not None
    b.world = (4, "WORLD_SIZE=4")
    assert [k for k, _ in separated(a, b)] == ["world size"]
    b.world, b.window = (2, "WORLD_SIZE=2"), later
    assert [k for k, _ in separated(a, b)] == ["time"]
    # the same rank twice, from the trace or the file name
    assert separated(_cap(ranks=[0], rank_rule="RANK"), _cap(ranks=[0], rank_rule="RANK"))
    assert separated(_cap(name_rank=3), _cap(name_rank=3))
    # commands: a different argument separates
    a, b = (
        _cap(command=("python", "t.py", "--lr", "1")),
        _cap(command=("python", "t.py", "--lr", "2")),
    )
    assert [t for _, t in separated(a, b)] == ["their commands differ (--lr 1 vs --lr 2)"]
    # different gh-run run folders
    assert separated(_cap(spec="/a/spec.lock.yaml"), _cap(spec="/b/spec.lock.yaml"))
    assert tied(_cap(spec="/a/spec.lock.yaml"), _cap(spec="/a/spec.lock.yaml"))


def test_run_folders_are_told_apart_resolved_and_shown_as_named(tmp_path: Path) -> None:
    """Two run folders reached through a link: the same folder whatever the path, and the
    message shows the paths the inputs gave, never where the link led (a machine's own path
    in the output, as the golden of tests/data/memory_h200 once held)."""
    real = tmp_path / "real"
    for name in ("one", "two"):
        (real / name).mkdir(parents=True)
        (real / name / "spec.lock.yaml").write_text("name: x\n")
    (tmp_path / "data").symlink_to(real, target_is_directory=True)
    a, b, again = _cap(name="a"), _cap(name="b"), _cap(name="c")
    find_spec(a, tmp_path / "data" / "one")
    find_spec(b, tmp_path / "data" / "two")
    find_spec(again, real / "one")
    assert a.spec == again.spec == str((real / "one" / "spec.lock.yaml").resolve())
    assert tied(a, again) == f"the same gh-run run folder ({tmp_path}/data/one/spec.lock.yaml)"
    [text] = [t for k, t in separated(a, b) if k == "spec"]
    assert text == (
        f"they lie in different gh-run run folders ({tmp_path}/data/one/spec.lock.yaml,"
        f" {tmp_path}/data/two/spec.lock.yaml)"
    )
    find_spec(a, tmp_path)  # no run folder around it
    assert a.spec is None and a.spec_named is None


def test_split_keeps_order_and_puts_each_input_in_the_first_run_it_fits() -> None:
    now = (T0, T0 + 10**9)
    caps = [
        _cap(name="a0", ranks=[0], world=(2, "w"), window=now, rank_rule="RANK"),
        _cap(name="b0", ranks=[0], world=(2, "w"), window=now, rank_rule="RANK"),
        _cap(name="a1", ranks=[1], world=(2, "w"), window=now, rank_rule="RANK"),
        _cap(name="b1", ranks=[1], world=(2, "w"), window=now, rank_rule="RANK"),
    ]
    groups, why = split(caps)
    assert [g.members for g in groups] == [[0, 2], [1, 3]]
    assert why == ["both are rank 0 (RANK), which a job has once: e.g. a0 and b0"]


def test_analyze_of_a_folder_of_runs_says_so_and_offers_compare() -> None:
    res = CliRunner(env={"COLUMNS": "120"}).invoke(cli(), ["analyze", str(H100)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"{H100}: 6 separate runs, analysed one by one below")
    assert out.count("run 1 of 6: ") == 1 and out.count("run 6 of 6: ") == 1
    assert f"side by side: gh-run compare {H100}" in out
    assert "min of 6" not in out and "rank 5" not in out  # never one 6-rank job
    res = CliRunner().invoke(cli(), ["analyze", "--json", str(H100)])
    data = json.loads(res.output)
    assert data["format"] == "gh-run.runs/1" and len(data["runs"]) == 6 and data["why"]
    # one run: the Metrics as before
    res = CliRunner().invoke(cli(), ["analyze", "--json", str(DDP / "kineto")])
    assert json.loads(res.output)["format"] == "gh-run.metrics/1"


def test_compare_and_report_take_a_folder_of_runs_as_its_runs(tmp_path: Path) -> None:
    res = CliRunner(env={"COLUMNS": "250"}).invoke(cli(), ["compare", "--json", str(H100)])
    assert res.exit_code == 0, res.output
    c = json.loads(res.output)
    assert c["labels"] == sorted(c["labels"]) and len(c["labels"]) == 6
    res = CliRunner().invoke(cli(), ["compare", str(DDP / "kineto")])
    assert res.exit_code == 2 and "at least two runs" in res.output
    # ddp_h200's nsys exports lost their kernels (nsys 2023.4): refused unless accepted
    res = CliRunner().invoke(cli(), ["report", str(DDP), "--out", str(tmp_path / "r")])
    assert res.exit_code == 1 and "lost data" in str(res.exception)
    accept = {"GH_RUN_ACCEPT_LOST_DATA": "1"}
    res = CliRunner(env=accept).invoke(cli(), ["report", str(DDP), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [len(r["ranks"]) for r in data["runs"]] == [2, 2, 2, 2]
