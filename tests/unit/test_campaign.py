"""Campaigns without a cluster: the file model, expansion, overrides, cron, thresholds, the
array script (bash -n, shellcheck, each variant's exact argv), notify argv, the report."""

from __future__ import annotations

import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from orchestrator import runs as R
from orchestrator.campaign import expand, load_campaign
from orchestrator.campaign.cron import CronExpr
from orchestrator.campaign.finish import notify_argv, run_notify
from orchestrator.campaign.model import Notify, Threshold, apply_overrides
from orchestrator.campaign.report import trend_svg
from orchestrator.campaign.schedule import cron_line
from orchestrator.campaign.submission import _prepare_variants
from orchestrator.errors import UserError
from orchestrator.render import render_array
from orchestrator.yamlio import parse_text
from tests.conftest import REPO, have_shellcheck


def _campaign(tmp: Path, **over: object) -> Path:
    data: dict[str, object] = {
        "name": "t",
        "job": str(REPO / "jobs" / "smoke.yaml"),
        "matrix": {
            "a": {"x": ["workload.env.A=1"], "y": ["workload.env.A=2"]},
            "b": {"p": [], "q": ["resources.mem=300M"]},
        },
    }
    data.update(over)
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_shipped_campaigns_load_and_expand() -> None:
    canary = load_campaign(REPO / "campaigns" / "canary.yaml")
    assert [v.name for v in expand(canary)] == [
        f"{w}-{m}" for w in ("w0", "w2") for m in ("full", "lora", "offload")
    ]
    nightly = load_campaign(REPO / "campaigns" / "nightly.yaml")
    names = [v.name for v in expand(nightly)]
    assert len(names) == 10 and names[-2:] == ["full-um", "fp8"]


def test_matrix_exclude_include_and_names(tmp_path: Path) -> None:
    c = load_campaign(
        _campaign(
            tmp_path,
            exclude=[{"a": "y", "b": "q"}],
            include=[{"name": "extra", "set": ["workload.env.A=9"]}],
            variant_name="{a}_{b}",
        )
    )
    vs = expand(c)
    assert [v.name for v in vs] == ["x_p", "x_q", "y_p", "extra"]
    assert vs[1].overrides == ("workload.env.A=1", "resources.mem=300M")


@pytest.mark.parametrize(
    ("over", "words"),
    [
        (
            {"thresholds": {"step_tme_s": {"increase_pct": 5}}},
            "thresholds: unknown metric step_tme_s",
        ),
        ({"exclude": [{"a": "z"}]}, "a=z is not a matrix value"),
        ({"variant_name": "{zzz}"}, "not an axis"),
        ({"schedule": {"cron": "0 2 * *"}}, "has 4 fields"),
        ({"schedule": {"cron": "0 25 * * *"}}, "hour"),
        ({"schedule": {"cron": "0 2 * * *", "tz": "Mars/Base"}}, "not a time zone"),
        ({"baseline": {"policy": "pinned"}}, "needs campaign_id"),
        ({"thresholds": {"step_time_s": {}}}, "names no limit"),
        ({"job": "nope.yaml"}, "job: nope.yaml does not exist"),
        ({"bogus": 1}, "bogus"),
        ({"variant_name": "same"}, "appears twice"),
    ],
)
def test_bad_campaign_files_say_file_field_and_fix(
    tmp_path: Path, over: dict[str, object], words: str
) -> None:
    path = _campaign(tmp_path, **over)
    with pytest.raises(UserError) as exc:
        expand(load_campaign(path), str(path))
    assert words in str(exc.value)
    assert "c.yaml" in str(exc.value)


def test_append_override_extends_lists_and_refuses_non_lists() -> None:
    doc = parse_text("workload:\n  args: [-m, x]\n  command: py\n", "j.yaml")
    apply_overrides(doc, ["workload.args+=[--n, 4]", "workload.args+=--flag", "workload.command=q"])
    assert doc.data["workload"] == {"args": ["-m", "x", "--n", "4", "--flag"], "command": "q"}
    with pytest.raises(UserError, match="is not a list"):
        apply_overrides(doc, ["workload.command+=[a]"])
    with pytest.raises(UserError, match="does not exist"):
        apply_overrides(doc, ["workload.nope+=[a]"])


def test_cron_next_fire_in_a_time_zone() -> None:
    expr = CronExpr.parse("30 2 * * 1-5")
    after = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday
    nxt = expr.next_after(after, "Europe/Zurich")
    # Monday 02:30 in Zurich, after the DST switch of Sunday 29 March: UTC+2.
    assert nxt.isoformat() == "2026-03-30T02:30:00+02:00"
    assert CronExpr.parse("*/15 * * * *").next_after(after, "UTC").minute == 15
    with pytest.raises(ValueError, match="day of week"):
        CronExpr.parse("0 0 * * 9")


