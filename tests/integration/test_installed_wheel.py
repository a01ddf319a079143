"""Issue 31, "Done means": gh-run as an admin installs it and a user uses it, far from this
checkout. The sdist is built from the checkout, then a wheel from the unpacked sdist twice:
with the machine's C compiler, and with no C compiler on PATH (once per test run, shared by
the xdist workers). Each is installed into a venv outside the checkout (the runtime
dependencies once per run, from pip's cache or index, into a venv that each worker copies;
then the wheel under test with --no-deps --force-reinstall), and, in an empty folder, with the
dev cluster's file installed where a site keeps it ($GH_RUN_SITE_DIR/clusters): `gh-run init`,
`submit jobs/smoke.yaml --executor local --wait`, `--executor slurm --wait` on the dev
cluster, `analyze` of a shipped example trace (package data, through importlib.resources), and
the reference workload's module.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KINDS = ("compiled", "no-compiler")


def run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return res


def checked(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, f"{res.args}: {res.stdout[-3000:]}{res.stderr[-3000:]}"
    return res


@dataclass
class Installed:
    wheels: dict[str, Path]
    venv: Path
    tmp: Path

    def install(self, kind: str) -> None:
        pip = [str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        checked(run([*pip, "--no-deps", "--force-reinstall", str(self.wheels[kind])], self.tmp))

    def env(self, site: Path, **extra: str) -> dict[str, str]:
        """The user's environment: the venv's bin first (an activated venv, a site module), no
        trace of the checkout (no PYTHONPATH, no test settings), its own caches."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("GH_RUN_", "PYTHON"))}
        keep.pop("VIRTUAL_ENV", None)
        return {
            **keep,
            "PATH": f"{self.venv / 'bin'}:{os.environ['PATH']}",
            "GH_RUN_SITE_DIR": str(site),
            "XDG_CONFIG_HOME": str(self.tmp / "xdg-config"),
            "XDG_CACHE_HOME": str(self.tmp / "xdg-cache"),
            "XDG_DATA_HOME": str(self.tmp / "xdg-data"),
            "NO_COLOR": "1",
            "COLUMNS": "200",
            **extra,
        }


def _build_wheel(src: Path, out: Path, env: dict[str, str]) -> Path:
    checked(
        run(
            [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)],
            src,
            env,
        )
    )
    [wheel] = out.glob("*.whl")
    return wheel


def _once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """The folder `name` of this test run, made by `make` once: under pytest-xdist the first
    worker to need it makes it in the run's folder (shared by its workers) while the others wait
    on its lock. A making that failed half way is made again by the next one to ask."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def _build_all(tmp: Path) -> None:
    """The sdist, then a wheel of each kind from it, in tmp/wheel-KIND/."""
    sdist_dir = tmp / "sdist"
    checked(run([sys.executable, "-m", "build", "--sdist", "--outdir", str(sdist_dir), "."], REPO))
    [sdist] = sdist_dir.glob("*.tar.gz")
    no_cc = tmp / "no-cc-bin"  # a PATH with no C compiler (nor anything else)
    no_cc.mkdir()
    for kind in KINDS:
        src = tmp / f"src-{kind}"
        with tarfile.open(sdist) as tar:
            tar.extractall(src, filter="data")
        [top] = src.iterdir()
        env = {k: v for k, v in os.environ.items() if k not in ("CC", "CFLAGS", "LDSHARED")}
        if kind == "no-compiler":
            env["PATH"] = str(no_cc)
        _build_wheel(top, tmp / f"wheel-{kind}", env)


def _built_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and both wheels, built once per test run; every worker then installs them
    into a venv of its own."""
    tmp = _once(tmp_path_factory, "built-wheels", _build_all)
    return {kind: next((tmp / f"wheel-{kind}").glob("*.whl")) for kind in KINDS}


