"""scripts/lib/private-apt.sh's papt_remove_tree: a build folder that still holds a mount (as
debootstrap leaves one when its unmount of the root's /proc finds it busy) is removed without
walking into the mounted file system, and leaves no mount behind. Real mounts: needs root."""

from __future__ import annotations

import os
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
