"""Shared fixtures: a private gh-run home per test, the CLI as a subprocess, the dev cluster."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The tests' site is this checkout: tests/site/clusters is a link to clusters/ (dev, dev-ssh,
# gh200), so a test finds the dev cluster where a site keeps its files (site_config.py),
# wherever it runs gh-run from, and the machine's own /etc/gh-run plays no part. Tests of the
# search set their own.
os.environ["GH_RUN_SITE_DIR"] = str(REPO / "tests" / "site")

# `make test` (and so CI) sets GH_RUN_NO_SKIPS=1: there everything the suite needs is installed
# and started, so a test that would skip (no cluster, no cron, no chromium, no torch, no real
# nsys exports) is a failure, never a silent pass. A developer's bare `pytest` still skips with
# the reason.
NO_SKIPS = os.environ.get("GH_RUN_NO_SKIPS") == "1"


def _as_failure(report: pytest.CollectReport | pytest.TestReport) -> None:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under GH_RUN_NO_SKIPS=1 (make test runs everything): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if NO_SKIPS and report.skipped:  # a module-level importorskip
        _as_failure(report)


# The test functions that cost the most CPU (bench/suite_times.py --write-slow measured them):
# marked `slow`, so that `make check` (`-m "not slow"`) answers in minutes; `make test` runs them.
SLOW_TESTS = REPO / "tests" / "slow_tests.txt"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lines = SLOW_TESTS.read_text().splitlines() if SLOW_TESTS.is_file() else []
    slow = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def gh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "ghhome"
    monkeypatch.setenv("GH_RUN_HOME", str(home))
    return home


def run_cli(
    args: list[str],
    home: Path,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 300,
) -> CliResult:
    # Jobs inherit the submitting environment (sbatch --export=ALL): put this venv's python
    # first on PATH, as an activated venv would, so `python3` in a job has gh-run's packages.
    full_env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "GH_RUN_HOME": str(home),
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliResult(res.returncode, res.stdout, res.stderr)


@pytest.fixture
def cli(gh_home: Path):  # type: ignore[no-untyped-def]
    def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
        return run_cli(list(args), gh_home, env=env, timeout=timeout)

    return _run


def real_nsys(family: str) -> Path:
    """The real nsys of a version family here (`make deps` installs 2023.4 and 2022.4 in the
    tools prefix); skips with the reason, a failure under `make test`, when there is none."""
    from orchestrator.core import tools

    for p in tools.nsys_programs():
        rc, text = tools.output_of([str(p), "--version"])
        if rc == 0 and f"version {family}." in text:
            return p
    pytest.skip(f"no real nsys {family} here: `make deps` installs it")


@contextlib.contextmanager
def _machine_turn(name: str) -> Iterator[None]:
    """Hold one of this machine's test slots (a lock file in the temporary folder), across
    xdist workers and pytest sessions of every checkout."""
    with open(Path(tempfile.gettempdir()) / f"gh-run-tests-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def nsys_recording() -> Iterator[None]:
    """Hold the machine's one slot for recording with a real nsys, across xdist workers and
    pytest sessions. Two `nsys profile` sessions started at once under load have come back
    with nothing recorded (2024.2: no OS-runtime rows at all) or failed in `sem_open` (2022.4),
    which are nsys's own limits on concurrent sessions, not what the tests examine."""
    with _machine_turn("nsys-recording"):
        yield


