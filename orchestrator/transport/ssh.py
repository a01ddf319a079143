"""The SSH transport: the cluster reached through its login node with the system's OpenSSH
client, over one multiplexed connection per gh-run process.

The connection is a ControlMaster (`ssh -N -f`, ControlPersist so that it ends by itself
soon after a killed gh-run) on a control socket in a private folder of this process. Every
remote command is one more session on it (`ControlMaster=no`), its words quoted with
shlex.join; rsync copies ride on it too (`rsync -e ssh ...`). Before each command the socket
is checked: when the master is gone (the connection dropped) a new one is made, with a short
backoff; a command sent on a connection that then dropped is reported with `maybe_ran`, so
that sbatch is never sent twice blindly.

Host keys are checked as the user's SSH config (or the cluster file's ssh.options) says;
gh-run never disables the check, and says so when a configuration does (`ssh -G`). BatchMode
keeps ssh from ever prompting: an unknown or changed host key, or a refused key, is one
sentence with the fix.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import GhRunError, RuntimeFailure, UserError
from orchestrator.core.shipped import templates_dir
from orchestrator.transport.base import Transport, TransportError
from orchestrator.transport.login import SshLogin

SCRIPTS = templates_dir() / "remote"
# Reconnection: one try, then these pauses between the next ones (nothing was sent yet).
RECONNECT_DELAYS_S = (1.0, 2.0)
# No data for this long ends a copy (the transfer itself may take as long as it needs).
RSYNC_IO_TIMEOUT_S = 60
PARTIAL_DIR = ".rsync-partial"


def script(name: str) -> str:
    """A remote helper from templates/remote/, run as `sh -c SCRIPT sh ARGS...`."""
    return (SCRIPTS / name).read_text()


def _rsync_word(word: str) -> str:
    """One word of rsync's -e command (rsync splits on spaces and honours quotes, not
    backslashes; the cluster model refuses quotes in every word that reaches it)."""
    return f"'{word}'" if re.search(r"[\s\"'$`\\*?\[\]{}()<>|;&~#]", word) else word


@dataclass(frozen=True)
class PullStats:
    """What one rsync from the cluster moved: bytes sent, and bytes it found already here."""

    literal: int
    matched: int


class SshTransport(Transport):
    remote = True

    def __init__(self, login: SshLogin) -> None:
        super().__init__()
        self.login = login
        self.where = login.destination
        self.key = login.key
        self.connects = 0
        self._dir: Path | None = None
        self._resolved: dict[str, str] = {}
        self._policy_checked = False

    # -- the shared connection ------------------------------------------------------------
    def _control(self) -> Path:
        if self._dir is None:
            # Short: a unix socket path has ~100 bytes at most (macOS's $TMPDIR is long).
            base = "/tmp" if Path("/tmp").is_dir() else None
            self._dir = Path(tempfile.mkdtemp(prefix="ghr-ssh-", dir=base))
            atexit.register(self.close)
        return self._dir / "m"

    def ssh_argv(self) -> list[str]:
        """ssh and its options, up to (not including) the destination host."""
        login = self.login
        argv = ["ssh"]
        if login.config:
            argv += ["-F", login.config]
        argv += ["-o", "BatchMode=yes", "-o", f"ControlPath={self._control()}"]
        if login.identity:
            argv += ["-i", login.identity, "-o", "IdentitiesOnly=yes"]
        if login.port:
            argv += ["-p", str(login.port)]
        if login.user:
            argv += ["-l", login.user]
        for key, value in login.options.items():
            argv += ["-o", f"{key}={value}"]
        # After the user's options: for ssh the first value of an option wins.
        argv += [
            "-o",
            f"ConnectTimeout={login.connect_timeout_s}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]
        return argv

    def manual_command(self) -> str:
        """The ssh command a person would type to reach the login node the same way."""
        login = self.login
        argv = ["ssh"]
        if login.config:
            argv += ["-F", login.config]
        if login.identity:
            argv += ["-i", login.identity]
        if login.port:
            argv += ["-p", str(login.port)]
        for key, value in login.options.items():
            argv += ["-o", f"{key}={value}"]
        argv.append(f"{login.user}@{login.host}" if login.user else login.host)
        return shlex.join(argv)

    def _alive(self) -> bool:
        path = self._control()
        if not path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            try:
                sock.connect(str(path))
            except OSError:
                return False
        return True

    def connect(self) -> None:
        """Make sure the shared connection is up; reconnect (with backoff) when it is not."""
        if self._alive():
            return
        self._check_host_key_policy()
        self._control().unlink(missing_ok=True)  # a socket left by a killed master
        argv = [
            *self.ssh_argv(),
            "-o",
            "ControlMaster=yes",
            "-o",
            f"ControlPersist={self.login.persist_s}",
            "-N",
            "-f",
            self.login.host,
        ]
        for attempt in range(len(RECONNECT_DELAYS_S) + 1):
            error: GhRunError
            try:
                res = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=self.login.connect_timeout_s + 30,
                    check=False,
                )
            except FileNotFoundError:
                raise RuntimeFailure(
                    "ssh (the OpenSSH client) is not installed on this machine; install it "
                    "(Debian: apt-get install openssh-client) to reach "
                    f"{self.login.destination}"
                ) from None
            except subprocess.TimeoutExpired:
                error = TransportError(
                    f"{self.login.destination} ({self.login.source}: login) did not complete "
                    f"the SSH handshake within {self.login.connect_timeout_s + 30} s",
                    maybe_ran=False,
                )
            else:
                if res.returncode == 0 and self._alive():
                    self.connects += 1
                    return
                error = self._failure(res.stderr, maybe_ran=False, doing="connecting")
            if not isinstance(error, TransportError) or attempt == len(RECONNECT_DELAYS_S):
                raise error
            time.sleep(RECONNECT_DELAYS_S[attempt])

    def _check_host_key_policy(self) -> None:
        """Say (once) when the SSH configuration in force does not check host keys."""
        if self._policy_checked:
            return
        self._policy_checked = True
        try:
            res = subprocess.run(
                [*self.ssh_argv(), "-G", self.login.host],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        conf: dict[str, str] = {}
        for line in res.stdout.splitlines():
            key, _, value = line.partition(" ")
            conf.setdefault(key.lower(), value.strip())
        strict = conf.get("stricthostkeychecking", "")
        files = conf.get("userknownhostsfile", "").split()
        if strict in ("false", "no", "off") or files == ["/dev/null"]:
            say = self.warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
            say(
                f"host keys of {self.login.destination} are not checked (StrictHostKeyChecking "
                f"{strict or '?'}, UserKnownHostsFile {' '.join(files) or '?'}), because your "
                f"SSH config or {self.login.source} says so; gh-run goes on as configured, but "
                "anyone between here and the login node could read and change what it sends"
            )

    def _forget(self) -> None:
        """Drop the shared connection (it is broken or wedged); the next command reconnects."""
        if self._dir is None:
            return
        path = self._control()
        if self._alive():
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    [*self.ssh_argv(), "-O", "exit", self.login.host],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=5,
                    check=False,
                )
        path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._dir is None:
            return
        self._forget()
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def _failure(self, stderr: str, *, maybe_ran: bool, doing: str) -> GhRunError:
        """ssh's own complaint (exit 255) as one sentence with the fix."""
        login = self.login
        lines = [
            x.strip()
            for x in stderr.splitlines()
            if x.strip() and not x.startswith(("@", "Warning: Permanently added"))
        ]
        detail = lines[-1] if lines else "the connection was closed"
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "has changed and you have" in (
            stderr
        ):
            m = re.search(r'ssh-keygen -f "([^"]+)" -R "([^"]+)"', stderr)
            fix = (
                f"`ssh-keygen -f {shlex.quote(m.group(1))} -R {shlex.quote(m.group(2))}`"
                if m
                else "`ssh-keygen -R HOST` on the known_hosts file your SSH config names"
            )
            return UserError(
                f"{login.source}: login: the host key of {login.destination} is not the one "
                "recorded in your known_hosts (the login node was reinstalled, or someone is in "
                f"between), so gh-run refused to connect; if your admins confirm the new key, "
                f"remove the old one with {fix} and record the new one (connecting once with "
                f"`{self.manual_command()}` offers to, unless StrictHostKeyChecking is yes)"
            )
        if "Host key verification failed" in stderr:
            return UserError(
                f"{login.source}: login: the host key of {login.destination} is not in your "
                "known_hosts and gh-run never accepts an unseen one; compare its fingerprint "
                "with the one your admins publish and record it (connecting once with "
                f"`{self.manual_command()}` offers to, unless StrictHostKeyChecking is yes)"
            )
        if "Permission denied" in stderr:
            user = login.user or "(the one your SSH config names)"
            key = f"the key {login.identity}" if login.identity else "your SSH keys"
            return UserError(
                f"{login.source}: login: {login.destination} refused user {user} with {key} "
                "(Permission denied); check the user in login: and the key in ssh.identity, "
                "whose public half must be in that user's authorized_keys on the login node"
            )
        if "Could not resolve hostname" in stderr:
            return TransportError(
                f"{login.source}: login: the host name {login.host} cannot be resolved "
                f"({detail}); check login: and that this machine is on the cluster's network",
                maybe_ran=False,
            )
        if maybe_ran:
            return TransportError(
                f"the connection to {login.destination} dropped while {doing} ({detail})",
                maybe_ran=True,
            )
        return TransportError(
            f"{login.destination} ({login.source}: login) cannot be reached ({detail}); check "
            f"that the login node is up and reachable from here (`{self.manual_command()}`)",
            maybe_ran=False,
        )

    # -- commands -------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        words = list(argv)
        data = stdin
        if env:
            if stdin is not None:
                raise ValueError("a remote command gets either stdin or env, not both")
            for name, value in env.items():
                if "\n" in value or "\r" in value:
                    raise RuntimeFailure(
                        f"{name} holds a line break, which cannot be passed to the login node; "
                        "pass it another way (a file on the cluster)"
                    )
            words = ["sh", "-c", script("env.sh"), "sh", str(len(env)), *words]
            data = "".join(f"{name}={value}\n" for name, value in env.items())
        res = self.run_bytes(words, timeout=timeout, stdin=data.encode() if data else b"")
        return subprocess.CompletedProcess(
            res.args,
            res.returncode,
            res.stdout.decode("utf-8", "replace"),
            res.stderr.decode("utf-8", "replace"),
        )

    def run_bytes(
        self, words: Sequence[str], *, timeout: float = 30.0, stdin: bytes = b""
    ) -> subprocess.CompletedProcess[bytes]:
        self.connect()
        what = words[0] if words[0] != "sh" else "a helper script"
        argv = [
            *self.ssh_argv(),
            "-o",
            "ControlMaster=no",
            "-T",
            self.login.host,
            "--",
            shlex.join(words),
        ]
        self.round_trips += 1
        try:
            res = subprocess.run(
                argv, input=stdin, capture_output=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            self._forget()
            raise TransportError(
                f"{what} on {self.login.destination} did not answer within {timeout:.0f} s "
                "(the connection may be wedged; the next command reconnects)",
                maybe_ran=True,
            ) from None
        if res.returncode == 255:
            self._forget()
            raise self._failure(
                res.stderr.decode("utf-8", "replace"), maybe_ran=True, doing=f"{what} ran"
            )
        if res.returncode == 127 and b"not found" in res.stderr:
            raise RuntimeFailure(
                f"{words[0]} is not found on {self.login.destination} "
                f"({' '.join(res.stderr.decode('utf-8', 'replace').split())}); make it reachable "
                "in the login shell's environment there (e.g. `module load slurm` in ~/.bashrc) "
                "or ask the cluster's admins"
            )
        return res

    def read_from(self, path: str, offset: int) -> bytes | None:
        res = self.run_bytes(["sh", "-c", script("read.sh"), "sh", path, "from", str(offset)])
        return None if res.returncode == 3 else res.stdout

    def read_tail(self, path: str, nbytes: int) -> bytes | None:
        res = self.run_bytes(["sh", "-c", script("read.sh"), "sh", path, "tail", str(nbytes)])
        return None if res.returncode == 3 else res.stdout

    def tails(self, folder: str, job_id: str, nbytes: int) -> list[str]:
        res = self.run_bytes(["sh", "-c", script("tails.sh"), "sh", str(nbytes), folder, job_id])
        return [t.decode("utf-8", "replace") for t in res.stdout.split(b"\0")[:-1]]

    def resolve_path(self, text: str, where: str) -> str:
        if "$" not in text and not text.startswith("~"):
            return text
        if text not in self._resolved:
            res = self.run(["sh", "-c", script("resolve.sh"), "sh", text])
            value = res.stdout.strip()
            if res.returncode != 0 or not value:
                why = " ".join(res.stderr.split()) or f"exit {res.returncode}"
                raise UserError(
                    f"{where}: {text!r} cannot be resolved on {self.login.destination} ({why}); "
                    "set the variable in the login shell's startup files there, or write an "
                    "absolute path"
                )
            self._resolved[text] = value
        return self._resolved[text]

    # -- copies ---------------------------------------------------------------------------
    def _rsh(self) -> str:
        return " ".join(_rsync_word(w) for w in [*self.ssh_argv(), "-o", "ControlMaster=no"])

    def push(self, local_root: Path, names: Sequence[str], remote_root: str) -> None:
        """One rsync for all the given folders (a whole campaign: one copy)."""
        if not names:
            return
        mkdir = shlex.join(["mkdir", "-p", "--", remote_root])
        self._rsync(
            [
                "-a",
                "-r",
                f"--rsync-path={mkdir} && rsync",
                f"{local_root}/",
                f"{self.login.host}:{remote_root}/",
            ],
            names,
            f"copying {len(names)} folder(s) to {self.login.destination}:{remote_root}",
        )

    def pull(self, remote_root: str, relpaths: Sequence[str], local_root: Path) -> PullStats:
        """One rsync for the given files; an interrupted copy resumes from its partial data
        (rsync's delta transfer against it: `matched` bytes did not cross the wire again)."""
        if not relpaths:
            return PullStats(0, 0)
        local_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        out = self._rsync(
            [
                "-a",
                "--stats",
                f"--partial-dir={PARTIAL_DIR}",
                f"{self.login.host}:{remote_root}/",
                f"{local_root}/",
            ],
            relpaths,
            f"copying {len(relpaths)} file(s) from {self.login.destination}:{remote_root}",
        )
        found = dict(re.findall(r"^(Literal|Matched) data: ([\d,.]+)", out, re.MULTILINE))
        return PullStats(
            literal=int(re.sub(r"\D", "", found.get("Literal", "0")) or 0),
            matched=int(re.sub(r"\D", "", found.get("Matched", "0")) or 0),
        )

    def _rsync(self, args: list[str], names: Sequence[str], doing: str) -> str:
        self.connect()
        argv = [
            "rsync",
            "--from0",
            "--files-from=-",
            f"--timeout={RSYNC_IO_TIMEOUT_S}",
            "-e",
            self._rsh(),
            *self.login.rsync_options,
            *args,
        ]
        self.round_trips += 1
        try:
            res = subprocess.run(
                argv,
                input="\0".join(names),
                capture_output=True,
                text=True,
                errors="replace",
                check=False,
            )
        except FileNotFoundError:
            raise RuntimeFailure(
                "rsync is not installed on this machine; install it (Debian: apt-get install "
                "rsync) to copy run folders to and from the cluster"
            ) from None
        if res.returncode == 0:
            return res.stdout
        if res.returncode == 127 or "command not found" in res.stderr:
            raise RuntimeFailure(
                f"rsync is not installed on {self.login.destination}; ask the cluster's admins "
                "(gh-run copies run folders with rsync over ssh)"
            )
        if res.returncode in (5, 10, 12, 30, 35, 255):
            # The connection failed or stalled (ssh's own exit, a broken stream, a timeout).
            self._forget()
            failure = self._failure(res.stderr, maybe_ran=True, doing=doing)
            if isinstance(failure, TransportError):
                raise TransportError(f"{failure} (rsync exit {res.returncode})", maybe_ran=True)
            raise failure
        last = " ".join(res.stderr.strip().splitlines()[-1:]) or "no message"
        raise RuntimeFailure(f"{doing} failed (rsync exit {res.returncode}): {last}")
