"""scripts/lib/private-apt.sh: papt_remove_tree (a build folder that still holds a mount, as
debootstrap leaves one when its unmount of the root's /proc finds it busy, is removed without
walking into the mounted file system, and leaves no mount behind; real mounts, needs root) and
papt_system_source (the Debian mirror and key, only from the system's own apt sources)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "scripts" / "lib" / "private-apt.sh"


def mounts_under(folder: Path) -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    return [p for p in points if p.startswith(f"{folder}/")]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root (the dev cluster's machines)")
def test_remove_tree_detaches_mounts_and_keeps_what_they_show(tmp_path: Path) -> None:
    host = tmp_path / "host-sys"  # stands in for the host's /sys, bound into the build root
    host.mkdir()
    (host / "canary").write_text("must survive\n")
    work = tmp_path / "build"
    (work / "rootfs" / "proc").mkdir(parents=True)
    (work / "rootfs" / "sys").mkdir()
    (work / "rootfs" / "etc").mkdir()
    (work / "rootfs" / "etc" / "hostname").write_text("image\n")
    subprocess.run(["mount", "-t", "tmpfs", "none", str(work / "rootfs" / "proc")], check=True)
    subprocess.run(["mount", "--bind", str(host), str(work / "rootfs" / "sys")], check=True)
    try:
        res = subprocess.run(
            ["bash", "-c", f'set -euo pipefail; source "{LIB}"; papt_remove_tree "$1"', "_", work],
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert not work.exists()
        assert mounts_under(tmp_path) == []
        assert (host / "canary").read_text() == "must survive\n"
    finally:
        for point in sorted(mounts_under(tmp_path), reverse=True):
            subprocess.run(["umount", "-l", point], check=False)


def test_remove_tree_of_a_missing_folder_is_nothing(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            "bash",
            "-c",
            f'set -euo pipefail; source "{LIB}"; papt_remove_tree "$1"',
            "_",
            tmp_path / "gone",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert list(tmp_path.iterdir()) == []


# -- the Debian mirror, only from the system's own apt sources (issue 25) -------------------
# apt itself reads the sources (`apt-get indextargets`); these are real apt configurations in a
# temporary Dir::Etc, in both formats, with what images and sites put beside the archive.

KEY_BLOCK = (
    " -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGPL0BUBEADmW5Nq\n"
    " -----END PGP PUBLIC KEY BLOCK-----"
)


def system_source(etc: Path, codename: str = "bookworm") -> subprocess.CompletedProcess[str]:
    os_release = etc / "os-release"
    os_release.write_text(f'PRETTY_NAME="Debian"\nVERSION_CODENAME={codename}\n')
    script = (
        f'set -euo pipefail; source "{LIB}"; papt_system_source; '
        'printf "%s\\n" "$PAPT_URI"; papt_write_sources'
    )
    return subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "PAPT_SYSTEM_ETC": str(etc), "PAPT_OS_RELEASE": str(os_release)},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    folder = tmp_path / "etc-apt"
    (folder / "sources.list.d").mkdir(parents=True)
    (folder / "sources.list").write_text("")
    return folder


@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get reads the sources")
def test_one_line_sources_give_their_mirror_and_keyring(etc: Path, tmp_path: Path) -> None:
    keyring = tmp_path / "site-keyring.gpg"
    keyring.write_bytes(b"key")
    (etc / "sources.list").write_text(
        "# a site's mirror, security first\n"
        "deb http://security.example.org/debian-security bookworm-security main\n"
        f"deb [arch=amd64 signed-by={keyring}] http://mirror.example.org/debian bookworm main\n"
    )
    (etc / "sources.list.d" / "nodesource.list").write_text(
        "deb https://deb.nodesource.com/node_20.x nodistro main\n"
    )
    res = system_source(etc)
    assert res.returncode == 0, res.stderr
    uri, *stanza = res.stdout.splitlines()
    assert uri == "http://mirror.example.org/debian"
    assert stanza == [
        "Types: deb",
        "URIs: http://mirror.example.org/debian",
        "Suites: bookworm trixie sid experimental",
        "Components: main non-free",
        f"Signed-By: {keyring}",
    ]


@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get reads the sources")
def test_deb822_stanza_with_an_inline_key(etc: Path) -> None:
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://proxy.example.org/debian-security\n"
        "Suites: trixie-security\nComponents: main\n\n"
        "# the archive, through the site's proxy\n"
        "Types: deb deb-src\nURIs: http://proxy.example.org/debian\n"
        "Suites: trixie trixie-updates\nComponents: main contrib\n"
        f"Signed-By:\n{KEY_BLOCK}\n"
    )
    res = system_source(etc, codename="trixie")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.startswith("http://proxy.example.org/debian\n")
    assert out.endswith(f"Signed-By: \n{KEY_BLOCK}\n")  # the key as the stanza wrote it


@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get reads the sources")
def test_a_suite_alias_and_no_signed_by(etc: Path) -> None:
    (etc / "sources.list").write_text("deb http://ftp.example.org/debian stable main\n")
    res = system_source(etc)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "http://ftp.example.org/debian"
    assert "Signed-By" not in res.stdout  # apt's trusted keys, as for the system


@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get reads the sources")
def test_no_debian_archive_is_one_sentence_and_no_guess(etc: Path) -> None:
    (etc / "sources.list").write_text(
        "deb http://security.example.org/debian-security bookworm-security main\n"
        "deb https://deb.nodesource.com/node_20.x nodistro main\n"
    )
    res = system_source(etc)
    assert res.returncode == 1
    assert res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert line.startswith("[install] ERROR: no Debian archive in this system's apt sources")
    assert "add the Debian mirror this machine uses there" in line
    assert "deb.debian.org" not in line  # no mirror is made up
