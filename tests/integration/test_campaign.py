"""Campaigns on the real dev SLURM cluster: arrays, a report, a planted regression, resume
after SIGKILL, and the cron and SLURM schedules firing for real.

Stand-ins are named as such: `standin_job` writes a metrics.json like workloads.sft does, in
milliseconds instead of seconds, where the test is about orchestration, not the workload.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.cluster

PY = sys.executable


def _write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def standin_job(tmp: Path, ledger: Path) -> Path:
    """A stand-in for the workload: appends its run id to a ledger, writes metrics.json."""
    script = (
        'echo "$GH_RUN_ID" >> "$LEDGER"\n'
        'printf \'{"median_step_time_s": %s, "tokens_per_s": 1000}\\n\' "$STEP" '
        '> "$GH_RUN_ARTIFACTS/metrics.json"\n'
    )
    return _write(
        tmp / "standin.yaml",
        {
            "name": "standin",
            "cluster": "dev",
            "partition": "gh",
            "resources": {"nodes": 1, "cpus_per_task": 1, "mem": "100M", "time": "00:02:00"},
            "workload": {
                "command": "bash",
                "args": ["-c", script],
                "env": {"LEDGER": str(ledger), "STEP": "0.01"},
            },
            "artifacts": ["metrics.json"],
        },
    )


def _db(home: Path) -> sqlite3.Connection:
    con = sqlite3.connect(home / "state.db")
    con.row_factory = sqlite3.Row
    return con


def _campaign_rows(home: Path) -> list[sqlite3.Row]:
    if not (home / "state.db").exists():
        return []
    with _db(home) as con:
        try:
            return con.execute("SELECT * FROM campaigns ORDER BY created_at").fetchall()
        except sqlite3.OperationalError as exc:
            # the launcher's gh-run made the file a moment ago and is writing its tables
            if "no such table" in str(exc):
                return []
            raise


def _cid(text: str) -> str:
    for word in text.split():
        if word.count("-") >= 3 and word.rstrip(":") != word:
            return word.rstrip(":")
    raise AssertionError(f"no campaign id in {text!r}")


def test_canary_campaign_runs_to_a_report(dev_cluster: None, gh_home: Path) -> None:
    """campaigns/canary.yaml: the real workload, 7 variants, ONE job array, to a report (each
    variant linking its own run report)."""
    res = run_cli(
        ["campaign", "run", "campaigns/canary.yaml", "--wait", "--timeout", "240"], gh_home
    )
    assert res.rc == 0, res.text
    assert "7 variants in 1 submissions (1 job arrays)" in res.out
    cid = _cid(res.out)
    with _db(gh_home) as con:
        groups = con.execute(
            "SELECT * FROM campaign_groups WHERE campaign_id = ?", (cid,)
        ).fetchall()
        runs = con.execute("SELECT * FROM runs WHERE campaign_id = ?", (cid,)).fetchall()
    assert len(groups) == 1 and groups[0]["is_array"] == 1 and groups[0]["size"] == 7
    array_id = groups[0]["job_id"]
    assert sorted(r["job_id"] for r in runs) == sorted(f"{array_id}_{i}" for i in range(7))
    assert {r["state"] for r in runs} == {"COMPLETED"}
    report = gh_home / "campaigns" / cid / "report"
    data = json.loads((report / "campaign.json").read_text())
    assert data["state"] == "PASSED"
    assert {v["variant"] for v in data["variants"]} == {
        f"{w}-{m}" for w in ("w0", "w2") for m in ("full", "lora", "offload")
    } | {"data-bound"}
    for v in data["variants"]:
        assert v["metrics"]["step_time_s"] > 0, v  # from the workload's own metrics.json
        # every variant measured the figures it is judged on, and its phases' CPU time
        assert v["metrics"]["step_cpu_time_s"] > 0 and v["metrics"]["step_cpu_relative"] > 0
        assert v["metrics"]["phase_cpu_s.data"] > 0 and v["metrics"]["cpu_reference_s"] > 0
        assert (report / v["report"]).is_file(), v
        # one night of history: the band's warm-up, recorded and not judged, and it says why
        assert {f["rule"] for f in v["findings"]} == {"warm-up"}
        assert v["findings"][0]["note"].startswith("0 good nights of history")
    html = (report / "campaign.html").read_text()
    assert (
        "<svg" in html
        and "w2-offload" in html
        and "http"
        not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
            'meta http-equiv="Content-Security-Policy"', ""
        )
    )
    assert "| w0-lora | COMPLETED |" in (report / "campaign.md").read_text()
    # The Kineto trace and metrics.json were collected, verified, for every variant.
    for r in runs:
        got = {p.name for p in (gh_home / "artifacts" / r["run_id"] / "artifacts").iterdir()}
        assert "metrics.json" in got and any(n.endswith(".pt.trace.json.gz") for n in got), got
    hist = run_cli(["campaign", "history", "canary", "-m", "step_time_s"], gh_home)
    assert hist.rc == 0 and "w2-lora" in hist.out, hist.text
    # The analysis report over every variant of the campaign (CPU traces: no GPU timeline).
    out_dir = gh_home / "campaign-analysis"
    rep = run_cli(["report", "--campaign", cid, "--out", str(out_dir)], gh_home)
    assert rep.rc == 0, rep.text
    analysed = json.loads((out_dir / "report.json").read_text())
    assert sorted(r["label"] for r in analysed["runs"]) == sorted(
        [f"{w}-{m}" for w in ("w0", "w2") for m in ("full", "lora", "offload")] + ["data-bound"]
    )
    assert (out_dir / "report.html").is_file() and (out_dir / "report.md").is_file()
    # the reference workload on CPUs: its own flags in the advice, no GPU rows or zeros
    assert {r["workload_kind"] for r in analysed["runs"]} == {"reference"}
    for run in analysed["runs"]:
        for r in run["ranks"]:
            kinds = {row["kind"] for row in r["step_view"]["rows"]}
            assert kinds and not kinds & {"kernels", "copies", "memsets"}, kinds
    html = (out_dir / "report.html").read_text()
    assert html.count("no GPU timeline in this trace") >= 6 and "GPU busy over time" not in html


def test_planted_regression_is_flagged_with_exit_code_3(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """Night 1 sets the baseline; night 2 plants a slower setting in one variant (a 4x wider
    model): that variant's step time crosses +100%, the exit code is 3, notify runs."""
    marker = tmp_path / "notified.txt"
    job = REPO / "jobs" / "smoke_train.yaml"

    def campaign(slow: list[str]) -> Path:
        return _write(
            tmp_path / "regress.yaml",
            {
                "name": "regress",
                "job": str(job),
                "executor": "slurm",
                # 6 steps: the median skips the first (warm-up) step.
                "set": [
                    "workload.env.OMP_NUM_THREADS=1",
                    "workload.args+=[--steps, 6, --profile-steps, '4:6']",
                ],
                "matrix": {"v": {"steady": [], "planted": slow}},
                "thresholds": {"step_time_s": {"increase_pct": 100}},
                "notify": {
                    "command": [
                        PY,
                        "-c",
                        "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                        str(marker),
                        "{report}",
                    ],
                    "when": "problem",
                },
            },
        )

    first = run_cli(["campaign", "run", str(campaign([])), "--wait", "--timeout", "240"], gh_home)
    assert first.rc == 0, first.text
    assert not marker.exists()  # passed: nobody is told
    second = run_cli(
        [
            "campaign",
            "run",
            str(campaign(["workload.args+=[--hidden, 512]"])),
            "--wait",
            "--timeout",
            "240",
        ],
        gh_home,
    )
    assert second.rc == 3, second.text
    cid = _cid(second.out)
    data = json.loads((gh_home / "campaigns" / cid / "report" / "campaign.json").read_text())
    assert data["state"] == "REGRESSED"
    assert data["baseline_id"] == _cid(first.out)
    flagged = {(f["variant"], f["metric"]) for f in data["regressions"]}
    assert ("planted", "step_time_s") in flagged, data["regressions"]
    assert "regression planted step_time_s" in second.out
    html = (gh_home / "campaigns" / cid / "report" / "campaign.html").read_text()
    assert 'class="regression"' in html
    assert marker.read_text() == str(gh_home / "campaigns" / cid / "report" / "campaign.html")


