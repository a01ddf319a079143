"""The SSH transport's parts that need no login node: the cluster file's ssh settings, local
paths resolved, the helper scripts the login node runs (run here with sh, for real), the
selection of files to bring back (the same as for a local run), and the store's new column.
The transport against a real sshd: tests/integration/test_ssh*.py."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.artifacts import collect as artifacts
from orchestrator.artifacts import remote_collect
from orchestrator.core.errors import UserError
from orchestrator.runs.lifecycle import cluster_runs_root
from orchestrator.site.cluster import Cluster
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import SCHEMA, Run, Store
from orchestrator.transport import registry
from orchestrator.transport.local import LOCAL
from orchestrator.transport.login import expand_local, resolve_login
from orchestrator.transport.ssh import SCRIPTS, SshTransport, _rsync_word, script

PARTITIONS = {"gh": {"max_nodes": 1, "cpus_per_node": 2, "mem_per_node": "4000M"}}


def cluster(**over: Any) -> Cluster:
    return Cluster.model_validate(
        {"name": "c", "default_partition": "gh", "partitions": PARTITIONS, **over}
    )


def sh(name: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """A helper of templates/remote/ run as the login node runs it: sh -c SCRIPT sh ARGS."""
    return subprocess.run(
        ["sh", "-c", script(name), "sh", *args], input=stdin, capture_output=True, check=False
    )


# -- the cluster file ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"transport": "ssh"}, "login None is not user@host[:port]"),
        ({"transport": "ssh", "login": "a b@host"}, "is not user@host[:port]"),
        ({"transport": "ssh", "login": "u@h:0"}, "port 0 is not 1-65535"),
        ({"ssh": {"identity": "k"}}, "ssh: is set but transport is local"),
        (
            {"transport": "ssh", "login": "u@h", "ssh": {"options": {"ControlMaster": "no"}}},
            "ControlMaster is gh-run's own",
        ),
        (
            {"transport": "ssh", "login": "u@h", "ssh": {"options": {"BatchMode": "no"}}},
            "BatchMode is gh-run's own",
        ),
        (
            {"transport": "ssh", "login": "u@h", "ssh": {"options": {"Proxy-Jump": "x"}}},
            "not an ssh_config keyword",
        ),
        (
            {"transport": "ssh", "login": "u@h", "ssh": {"identity": "it's"}},
            "holds a quote",
        ),
        (
            {"transport": "ssh", "login": "u@h", "ssh": {"rsync_options": ["--bwlimit=1\n"]}},
            "line break",
        ),
    ],
)
def test_bad_ssh_settings_are_refused(over: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        cluster(**over)


def test_login_forms() -> None:
    for login, (user, host, port) in {
        "login.example.org": (None, "login.example.org", None),
        "jdoe@login.example.org": ("jdoe", "login.example.org", None),
        "jdoe@10.0.0.5:2222": ("jdoe", "10.0.0.5", 2222),
    }.items():
        got = resolve_login(cluster(transport="ssh", login=login))
        assert (got.user, got.host, got.port) == (user, host, port)
        assert got.destination == login


def test_local_paths_are_expanded_and_relative_to_the_cluster_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GH_RUN_TEST_UNSET", raising=False)
    monkeypatch.setenv("GH_RUN_TEST_DIR", str(tmp_path / "set"))
    assert expand_local("${GH_RUN_TEST_UNSET:-../keys}/id", tmp_path / "clusters", "w") == str(
        tmp_path / "keys" / "id"
    )
    assert expand_local("${GH_RUN_TEST_DIR:-x}/id", tmp_path, "w") == str(tmp_path / "set" / "id")
    assert expand_local("~/id", tmp_path, "w") == str(Path.home() / "id")
    with pytest.raises(UserError, match=r"w: '\$GH_RUN_TEST_UNSET/id' uses \$GH_RUN_TEST_UNSET"):
        expand_local("$GH_RUN_TEST_UNSET/id", tmp_path, "w")


def test_resolved_login_needs_a_readable_key(tmp_path: Path) -> None:
    file = tmp_path / "site.yaml"
    file.write_text("x")
    c = cluster(transport="ssh", login="u@h", ssh={"identity": "keys/id"})
    c.source = str(file)
    with pytest.raises(UserError, match=r"ssh.identity: the key file .*/keys/id does not exist"):
        resolve_login(c)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("key")
    c2 = cluster(
        transport="ssh",
        login="u@h:2",
        ssh={
            "identity": "keys/id",
            "options": {"UserKnownHostsFile": "kh other", "Compression": "yes"},
        },
    )
    c2.source = str(file)
    login = resolve_login(c2)
    assert login.identity == str(tmp_path / "keys" / "id")
    assert login.options == {
        "UserKnownHostsFile": f"{tmp_path / 'kh'} {tmp_path / 'other'}",
        "Compression": "yes",
    }


def test_ssh_command_line_puts_gh_runs_own_options_first_and_defaults_last() -> None:
    c = cluster(
        transport="ssh",
        login="u@h:22",
        ssh={"options": {"ServerAliveInterval": "30", "ProxyJump": "bastion"}},
    )
    t = SshTransport(resolve_login(c))
    try:
        argv = t.ssh_argv()
        # For ssh the first value of an option wins: BatchMode and ControlPath cannot be
        # overridden; the user's ServerAliveInterval comes before gh-run's default.
        assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
        assert argv[4].startswith("ControlPath=/")
        assert argv.index("ServerAliveInterval=30") < argv.index("ServerAliveInterval=5")
        assert argv[argv.index("-p") : argv.index("-p") + 4] == ["-p", "22", "-l", "u"]
        assert len(argv[4].removeprefix("ControlPath=")) < 100  # a unix socket path's limit
        assert t.manual_command() == "ssh -p 22 -o ServerAliveInterval=30 -o ProxyJump=bastion u@h"
    finally:
        t.close()


def test_one_transport_per_login_and_none_means_this_machine() -> None:
    c = cluster(transport="ssh", login="u@h")
    a, b = registry.for_cluster(c), registry.for_cluster(c)
    assert a is b and a.remote
    assert registry.for_descriptor(registry.descriptor(a)) is a
    assert registry.for_descriptor(None) is LOCAL and registry.descriptor(LOCAL) is None
    assert registry.for_cluster(cluster()) is LOCAL


def test_rsync_words_are_quoted_for_rsyncs_own_parser() -> None:
    assert _rsync_word("-oBatchMode=yes") == "-oBatchMode=yes"
    assert _rsync_word("/a b/key") == "'/a b/key'"
    assert _rsync_word("ControlPath=/tmp/x$y") == "'ControlPath=/tmp/x$y'"


def test_a_remote_runs_root_cannot_be_this_machines_home(tmp_path: Path) -> None:
    t = SshTransport(resolve_login(cluster(transport="ssh", login="u@h")))
    with pytest.raises(UserError, match=r"paths.runs: \{home\} is the gh-run home on this machine"):
        cluster_runs_root(cluster(transport="ssh", login="u@h"), tmp_path, t)
    bad = cluster(transport="ssh", login="u@h", paths={"runs": "$(id)/runs"})
    with pytest.raises(UserError, match=r"may hold only path characters"):
        cluster_runs_root(bad, tmp_path, t)
    # An absolute path needs no login node to be resolved.
    plain = cluster(transport="ssh", login="u@h", paths={"runs": "/scratch/me/runs/"})
    assert cluster_runs_root(plain, tmp_path, t) == "/scratch/me/runs"
    assert t.round_trips == 0


# -- the login node's helpers, run here with sh ----------------------------------------------
def test_remote_helpers_pass_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/devcluster.sh installs it)")
    files = sorted(SCRIPTS.glob("*.sh"))
    assert len(files) >= 7
    res = subprocess.run(
        ["shellcheck", "-s", "sh", *map(str, files)], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stdout


def test_resolve_expands_variables_and_tilde_and_refuses_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GH_RUN_T_SCRATCH", "/scratch/x")
    monkeypatch.delenv("GH_RUN_T_NONE", raising=False)
    assert sh("resolve.sh", "$GH_RUN_T_SCRATCH/gh-run/runs").stdout == b"/scratch/x/gh-run/runs\n"
    assert sh("resolve.sh", "${GH_RUN_T_NONE:-/d}/r").stdout == b"/d/r\n"
    assert sh("resolve.sh", "~/runs").stdout == f"{os.environ['HOME']}/runs\n".encode()
    unset = sh("resolve.sh", "$GH_RUN_T_NONE/runs")
    assert unset.returncode != 0 and b"GH_RUN_T_NONE" in unset.stderr


def test_env_helper_passes_values_byte_for_byte_through_stdin() -> None:
    value = "a b 'c' \"d\" $(e) `f` ; g \\ h"
    res = sh(
        "env.sh",
        "2",
        "sh",
        "-c",
        'printf "%s|%s" "$S1" "$S2"',
        stdin=f"S1={value}\nS2=x\n".encode(),
    )
    assert res.returncode == 0 and res.stdout.decode() == f"{value}|x"


def test_read_helper_from_an_offset_and_its_tail(tmp_path: Path) -> None:
    f = tmp_path / "log"
    f.write_bytes(b"0123456789")
    assert sh("read.sh", str(f), "from", "0").stdout == b"0123456789"
    assert sh("read.sh", str(f), "from", "7").stdout == b"789"
    assert sh("read.sh", str(f), "from", "10").stdout == b""
    assert sh("read.sh", str(f), "tail", "4").stdout == b"6789"
    assert sh("read.sh", str(tmp_path / "none"), "from", "0").returncode == 3


def test_tails_helper_reads_each_stderr_log_of_the_job(tmp_path: Path) -> None:
    (tmp_path / "41_0_log.err").write_text(
        "x" * 10 + "slurmstepd: error: Exceeded job memory limit\n"
    )
    (tmp_path / "41_1_log.err").write_text("fine\n")
    (tmp_path / "42_0_log.err").write_text("other job\n")
    out = sh("tails.sh", "20", str(tmp_path), "41").stdout.split(b"\0")
    assert out[:-1] == [b"ed job memory limit\n", b"fine\n"] and out[-1] == b""
    assert LOCAL.tails(str(tmp_path), "41", 20) == ["ed job memory limit\n", "fine\n"]


def test_manifest_helper_matches_hashlib_and_says_missing(tmp_path: Path) -> None:
    (tmp_path / "r" / "artifacts").mkdir(parents=True)
    data = os.urandom(70_000)
    (tmp_path / "r" / "artifacts" / "a b.bin").write_bytes(data)
    (tmp_path / "r" / "link").symlink_to(tmp_path / "r" / "artifacts" / "a b.bin")
    res = sh("sha256.sh", str(tmp_path), "r/artifacts/a b.bin", "r/link", "r/none")
    assert res.stdout.decode().splitlines() == [
        f"{len(data)} {hashlib.sha256(data).hexdigest()}",
        "missing -",
        "missing -",
    ]


# -- which files come back: the same as for a local run ----------------------------------------
def _tree(root: Path) -> Path:
    run = root / "run1"
    art = run / "artifacts"
    (art / "sub" / "deep").mkdir(parents=True)
    for rel in ("a.txt", ".hidden.txt", "b.txt", "x.csv", "sub/c.txt", "sub/deep/d.json", "e.json"):
        (art / rel).write_text(rel)
    (root / "outside.txt").write_text("secret")
    (art / "leak.txt").symlink_to(root / "outside.txt")
    (art / "inner.txt").symlink_to(art / "a.txt")
    (art / "broken.txt").symlink_to(root / "nowhere")
    (art / "subdir_link").symlink_to(art / "sub")
    # a FIFO among the artifacts: refused on both sides, never skipped (issue 26: skipped
    # silently over SSH while a local run listed it as refused)
    os.mkfifo(art / "pipe.txt")
    os.mkfifo(art / "sub" / "deep" / "fifo.json")
    for name in ("7_0_log.out", "7_0_log.err", "7_1_log.err", "job.sbatch", "task.sh", "exit_code"):
        (run / name).write_text(name)
    (run / "notes.txt").write_text("not an artifact")
    (run / "8_0_log.out").symlink_to(root / "outside.txt")
    return run


@pytest.mark.parametrize(
    "include",
    [
        ["*.txt"],
        ["**/*.txt"],
        ["**/*.json", "*.csv"],
        ["sub/*"],
        ["sub/**/*.json"],
        ["*"],
        ["**"],
        ["?.txt", "[ab].txt"],
        ["leak.txt", "inner.txt"],
        ["./a.txt"],
    ],
)
@pytest.mark.parametrize("logs", [True, False])
def test_remote_selection_equals_the_local_one(
    tmp_path: Path, include: list[str], logs: bool
) -> None:
    run = _tree(tmp_path)
    spec = JobSpec.model_validate(
        {
            "name": "t",
            "workload": {"command": "true"},
            "artifacts": {"include": include, "logs": logs},
        }
    )
    local, refused = artifacts.select_sources(run, spec)
    listing = sh("list.sh", str(tmp_path), "run1", "run2")
    assert listing.returncode == 0, listing.stderr
    entries = remote_collect.list_entries(listing.stdout)
    assert remote_collect.Entry("x", "-", 0, "run2") in entries  # a folder that is not there
    chosen, remote_refused = remote_collect.select(entries, "run1", spec)
    assert {k: f"run1/{p.relative_to(run)}" for k, p in local.items()} == chosen
    assert sorted(refused, key=str) == sorted(remote_refused, key=str)
    if include in (["*.txt"], ["*"]):
        assert any(r.path == "pipe.txt" and r.reason == "not a regular file" for r in refused)


def test_old_state_store_gets_the_transport_column(tmp_path: Path) -> None:
    old = SCHEMA.replace(",\n    transport     TEXT", "")
    assert old != SCHEMA
    with contextlib.closing(sqlite3.connect(tmp_path / "state.db")) as con, con:
        con.executescript(old)
    store = Store(tmp_path)
    run = Run(
        run_id="r",
        name="n",
        job_name="ghr-r",
        spec_path=None,
        spec_json="{}",
        cluster="c",
        partition="gh",
        executor="slurm",
        run_dir="/x/r",
        transport='{"host": "h"}',
    )
    store.add_run(run)
    assert store.get_run("r").transport == '{"host": "h"}'
    Store(tmp_path)  # a second open finds the column there


def test_remote_limits_keep_the_run_s_own_files_first() -> None:
    """Files over the per-file limit are refused; the run limit is spent on the run's own files
    and logs before artifacts, as artifacts.collect spends it."""
    chosen = {
        "artifacts/a.bin": "r/artifacts/a.bin",
        "artifacts/huge.bin": "r/artifacts/huge.bin",
        "logs/1_0_log.out": "r/1_0_log.out",
        "run/job.sbatch": "r/job.sbatch",
    }
    sizes = {"r/artifacts/a.bin": 600, "r/artifacts/huge.bin": 5000, "r/1_0_log.out": 300}
    sizes["r/job.sbatch"] = 200
    limits = artifacts.SizeLimits(max_file_size="4K", max_run_size="1K")
    kept, refused = remote_collect.within_limits(chosen, sizes, limits)
    assert set(kept) == {"logs/1_0_log.out", "run/job.sbatch"}
    reasons = {r.path: r.reason for r in refused}
    assert "per-file limit of 4K" in reasons["huge.bin"]
    assert "past its limit of 1K" in reasons["a.bin"]
