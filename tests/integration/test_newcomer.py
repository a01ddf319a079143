"""Issue 36, "Done means": a newcomer's first week, as one path, from the built wheel.

The wheel is built as `make dist` builds it (scripts/build_dist.py: the build backend alone, the
sdist, then the wheel from it), installed into a fresh venv of the machine's own python3,
outside this checkout; gh-run is then run by its absolute path with that venv NOT on PATH (the
jobs must still find gh-run's own workloads). Then:

1. a laptop: an empty folder, no site, user or project cluster file: `init` (the built-in
   cluster `local`), `submit jobs/smoke.yaml --wait`, `analyze last`, `report last`;
2. a site: the dev cluster's file installed where a site keeps it ($GH_RUN_SITE_DIR/clusters),
   a new project: `init`, `check` (the real controller), `submit --wait` (SLURM), `analyze`;
   a campaign over the starter job judged on the step time with the traced steps as the
   fallback its file allows: a first night (PASSED, it sets the baseline), a night with one
   variant 4x slower (REGRESSED, exit 3, judged by the fallback and said so), a campaign
   without the fallback (UNJUDGED, exit 1, the metric and why); `report --campaign`; the
   campaign report measured in headless Chromium at 640 and 1280 px.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.browser import page_width

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]


def run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, f"{res.args}: {res.stdout[-3000:]}{res.stderr[-3000:]}"
    return res


@dataclass
class Newcomer:
    venv: Path
    tmp: Path

    @property
    def gh_run(self) -> str:
        return str(self.venv / "bin" / "gh-run")

    def env(self, site: Path) -> dict[str, str]:
        """A user's environment: the system's PATH (the venv is not on it), no trace of the
        checkout or of the tests' settings, caches of its own; the dev cluster's SLURM_CONF."""
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GH_RUN_", "PYTHON", "VIRTUAL_ENV")) or k == "GH_RUN_TOOLS"
        }
        return {
            **keep,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "GH_RUN_SITE_DIR": str(site),
            "XDG_CONFIG_HOME": str(self.tmp / "xdg-config"),
            "XDG_CACHE_HOME": str(self.tmp / "xdg-cache"),
            "XDG_DATA_HOME": str(self.tmp / "xdg-data"),
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }

    def cli(
        self, args: list[str], cwd: Path, site: Path, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return run([self.gh_run, *args], cwd, self.env(site), timeout)


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Newcomer]:
    tmp = tmp_path_factory.mktemp("newcomer")
    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python, "no system python3"
    # as `make dist` builds it: the backend alone, in a venv of its own
    ok(
        run(
            [python, str(REPO / "scripts" / "build_dist.py"), "--venv", str(tmp / "build"),
             "--out", str(tmp / "dist")],
            REPO,
        )
    )  # fmt: skip
    build = ok(run([str(tmp / "build" / "bin" / "python"), "-m", "pip", "list"], tmp)).stdout
    assert "torch" not in build and "pytest" not in build, build  # the backend alone
    [wheel] = (tmp / "dist").glob("*.whl")
    venv = tmp / "venv"
    ok(run([python, "-m", "venv", str(venv)], tmp))
    ok(run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], tmp))
    yield Newcomer(venv, tmp)


def test_a_newcomers_first_week_from_the_wheel(newcomer: Newcomer, dev_cluster: None) -> None:
    tmp = newcomer.tmp
    # ---- 1. a laptop: nothing installed but the wheel
    nothing = tmp / "no-site"
    nothing.mkdir()
    laptop = tmp / "laptop"
    laptop.mkdir()
    res = ok(newcomer.cli(["init"], laptop, nothing))
    assert "gh-run's built-in cluster" in res.stderr
    res = ok(newcomer.cli(["submit", "jobs/smoke.yaml", "--wait"], laptop, nothing))
    assert "as local job" in res.stdout and "COMPLETED" in res.stdout, res.stdout
    assert "warning" not in res.stderr, res.stderr
    doc = json.loads(ok(newcomer.cli(["analyze", "last", "--json"], laptop, nothing)).stdout)
    assert [r["steps"]["count"] for r in doc["ranks"]] == [8]
    ok(newcomer.cli(["report", "last", "--out", "report"], laptop, nothing))
    assert (laptop / "report" / "report.html").is_file()

    # ---- 2. a site: the dev cluster's file where a site keeps it
    site = tmp / "site"
    (site / "clusters").mkdir(parents=True)
    shutil.copy(REPO / "clusters" / "dev.yaml", site / "clusters" / "dev.yaml")
    proj = tmp / "project"
    proj.mkdir()
    res = ok(newcomer.cli(["init"], proj, site))
    assert "starter jobs for cluster dev" in res.stderr
    res = ok(newcomer.cli(["check", "jobs/smoke.yaml"], proj, site))
    assert "the SLURM controller accepts smoke on partition gh" in res.stdout, res.stdout
    res = ok(newcomer.cli(["submit", "jobs/smoke.yaml", "--wait"], proj, site, timeout=300))
    assert "as slurm job" in res.stdout and "COMPLETED" in res.stdout, res.stdout
    doc = json.loads(ok(newcomer.cli(["analyze", "last", "--json"], proj, site)).stdout)
    assert [r["steps"]["count"] for r in doc["ranks"]] == [8]

    # ---- a campaign over the starter job, judged on the step time
    (proj / "campaigns").mkdir()
    camp = proj / "campaigns" / "steps.yaml"

    def night(name: str, slow: list[str], fallback: bool) -> subprocess.CompletedProcess[str]:
        th: dict[str, object] = {"increase_pct": 50}
        if fallback:
            th["fallback"] = ["step_time_mean_ms"]
        camp.write_text(
            yaml.safe_dump(
                {
                    "name": name,
                    "job": "../jobs/smoke.yaml",
                    "executor": "slurm",
                    "matrix": {"speed": {"fast": [], "slow": slow}},
                    "thresholds": {"step_time_s": th},
                },
                sort_keys=False,
            )
        )
        return newcomer.cli(
            ["campaign", "run", "campaigns/steps.yaml", "--wait"], proj, site, timeout=420
        )

    first = night("steps", [], fallback=True)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "PASSED" in first.stdout
    slower = night("steps", ["workload.args+=[--step-ms, '160']"], fallback=True)
    assert slower.returncode == 3, slower.stdout + slower.stderr
    assert "REGRESSED" in slower.stdout
    regression = next(x for x in slower.stdout.splitlines() if "regression slow" in x)
    assert "step_time_s" in regression and "(judged by step_time_mean_ms)" in regression
    report = Path(
        next(x for x in slower.stdout.splitlines() if "report:" in x).split("report:")[1].strip()
    )
    html = report.read_text()
    assert "judged by step_time_mean_ms" in html
    for viewport in (640, 1280):
        scroll, client = page_width(report, viewport, tmp / "browser")
        assert scroll <= client <= viewport, (viewport, scroll, client)
    strict = night("steps-strict", [], fallback=False)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "UNJUDGED (2 thresholds)" in strict.stdout
    unjudged = [x for x in strict.stdout.splitlines() if x.startswith("  not judged")]
    assert len(unjudged) == 2 and all("step_time_s was not measured" in x for x in unjudged)
    assert all("no metrics.json" in x for x in unjudged), unjudged
    assert all("fallback: [step_time_mean_ms] in thresholds.step_time_s" in x for x in unjudged)
    ok(newcomer.cli(["report", "--campaign", "last", "--out", "camp"], proj, site))
    assert (proj / "camp" / "report.html").is_file()