def test_sigkill_after_half_the_submissions_resumes_each_variant_once(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """4 groups (4 memory sizes) x 2 variants. A pass-through sbatch wrapper (the real sbatch
    runs) SIGKILLs gh-run right after the 2nd sbatch was accepted — the worst moment: the job
    exists, the store does not know its id. Resume finds it by name and sends only the rest."""
    ledger = tmp_path / "ledger.txt"
    job = standin_job(tmp_path, ledger)
    camp = _write(
        tmp_path / "killme.yaml",
        {
            "name": "killme",
            "job": str(job),
            "executor": "slurm",
            "matrix": {
                "mem": {f"m{m}": [f"resources.mem={m}M"] for m in (100, 110, 120, 130)},
                "x": {"a": [], "b": ["workload.env.STEP=0.02"]},
            },
        },
    )
    real = shutil.which("sbatch")
    assert real
    wrap = tmp_path / "bin"
    wrap.mkdir()
    count = tmp_path / "sbatch.count"
    (wrap / "sbatch").write_text(
        "#!/bin/bash\n"
        f'echo x >> "{count}"\n'
        f'"{real}" "$@"; rc=$?\n'
        f'if [ "$(wc -l < "{count}")" -eq 2 ]; then kill -9 "$PPID"; fi\n'
        "exit $rc\n"
    )
    (wrap / "sbatch").chmod(0o755)
    env = {"PATH": f"{wrap}:{Path(PY).parent}:{os.environ['PATH']}"}
    killed = run_cli(["campaign", "run", str(camp)], gh_home, env=env)
    assert killed.rc == -9, killed.text
    rows = _campaign_rows(gh_home)
    assert len(rows) == 1 and rows[0]["state"] == "PLANNED"
    cid = rows[0]["campaign_id"]
    with _db(gh_home) as con:
        states = [
            r["state"]
            for r in con.execute(
                "SELECT state FROM campaign_groups WHERE campaign_id = ? ORDER BY group_index",
                (cid,),
            )
        ]
    # Group 1 was claimed and sent, its job id not recorded; its sender is gone (lock free).
    assert states == ["SUBMITTED", "SENDING", "PLANNED", "PLANNED"]

    res = run_cli(["campaign", "resume", cid, "--timeout", "180"], gh_home)
    assert res.rc == 0, res.text
    assert f"found ghr-{cid}-g1 in SLURM" in res.out
    assert len(count.read_text().splitlines()) == 2  # the wrapper saw only the first run's calls
    lines = ledger.read_text().split()
    assert sorted(lines) == sorted(set(lines)) and len(lines) == 8, lines
    for g in range(4):
        acct = subprocess.run(
            [
                "sacct",
                "-n",
                "-X",
                "-P",
                "-o",
                "JobID",
                "--name",
                f"ghr-{cid}-g{g}",
                "-S",
                "now-1hour",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert len({j.split("_")[0] for j in acct}) == 1, (g, acct)  # one array per group
    data = json.loads((gh_home / "campaigns" / cid / "report" / "campaign.json").read_text())
    assert data["state"] == "PASSED" and len(data["variants"]) == 8


def _sbatch_wrapper(tmp: Path, body: str) -> dict[str, str]:
    """PATH with a pass-through `sbatch` in front: `body` runs with $n = this call's number and
    $REAL = the real sbatch; the env for run_cli or a subprocess."""
    real = shutil.which("sbatch")
    assert real
    wrap = tmp / "bin"
    wrap.mkdir(exist_ok=True)
    count = tmp / "sbatch.count"
    (wrap / "sbatch").write_text(
        f'#!/bin/bash\nREAL="{real}"\necho "$$" >> "{count}"; n=$(wc -l < "{count}")\n' + body
    )
    (wrap / "sbatch").chmod(0o755)
    return {"PATH": f"{wrap}:{Path(PY).parent}:{os.environ['PATH']}"}


def _jobs_named(name: str) -> set[str]:
    """Distinct (array) job ids with this name, asked of the controller and accounting."""
    queue = subprocess.run(
        ["squeue", "-h", "-r", "--states=all", "-o", "%F", "--name", name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    acct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID", "--name", name, "-S", "now-1hour"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return set(queue) | {j.split("_")[0] for j in acct}


def _group_rows(home: Path, cid: str) -> list[sqlite3.Row]:
    with _db(home) as con:
        return con.execute(
            "SELECT * FROM campaign_groups WHERE campaign_id = ? ORDER BY group_index", (cid,)
        ).fetchall()


def test_resume_finds_a_lost_answer_and_resends_a_refused_submission(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """Two groups both end SUBMIT_FAILED: group 0's sbatch reached the controller but its answer
    was lost (the wrapper runs the real sbatch, then reports a socket timeout); group 1's never
    reached it. Resume must record group 0 (not send it twice) and send group 1 again."""
    ledger = tmp_path / "ledger.txt"
    camp = _write(
        tmp_path / "lost.yaml",
        {
            "name": "lost",
            "job": str(standin_job(tmp_path, ledger)),
            "executor": "slurm",
            "matrix": {
                "mem": {"m100": ["resources.mem=100M"], "m110": ["resources.mem=110M"]},
                "x": {"a": [], "b": ["workload.env.STEP=0.02"]},
            },
        },
    )
    env = _sbatch_wrapper(
        tmp_path,
        'if [ "$n" -eq 1 ]; then "$REAL" "$@" > /dev/null || exit $?; fi\n'
        'if [ "$n" -eq 1 ]; then echo "sbatch: error: Socket timed out on send/recv" >&2; fi\n'
        'if [ "$n" -eq 2 ]; then echo "sbatch: error: Unable to contact slurm controller" >&2; fi\n'
        "exit 1\n",
    )
    sent = run_cli(["campaign", "run", str(camp)], gh_home, env=env)
    assert sent.rc == 1, sent.text  # every group failed
    cid = _campaign_rows(gh_home)[0]["campaign_id"]
    assert [g["state"] for g in _group_rows(gh_home, cid)] == ["SUBMIT_FAILED"] * 2
    res = run_cli(["campaign", "resume", cid, "--timeout", "180"], gh_home)
    assert res.rc == 0, res.text
    assert f"found ghr-{cid}-g0 in SLURM" in res.out, res.out
    assert f"ghr-{cid}-g1: its submission had failed and SLURM does not have it: sent again" in (
        res.out
    )
    lines = ledger.read_text().split()
    assert sorted(lines) == sorted(set(lines)) and len(lines) == 4, lines
    for g in range(2):
        assert len(_jobs_named(f"ghr-{cid}-g{g}")) == 1, g
    data = json.loads((gh_home / "campaigns" / cid / "report" / "campaign.json").read_text())
    assert data["state"] == "PASSED" and len(data["variants"]) == 4


def test_find_by_name_without_accounting_uses_the_controller_and_says_so_once(
    dev_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """slurmdbd unreachable (a copy of slurm.conf whose AccountingStoragePort nobody listens on:
    the real sacct fails), the controller up: a queued job is still found by its name."""
    from orchestrator.executors.slurm import SlurmExecutor
    from orchestrator.executors.slurm_watch import TrackedJob

    conf = Path(os.environ["SLURM_CONF"])
    broken = tmp_path / "etc"
    shutil.copytree(conf.parent, broken)
    text = (broken / "slurm.conf").read_text()
    (broken / "slurm.conf").write_text(
        "\n".join(
            "AccountingStoragePort=1" if ln.startswith("AccountingStoragePort=") else ln
            for ln in text.splitlines()
        )
        + "\n"
    )
    name = f"ghr-noacct-{os.getpid()}-{int(time.time())}"
    job_id = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-J", name, "-t", "1", "--mem", "50M", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        monkeypatch.setenv("SLURM_CONF", str(broken / "slurm.conf"))
        assert subprocess.run(["sacct", "-n", "-X"], capture_output=True, check=False).returncode
        monkeypatch.setattr(TrackedJob.watcher, "_warned", False)
        monkeypatch.setattr(TrackedJob.watcher, "warn", None)
        warnings: list[str] = []
        ex = SlurmExecutor(warn=warnings.append)
        assert ex.find_array_by_name(name) == job_id
        assert ex.find_all_by_name(name) == [job_id]
        assert ex.find_array_by_name(f"{name}-absent") is None  # the controller said so
        assert len(warnings) == 1 and "accounting (sacct) unavailable" in warnings[0], warnings
    finally:
        subprocess.run(["scancel", job_id], check=False)


def test_two_concurrent_resumes_send_each_group_once(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """Two `resume` processes on one planned campaign, each sbatch slowed by a pass-through
    wrapper so they overlap: every group is claimed by one of them and sent exactly once."""
    from orchestrator.campaign import load_campaign, plan
    from orchestrator.store.db import Store

    ledger = tmp_path / "ledger.txt"
    camp = _write(
        tmp_path / "twice.yaml",
        {
            "name": "twice",
            "job": str(standin_job(tmp_path, ledger)),
            "executor": "slurm",
            "matrix": {
                "mem": {f"m{m}": [f"resources.mem={m}M"] for m in (100, 110, 120, 130)},
                "x": {"a": [], "b": ["workload.env.STEP=0.02"]},
            },
        },
    )
    cid = plan(Store(gh_home), load_campaign(camp), camp, gh_home, "slurm")
    env = {**os.environ, **_sbatch_wrapper(tmp_path, 'sleep 1\nexec "$REAL" "$@"\n')}
    code = (
        "import sys; from pathlib import Path; from orchestrator.store.db import Store; "
        "from orchestrator.campaign import resume; "
        "r = resume(Store(Path(sys.argv[1])), sys.argv[2]); print(r)"
    )
    procs = [
        subprocess.Popen(
            [PY, "-c", code, str(gh_home), cid],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len((tmp_path / "sbatch.count").read_text().split()) == 4, outs  # 4 sbatch in all
    rows = _group_rows(gh_home, cid)
    assert [g["state"] for g in rows] == ["SUBMITTED"] * 4
    for g in rows:
        assert _jobs_named(g["job_name"]) == {g["job_id"]}, (g["job_name"], outs)
    res = run_cli(["campaign", "resume", cid, "--timeout", "180"], gh_home)
    assert res.rc == 0, res.text
    lines = ledger.read_text().split()
    assert sorted(lines) == sorted(set(lines)) and len(lines) == 8, lines


def test_variants_that_differ_in_resources_go_out_separately(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """Two memory sizes x two variants, plus one variant alone at a third size: two job arrays
    and one single job, each asking the real controller for its own memory."""
    ledger = tmp_path / "ledger.txt"
    camp = _write(
        tmp_path / "split.yaml",
        {
            "name": "split",
            "job": str(standin_job(tmp_path, ledger)),
            "executor": "slurm",
            "matrix": {
                "mem": {"m100": ["resources.mem=100M"], "m120": ["resources.mem=120M"]},
                "x": {"a": [], "b": ["workload.env.STEP=0.02"]},
            },
            "include": [{"name": "solo", "set": ["resources.mem=140M"]}],
        },
    )
    res = run_cli(["campaign", "run", str(camp), "--wait", "--timeout", "180"], gh_home)
    assert res.rc == 0, res.text
    assert "5 variants in 3 submissions (2 job arrays)" in res.out, res.out
    cid = _cid(res.out)
    rows = _group_rows(gh_home, cid)
    assert [(g["size"], g["is_array"]) for g in rows] == [(2, 1), (2, 1), (1, 0)]
    with _db(gh_home) as con:
        runs = {
            r["variant"]: r["job_id"]
            for r in con.execute("SELECT * FROM runs WHERE campaign_id = ?", (cid,))
        }
    a0, a1, single = (g["job_id"] for g in rows)
    assert runs == {
        "m100-a": f"{a0}_0",
        "m100-b": f"{a0}_1",
        "m120-a": f"{a1}_0",
        "m120-b": f"{a1}_1",
        "solo": single,
    }
    acct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "JobID,ReqMem", "-j", f"{a0},{a1},{single}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    mem = {line.split("|")[0].split("_")[0]: line.split("|")[1] for line in acct}
    assert mem == {a0: "100M", a1: "120M", single: "140M"}, acct


def test_arrays_are_chunked_at_the_array_limit_on_the_real_controller(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """The dev controller's MaxArraySize is SLURM's default (1001), which this cluster cannot
    lower without a restart: plan with a limit of 2 instead, and send held to the real
    controller: an array of 2 and a single job."""
    from orchestrator.campaign import load_campaign, plan, send
    from orchestrator.campaign.submission import max_array_size
    from orchestrator.store.db import Store

    assert max_array_size() == 1001  # asked of the controller (`scontrol show config`)
    camp = _write(
        tmp_path / "chunk.yaml",
        {
            "name": "chunk",
            "job": str(standin_job(tmp_path, tmp_path / "ledger.txt")),
            "executor": "slurm",
            "matrix": {"x": {"a": [], "b": ["workload.env.STEP=0.02"], "c": []}},
        },
    )
    store = Store(gh_home)
    cid = plan(store, load_campaign(camp), camp, gh_home, "slurm", array_limit=2)
    assert send(store, cid, hold=True) == []
    rows = _group_rows(gh_home, cid)
    try:
        assert [(g["size"], g["is_array"]) for g in rows] == [(2, 1), (1, 0)]
        elements = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i", "-j", rows[0]["job_id"]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert sorted(elements) == [f"{rows[0]['job_id']}_0", f"{rows[0]['job_id']}_1"]
    finally:
        subprocess.run(["scancel", *(g["job_id"] for g in rows if g["job_id"])], check=False)


def _tiny_scheduled(tmp_path: Path, name: str, cron: str, mode: str) -> Path:
    ledger = tmp_path / f"{name}.ledger"
    job = standin_job(tmp_path, ledger)
    return _write(
        tmp_path / f"{name}.yaml",
        {
            "name": name,
            "job": str(job),
            "executor": "slurm",
            "matrix": {"x": {"a": []}},
            "schedule": {"cron": cron, "tz": "UTC", "mode": mode, "launcher_time": "00:05:00"},
        },
    )


def _wait_for_campaign(home: Path, timeout: float) -> list[sqlite3.Row]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _campaign_rows(home)
        if rows and rows[0]["state"] in ("PASSED", "REGRESSED", "FAILED"):
            return rows
        time.sleep(1)
    return _campaign_rows(home)


@pytest.mark.crontab  # rewrites the machine's crontab, as another session's test may
def test_cron_schedule_fires(dev_cluster: None, gh_home: Path, tmp_path: Path) -> None:
    """A `* * * * *` crontab entry (Debian's cron) really launches the campaign."""
    if shutil.which("cron") is None or shutil.which("crontab") is None:
        pytest.skip("Debian's cron is not installed (apt-get install -y cron)")
    if subprocess.run(["pgrep", "-x", "cron"], capture_output=True, check=False).returncode != 0:
        subprocess.run(["cron"], check=True)  # daemonizes
    camp = _tiny_scheduled(tmp_path, "cronfire", "* * * * *", "cron")
    res = run_cli(["campaign", "schedule", str(camp)], gh_home)
    try:
        assert res.rc == 0, res.text
        tab = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
        assert "# gh-run-campaign:cronfire" in tab
        listed = run_cli(["campaign", "list"], gh_home)
        assert "cronfire" in listed.out and "crontab entry present" in listed.out, listed.text
        # cron fires within a minute; its job may then queue behind other tests' jobs (this
        # test shares the cluster), so the wait is bounded well above that, and ends when done
        rows = _wait_for_campaign(gh_home, 300)
        assert rows and rows[0]["name"] == "cronfire" and rows[0]["state"] == "PASSED", rows
    finally:
        gone = run_cli(["campaign", "unschedule", "cronfire"], gh_home)
    assert gone.rc == 0, gone.text
    tab = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False).stdout
    assert "gh-run-campaign:cronfire" not in tab


def test_slurm_schedule_fires_and_queues_the_next_night(
    dev_cluster: None, gh_home: Path, tmp_path: Path
) -> None:
    """The self-resubmitting launcher: begins seconds ahead, queues tomorrow, runs the campaign."""
    # its own name: the launcher's job name is the campaign's, and other sessions share SLURM
    name = f"slurmfire-{uuid.uuid4().hex[:8]}"
    camp = _tiny_scheduled(tmp_path, name, "30 4 * * *", "slurm")
    res = run_cli(["campaign", "schedule", str(camp), "--first-begin", "now+2"], gh_home)
    try:
        assert res.rc == 0, res.text
        rows = _wait_for_campaign(gh_home, 150)
        assert rows and rows[0]["name"] == name and rows[0]["state"] == "PASSED", rows
        queued = subprocess.run(
            ["squeue", "-h", "-o", "%i|%T|%S", "--name", f"ghr-schedule-{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        pending = [q for q in queued if "|PENDING|" in q]
        assert len(pending) == 1 and "T04:30:00" in pending[0], queued  # tomorrow's launcher
    finally:
        gone = run_cli(["campaign", "unschedule", name], gh_home)
    assert gone.rc == 0 and "cancelled" in gone.out, gone.text
    left = subprocess.run(
        ["squeue", "-h", "-t", "PENDING", "--name", f"ghr-schedule-{name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert left.strip() == ""
