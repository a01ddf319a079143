"""`gh-run analyze FILE.nsys-rep` with the REAL nsys: a report recorded here by nsys 2023.4 is
exported once beside itself and the export is reused; a folder holding a report and its export is
read once; without any nsys, or with only one too old for the report (2022.4 cannot read 2023.4's),
gh-run says in one sentence what to install or which export to bring."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import nsys_profile, real_nsys, run_cli

# Just enough PATH to start programs, and no nsys on it (this machine's nsys lives in the
# tools prefix, which each test points elsewhere or keeps).
BARE_PATH = "/usr/bin:/bin"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real .nsys-rep of a short program (OS runtime only), recorded by nsys 2023.4."""
    folder = tmp_path_factory.mktemp("rec")
    res = nsys_profile(
        [
            str(real_nsys("2023.4")),
            "profile",
            "--trace=osrt",
            "--sample=none",
            "--cpuctxsw=none",
            f"--output={folder}/job.0",
            "/bin/sleep",
            "0.2",
        ],
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return folder / "job.0.nsys-rep"


def _alone(report: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    return Path(shutil.copy2(report, folder / report.name))


def test_a_report_is_exported_once_and_reused(report: Path, tmp_path: Path) -> None:
    rep = _alone(report, tmp_path)
    home = tmp_path / "home"
    res = run_cli(["analyze", str(rep), "--json"], home)
    assert res.rc == 0, res.text
    sqlite = rep.with_name("job.0.sqlite")
    assert f'"path": "{sqlite}"' in res.out and '"rank_rule": "file name"' in res.out
    first = sqlite.stat().st_mtime_ns
    again = run_cli(["analyze", str(rep), "--json"], home)
    assert again.rc == 0 and again.out == res.out
    assert sqlite.stat().st_mtime_ns == first  # reused, not exported again


def test_a_folder_with_a_report_and_its_export_reads_it_once(report: Path, tmp_path: Path) -> None:
    rep = _alone(report, tmp_path)
    assert run_cli(["analyze", str(rep)], tmp_path / "home").rc == 0  # makes job.0.sqlite
    res = run_cli(["analyze", str(rep.parent), "--json"], tmp_path / "home")
    assert res.rc == 0, res.text
    assert res.out.count('"kind": "nsys-sqlite"') == 1


def test_without_nsys_one_sentence_says_what_to_install_or_bring(
    report: Path, tmp_path: Path
) -> None:
    rep = _alone(report, tmp_path)
    env = {"PATH": BARE_PATH, "GH_RUN_TOOLS": str(tmp_path / "no-tools")}
    res = run_cli(["analyze", str(rep)], tmp_path / "home", env=env)
    assert res.rc == 2, res.text
    line = res.err.strip()
    assert "\n" not in line
    assert "this machine has no nsys" in line
    assert (
        "install it (bash scripts/install-nsys.sh) or bring the job's export job.0.sqlite" in line
    )
    assert not rep.with_name("job.0.sqlite").exists()


def test_an_nsys_too_old_for_the_report_is_named(report: Path, tmp_path: Path) -> None:
    rep = _alone(report, tmp_path)
    only_old = tmp_path / "old-tools"
    (only_old / "bin").mkdir(parents=True)
    os.symlink(real_nsys("2022.4").resolve(), only_old / "bin" / "nsys-2022.4")
    env = {"PATH": BARE_PATH, "GH_RUN_TOOLS": str(only_old)}
    res = run_cli(["analyze", str(rep)], tmp_path / "home", env=env)
    assert res.rc == 1, res.text
    assert "no local nsys could export it (nsys 2022.4.2.1: " in res.err
    assert "a report from a newer nsys needs that nsys or newer" in res.err
    assert sorted(p.name for p in rep.parent.iterdir()) == ["job.0.nsys-rep"]  # nothing left
