"""`SshTransport.push` and `pull` to remote roots a shell would take apart (spaces, braces,
`$`, globs, `;`), against the real sshd of the dev cluster: the files land at the literal path
and come back, and the command sshd hands to the login node's shell gives exactly the argv
meant. Files arriving is not enough: with an unquoted root, `mkdir -p -- /x/a b` makes `/x/a`
and `./b`, and rsync still creates `/x/a b` itself.

How the remote argv is seen: `ssh` on this process's PATH is a recorder that writes its argv
and execs the real ssh (so the copy really goes through sshd); the words after the host are
the remote command, which sshd joins with spaces and runs with the login shell's `-c`. That
command is run here by sh and bash with `mkdir` and `rsync` replaced by recorders of their
argv, which is what the login node's programs receive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.site.cluster import load_cluster
from orchestrator.transport.login import resolve_login
from orchestrator.transport.ssh import SshTransport
from tests import devcluster
from tests.laptop import cluster_file

pytestmark = pytest.mark.cluster

END = "\x1e"  # ends one call's record in the recorder's log
HOSTILE = [
    "two  spaces/and a tab\there",
    "{braces,here}/{}",
    "$HOME/${PATH}/$(id)/`id`",
    "glob*?[ab]/semi;colon&amp|pipe",
    "~tilde/#hash/!bang/<in>",
]


def _recorder(path: Path, log: Path, then: str | None) -> None:
    """A program that appends its argv (NUL-separated, END-terminated) to `log`, then execs
    `then` with the same arguments (or exits 0)."""
    run = f'exec {then} "$@"' if then else "exit 0"
    path.write_text(
        "#!/bin/sh\n"
        f"{{ printf '%s\\0' \"$(basename \"$0\")\" \"$@\"; printf '{END}\\0'; }} >> '{log}'\n"
        f"{run}\n"
    )
    path.chmod(0o755)


def _calls(log: Path) -> list[list[str]]:
    if not log.is_file():
        return []
    words = log.read_bytes().decode().split("\0")
    out: list[list[str]] = []
    cur: list[str] = []
    for w in words:
        if w == END:
            out.append(cur)
            cur = []
        elif w or cur:
            cur.append(w)
    return out


@pytest.fixture
def ssh_transport(
    dev_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SshTransport, Path]]:
    real = shutil.which("ssh")
    assert real, "ssh is not installed (scripts/devcluster.sh installs it)"
    spy = tmp_path / "spy"
    spy.mkdir()
    log = tmp_path / "ssh.log"
    _recorder(spy / "ssh", log, real)
    monkeypatch.setenv("PATH", f"{spy}:{os.environ['PATH']}")
    t = SshTransport(resolve_login(load_cluster(str(cluster_file(tmp_path, "dev-ssh-copies")))))
    try:
        yield t, log
    finally:
        t.close()


def remote_argv(command: str, shell: str, tmp: Path) -> list[list[str]]:
    """The argv each program of `command` gets when a login shell runs it (`shell -c`)."""
    fake = tmp / f"fake-{Path(shell).name}"
    fake.mkdir(exist_ok=True)
    log = fake / "log"
    log.unlink(missing_ok=True)
    for prog in ("mkdir", "rsync"):
        _recorder(fake / prog, log, None)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": "/home/nobody"}
    res = subprocess.run([shell, "-c", command], env=env, capture_output=True, check=False)
    assert res.returncode == 0, res.stderr
    return _calls(log)


def _remote_commands(log: Path, host: str, server: str) -> list[str]:
    """The remote commands of the ssh calls rsync made (`server`: `--server` alone when
    pushing, `--sender` too when pulling)."""
    out = []
    for argv in _calls(log):
        if host in argv and server in argv:
            out.append(" ".join(argv[argv.index(host) + 1 :]))
    return out


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_push_and_pull_keep_a_hostile_remote_root_whole(
    ssh_transport: tuple[SshTransport, Path], tmp_path: Path, name: str
) -> None:
    t, log = ssh_transport
    base = devcluster.SCRATCH / f"ssh-copies-{tmp_path.name}"
    root = f"{base}/{name}"
    local = tmp_path / "local"
    (local / "run-1").mkdir(parents=True)
    (local / "run-1" / "job.sbatch").write_text("#!/bin/bash\necho hi\n")
    (local / "run-1" / "odd name $x.txt").write_text("odd\n")
    try:
        t.push(local, ["run-1"], root)
        # the files are at the literal path, and nothing else was made beside it
        landed = Path(root) / "run-1"
        assert (landed / "job.sbatch").read_text() == "#!/bin/bash\necho hi\n"
        assert (landed / "odd name $x.txt").read_text() == "odd\n"
        top = name.split("/")[0]
        assert sorted(p.name for p in base.iterdir()) == [top]

        (cmd,) = _remote_commands(log, t.login.host, "--server")
        for shell in ("sh", "bash"):
            mkdir, rsync = remote_argv(cmd, shell, tmp_path)
            assert mkdir == ["mkdir", "-p", "--", root]
            assert rsync[:2] == ["rsync", "--server"] and "--sender" not in rsync
            assert rsync[-2:] == [".", f"{root}/"]

        back = tmp_path / "back"
        files = ["run-1/job.sbatch", "run-1/odd name $x.txt"]
        stats = t.pull(root, files, back)
        assert (back / "run-1" / "odd name $x.txt").read_text() == "odd\n"
        assert stats.literal > 0
        (cmd,) = _remote_commands(log, t.login.host, "--sender")
        for shell in ("sh", "bash"):
            (rsync,) = remote_argv(cmd, shell, tmp_path)
            assert rsync[:3] == ["rsync", "--server", "--sender"]
            assert rsync[-2:] == [".", f"{root}/"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