def _base_venv(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Path:
    """A venv with the compiled wheel and its runtime dependencies, made once per test run
    (pip resolving and unpacking the dependencies is most of this module's CPU); each worker
    copies it."""

    def make(base: Path) -> None:
        checked(run([sys.executable, "-m", "venv", str(base)], base.parent))
        pip = [str(base / "bin" / "python"), "-m", "pip", "install", "-q"]
        checked(run([*pip, str(wheels["compiled"])], base.parent))  # gh-run and its dependencies

    return _once(tmp_path_factory, "venv-base", make)


def _copy_venv(base: Path, venv: Path) -> None:
    """`base` copied to `venv`, its scripts' `#!` lines pointed at the copy's python (a venv
    finds its prefix from where its python is, so only the scripts name the old place)."""
    shutil.copytree(base, venv, symlinks=True)
    old, new = f"#!{base}/bin/".encode(), f"#!{venv}/bin/".encode()
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(old):
                script.write_bytes(new + data[len(old) :])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    wheels = _built_wheels(tmp_path_factory)
    tmp = tmp_path_factory.mktemp("installed")
    venv = tmp / "venv"
    _copy_venv(_base_venv(tmp_path_factory, wheels), venv)
    yield Installed(wheels, venv, tmp)


def test_the_wheels_carry_the_package_data(installed: Installed) -> None:
    for kind, wheel in installed.wheels.items():
        names = set(zipfile.ZipFile(wheel).namelist())
        for needed in (
            "orchestrator/templates/sbatch/base.sbatch.j2",
            "orchestrator/templates/sbatch/task.sh.j2",
            "orchestrator/templates/report/report.html.j2",
            "orchestrator/templates/remote/list.sh",
            "orchestrator/templates/init/smoke.yaml.j2",
            "orchestrator/schema/job.schema.json",
            "orchestrator/examples/admin-templates/cluster.yaml",
            "orchestrator/examples/traces/baseline/sft_rank0.pt.trace.json.gz",
            "workloads/sft.py",
        ):
            assert needed in names, f"{wheel.name} lacks {needed}"
        built = {n for n in names if n.endswith(".so")}
        if kind == "compiled":
            assert {n.split(".")[0] for n in built} == {
                "orchestrator/analysis/readers/_kineto_scan",
                "orchestrator/analysis/readers/_sqlite_pages",
            }, built
        else:
            assert built == set(), built
        # Every file of the mapped folders, so a new kind of template cannot be left out.
        for folder, package in (
            ("templates", "orchestrator/templates"),
            ("docs/schema", "orchestrator/schema"),
            ("examples", "orchestrator/examples"),
        ):
            for f in (REPO / folder).rglob("*"):
                if f.is_file() and "__pycache__" not in f.parts:
                    rel = f.relative_to(REPO / folder).as_posix()
                    assert f"{package}/{rel}" in names, f"{wheel.name} lacks {folder}/{rel}"
        # Nothing of the checkout beyond what the package reads.
        assert not any(n.startswith(("tests/", "jobs/", "clusters/", "docs/")) for n in names)


def _project(installed: Installed, kind: str) -> tuple[Path, dict[str, str]]:
    """A site folder holding the dev cluster's file, and an empty project folder."""
    site = installed.tmp / f"site-{kind}"
    (site / "clusters").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "clusters" / "dev.yaml", site / "clusters" / "dev.yaml")
    proj = installed.tmp / f"project-{kind}"
    proj.mkdir(exist_ok=True)
    return proj, installed.env(site)


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_project_runs_from_the_installed_wheel(installed: Installed, kind: str) -> None:
    installed.install(kind)
    proj, env = _project(installed, kind)
    gh_run = str(installed.venv / "bin" / "gh-run")
    where = checked(run([gh_run, "doctor", "--json"], proj, env))
    setup = json.loads(where.stdout)["setup"]
    assert {p["built"] for p in setup["native"]} == {kind == "compiled"}
    # the site's file, then gh-run's built-in `local` (this machine), which no file hides
    assert [c["name"] for c in setup["clusters"]] == ["dev", "local"]
    assert setup["clusters"][0]["found_by"].startswith("the site's ($GH_RUN_SITE_DIR/clusters)")
    assert setup["clusters"][1]["found_by"].startswith("gh-run's built-in")
    assert setup["default_cluster"] == "dev"  # the only file: the built-in is no candidate
    package = checked(
        run(
            [
                str(installed.venv / "bin" / "python"),
                "-c",
                "import orchestrator as o; print(o.__file__)",
            ],
            proj,
            env,
        )
    ).stdout.strip()
    assert package.startswith(str(installed.venv)) and str(REPO) not in package

    init = checked(run([gh_run, "init"], proj, env))
    assert "wrote jobs/smoke.yaml" in init.stdout
    sub = checked(
        run([gh_run, "submit", "jobs/smoke.yaml", "--executor", "local", "--wait"], proj, env)
    )
    assert "COMPLETED" in sub.stdout and "not a site file" not in sub.stderr
    [run_dir] = (proj / ".gh-run" / "artifacts").iterdir()
    # the starter job runs the installed gh-run's own CPU steps, with its own Python
    assert (run_dir / "artifacts" / "cpu_steps_rank0.pt.trace.json").is_file()
    script = (proj / ".gh-run" / "runs" / run_dir.name / "job.sbatch").read_text()
    assert str(REPO) not in script and str(installed.venv / "bin" / "python") in script

    # A shipped trace, read from the package, gives what the checkout's reader gives (the
    # paths aside: the trace's folder is the package's, not tests/data/traces/baseline).
    mine = checked(run([gh_run, "analyze", "example:baseline", "--json"], proj, env)).stdout
    here = REPO / "tests" / "data" / "traces" / "baseline"
    ref = checked(
        run([sys.executable, "-m", "orchestrator", "analyze", str(here), "--json"], REPO)
    ).stdout
    shipped = installed.venv.glob("lib/python*/site-packages/orchestrator/examples/traces")
    [folder] = [p / "baseline" for p in shipped]
    assert str(folder) in mine and str(REPO) not in mine
    mine_doc = json.loads(mine.replace(str(folder), "TRACE"))
    ref_doc = json.loads(ref.replace(str(here), "TRACE"))
    assert mine_doc.pop("label") == "example:baseline"
    ref_doc.pop("label")
    assert mine_doc == ref_doc
    # The reference workload is the installed package's (torch is not in this venv: it says
    # how to get it, which it can only say once imported from there).
    work = run(
        [
            str(installed.venv / "bin" / "python"),
            "-m",
            "workloads.sft",
            "--device",
            "cpu",
            "--steps",
            "1",
        ],
        proj,
        env,
    )
    assert work.returncode == 2 and "torch is not installed" in work.stderr, work.stderr


@pytest.mark.cluster
def test_the_installed_wheel_submits_to_the_dev_cluster(
    installed: Installed, dev_cluster: None
) -> None:
    installed.install("compiled")
    proj, env = _project(installed, "slurm")
    slurm = {k: v for k, v in os.environ.items() if k.startswith("SLURM")}
    gh_run = str(installed.venv / "bin" / "gh-run")
    checked(run([gh_run, "init"], proj, {**env, **slurm}))
    sub = checked(
        run(
            [gh_run, "submit", "smoke.yaml", "--executor", "slurm", "--wait"],
            proj / "jobs",
            {**env, **slurm},
            timeout=300,
        )
    )
    assert "as slurm job" in sub.stdout and "COMPLETED" in sub.stdout, sub.stdout
    status = json.loads(checked(run([gh_run, "status", "--json"], proj, {**env, **slurm})).stdout)
    [row] = status
    assert row["run"]["executor"] == "slurm" and row["run"]["state"] == "COMPLETED"
    [run_dir] = (proj / ".gh-run" / "artifacts").iterdir()
    assert (run_dir / "artifacts" / "cpu_steps_rank0.pt.trace.json").is_file()