def test_thresholds() -> None:
    assert Threshold(increase_pct=5).crossed(1.06, 1.0) is not None
    assert Threshold(increase_pct=5).crossed(1.04, 1.0) is None
    assert Threshold(decrease_pct=5).crossed(90, 100) is not None
    assert Threshold(increase_points=3).crossed(13.5, 10) is not None
    assert Threshold(increase_points=3).crossed(12.5, 10) is None


def test_array_script_holds_each_variants_exact_quoted_argv(tmp_path: Path) -> None:
    hostile = 'it\'s $(rm -rf /) `x` "q"\n; done'
    path = _campaign(
        tmp_path,
        matrix={
            "a": {
                "x": ["workload.env.A=1"],
                "y": [
                    f"workload.args={yaml.safe_dump([hostile], default_flow_style=True).strip()}"
                ],
            }
        },
    )
    c = load_campaign(path)
    prepared = _prepare_variants(c, path, [])
    members = [
        R.render(p, f"cid.{name}", tmp_path / "runs" / f"cid.{name}") for name, _, p in prepared
    ]
    arr = render_array(members, "ghr-cid-g0", str(tmp_path / "camp"), 3)
    script = arr.script
    assert "#SBATCH --array=0-1%3" in script
    assert "#SBATCH --output=" + str(tmp_path / "camp") + "/%A_%a_0_log.out" in script
    for m in members:  # each arm embeds the variant's own task script, byte for byte
        task = next(f for f in m.context.files if f.name == "task.sh")
        assert task.content in script
    assert shlex.quote(hostile) in script  # the exact quoted word, in its own arm
    out = tmp_path / "arr.sbatch"
    out.write_text(script)
    assert subprocess.run(["bash", "-n", str(out)], check=False).returncode == 0
    if have_shellcheck():
        res = subprocess.run(["shellcheck", str(out)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stdout


def test_array_task_runs_its_own_variant(tmp_path: Path) -> None:
    """Run the array script's arm for index 1 with bash (no SLURM): only variant y runs."""
    path = _campaign(
        tmp_path,
        job=str(REPO / "jobs" / "smoke.yaml"),
        matrix={"a": {"x": ["workload.env.GREETING=ex"], "y": ["workload.env.GREETING=why"]}},
    )
    c = load_campaign(path)
    prepared = _prepare_variants(c, path, [])
    members = []
    for name, _, p in prepared:
        run_dir = tmp_path / "runs" / name
        r = R.render(p, f"cid.{name}", run_dir, "direct")
        R.write_run_folder(run_dir, r, p.spec)
        members.append(r)
    arr = render_array(members, "ghr-cid-g0", str(tmp_path), None)
    (tmp_path / "a.sbatch").write_text(arr.script)
    env = {"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "77"}
    res = subprocess.run(["bash", str(tmp_path / "a.sbatch")], env=env, check=False)
    assert res.returncode == 0
    assert (tmp_path / "runs" / "y" / "artifacts" / "hello.txt").read_text() == "hello from cid.y\n"
    assert not (tmp_path / "runs" / "x" / "artifacts" / "hello.txt").exists()
    assert (tmp_path / "runs" / "y" / "77_1_0_log.out").is_file()
    env["SLURM_ARRAY_TASK_ID"] = "5"
    assert (
        subprocess.run(["bash", str(tmp_path / "a.sbatch")], env=env, check=False).returncode == 2
    )


def test_notify_is_an_argv_never_a_shell(tmp_path: Path) -> None:
    report = tmp_path / "r; touch pwned.html"
    n = Notify(
        command=[
            sys.executable,
            "-c",
            "import sys; open(sys.argv[1],'w').write(sys.argv[2])",
            str(tmp_path / "m"),
            "see {report}",
        ]
    )
    assert notify_argv(n, report)[-1] == f"see {report}"
    assert run_notify(n, report, None).endswith("exited 0")
    assert (tmp_path / "m").read_text() == f"see {report}"
    assert not (tmp_path / "pwned.html").exists()


def test_cron_line_quotes_and_escapes_percent(tmp_path: Path) -> None:
    path = _campaign(tmp_path, schedule={"cron": "0 2 * * *", "tz": "UTC"})
    c = load_campaign(path)
    line = cron_line(c, Path("/x/50%/c.yaml"), Path("/h o/me"), Path("/l.log"))
    assert line.startswith("0 2 * * * cd ")
    assert " /x/50\\%/c.yaml " in line and "'/h o/me'" in line
    assert line.endswith("# gh-run-campaign:t")


def test_trend_svg_is_self_contained() -> None:
    svg = str(
        trend_svg({"a<b": [1.0, None, 2.0], "c": [None, None, None]}, ["n1", "n2", "n3"], "t")
    )
    assert svg.startswith("<svg") and "a&lt;b" in svg and "<polyline" in svg
    assert "href" not in svg