def nsys_profile(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`argv`, an `nsys profile ...` command, run in the recording slot and made again, after a
    pause, up to twice (over what it left: `--force-overwrite=true`) when nsys failed inside
    itself (tests/nsys_crash.py); any other failure is returned as it is, for the test to judge."""
    from tests import nsys_crash

    for attempt in range(nsys_crash.ATTEMPTS):
        cmd = list(argv)
        if attempt:
            time.sleep(nsys_crash.PAUSE_S)
            if "profile" in cmd and not any(a.startswith("--force-overwrite") for a in cmd):
                cmd.insert(cmd.index("profile") + 1, "--force-overwrite=true")
        with nsys_recording():
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if res.returncode == 0 or not nsys_crash.crashed(res.stdout + res.stderr):
            break
    return res


@pytest.fixture(autouse=True)
def _fresh_cli_state() -> Iterator[None]:
    """The CLI's process-wide options start clean in each test. A test that runs `main([...])`
    in-process leaves the home its root callback read from GH_RUN_HOME in `cli.state.STATE`; a
    later test in the same worker that registers commands on an app of its own (no root
    callback) would read that home, not its own (which tests ran before is xdist's choice)."""
    from orchestrator.cli.state import STATE, CliState

    fresh = CliState()
    yield
    STATE.home_override, STATE.debug, STATE._store = fresh.home_override, fresh.debug, None


@pytest.fixture(autouse=True)
def _nsys_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `nsys_records` records through gh-run's own jobs, so it holds the
    recording slot for its whole length (taken before the dev cluster, as every holder does)."""
    if request.node.get_closest_marker("nsys_records") is None:
        yield
        return
    with nsys_recording():
        yield


@pytest.fixture(autouse=True)
def _crontab_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `crontab` writes this machine's crontab (root's: the dev cluster's login
    node is this machine) and waits for cron to fire it: it takes turns with the others on a
    slot of its own, and shares the dev cluster meanwhile, which it only submits jobs to. (It
    held the whole cluster alone before: every cluster test of every session waited the minute
    or two that cron takes.)"""
    if request.node.get_closest_marker("crontab") is None:
        yield
        return
    with _machine_turn("crontab"):
        yield


@contextlib.contextmanager
def cluster_hold(exclusive: bool, what: str) -> Iterator[None]:
    """Hold the dev cluster, shared or alone, across pytest sessions and xdist workers.

    A test that only submits jobs shares it (`pytest.lock`, LOCK_SH): its SLURM job names and
    run folders are its own (each test has its own gh-run home; job names carry the run id),
    so tests of several sessions run side by side. A test that stops a daemon, takes a node
    down or needs the cluster idle (marker `cluster_exclusive`) holds it alone (LOCK_EX), and
    so does the start or repair of the cluster. `pytest.gate`, taken first and briefly, keeps
    new shared holders out while an exclusive one waits, so it is never starved."""
    from tests import devcluster

    devcluster.STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (
        (devcluster.STATE_DIR / "pytest.gate").open("a") as gate,
        (devcluster.STATE_DIR / "pytest.lock").open("a") as lock,
    ):
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"\n{what}: waiting for the dev cluster ({lock.name})", file=sys.stderr)
            fcntl.flock(lock, mode)
        fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _up_done_by_this_run() -> bool:
    """Whether another xdist worker of this pytest run has already brought the dev cluster up
    (`devcluster.sh up`, which also applies a change of this checkout's cluster files); marks
    it done for the workers after this one. A pytest run without xdist: never."""
    from tests import devcluster

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return False
    stamps = devcluster.STATE_DIR / "pytest.up"
    stamps.mkdir(parents=True, exist_ok=True)
    for old in stamps.iterdir():  # the stamps of runs long over
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < time.time() - 86400:
                old.unlink()
    try:
        (stamps / run).touch(exist_ok=False)
    except FileExistsError:
        return True
    return False


@pytest.fixture(scope="session")
def dev_cluster_up() -> None:
    """The real local SLURM cluster (scripts/devcluster.sh), started or reused if healthy,
    once per pytest run, while no test of any session uses it.

    `up` holds the cluster alone, so it waits for the tests in flight in every session and
    keeps new ones out meanwhile (cluster_hold's gate): done by each xdist worker, that stalled
    every session once per worker. The first worker of a run that needs the cluster does it;
    the others only ask, sharing the cluster, whether it is healthy (devcluster.healthy,
    read-only), and hold it alone to start or repair it only when it is not.
    In CI it must come up; elsewhere a machine that cannot run it skips with the reason.
    """
    from tests import devcluster

    with cluster_hold(False, "checking the dev cluster"):
        reuse = _up_done_by_this_run() and devcluster.healthy()
    if not reuse:
        with cluster_hold(True, "starting or checking the dev cluster"):
            try:
                devcluster.ensure_up()
            except Exception as exc:
                if os.environ.get("CI"):
                    pytest.fail(f"the dev SLURM cluster did not come up: {exc}")
                pytest.skip(
                    f"the dev SLURM cluster cannot run on this machine: {exc} (another "
                    "checkout's cluster is shared with GH_RUN_DEVCLUSTER_DIR=<its "
                    ".devcluster>; docs/devcluster.md)"
                )
    for key, value in devcluster.slurm_env().items():
        if key.startswith("SLURM") or key == "GH_RUN_DEVCLUSTER_DIR":
            os.environ[key] = value


@pytest.fixture
def dev_cluster(dev_cluster_up: None, request: pytest.FixtureRequest) -> Iterator[None]:
    """The dev cluster for one test: shared with the tests of other workers and sessions, or
    alone for a test marked `cluster_exclusive` (cluster_hold)."""
    exclusive = request.node.get_closest_marker("cluster_exclusive") is not None
    with cluster_hold(exclusive, request.node.nodeid):
        yield


@pytest.fixture
def dead_controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """SLURM_CONF naming a controller port nobody listens on: the real squeue fails for real."""
    if shutil.which("squeue") is None or shutil.which("sbatch") is None:
        pytest.skip("the SLURM clients (squeue, sbatch) are not installed here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "dead-slurm.conf"
    conf.write_text(
        "ClusterName=dead\nSlurmctldHost=localhost(127.0.0.1)\n"
        f"SlurmctldPort={port}\nMessageTimeout=1\n"
        "NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    return conf


def have_shellcheck() -> bool:
    return shutil.which("shellcheck") is not None


@pytest.fixture
def tmpfs() -> Iterator[Callable[[Path, str], Path]]:
    """mount(target, size): a real, small tmpfs mounted at `target` (created if need be) for
    the test, unmounted afterwards: a file system that really fills up. Root only."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs (a real full file system)")
    mounted: list[Path] = []

    def mount(target: Path, size: str) -> Path:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        res = subprocess.run(
            # mode: a tmpfs is 1777 by default, and gh-run refuses a home every user can write
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


OTHER_USER = "ghrun-other"


@pytest.fixture(scope="session")
def other_user() -> int:
    """The uid of a second real user of this machine (made with useradd when missing), for
    files that are another user's: gh-run must refuse them (issue 26, class 3). Root only."""
    import pwd
    import time

    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a second user whose files gh-run refuses")
    for _ in range(20):
        try:
            return pwd.getpwnam(OTHER_USER).pw_uid
        except KeyError:
            pass
        res = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        # 9: made meanwhile by another session; 10: /etc/passwd locked by one: look again.
        if res.returncode not in (0, 9, 10):
            pytest.fail(f"useradd {OTHER_USER} failed: {res.stderr.strip()}")
        time.sleep(0.2)
    pytest.fail(f"could not make user {OTHER_USER}")
