"""Where the sealing key lives (store/row_seal.py): a folder of its own inside the per-user gh-run
folder. That folder is also the default gh-run home, which earlier versions and any first command
made with the user's umask (0755): a key that needed it private refused every submit there (the
installed wheel's first `submit` on CI: "your gh-run key cannot be made or read")."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.store import row_seal


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    row_seal.forget()
    yield tmp_path / "xdg-data"
    row_seal.forget()


def test_a_key_is_made_beside_a_home_folder_open_to_reading(tmp_path: Path) -> None:
    home = tmp_path / "xdg-data" / "gh-run"
    home.mkdir(parents=True)
    home.chmod(0o755)  # as `gh-run submit` (or an earlier version) left the default home
    key = row_seal.user_key(create=True)
    assert key is not None and len(key) == row_seal.KEY_BYTES
    path = row_seal.key_path()
    assert path.parent.parent == home
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o755  # the user's folder is left as it was
    row_seal.forget()
    assert row_seal.user_key() == key  # read back, not made again


def test_a_key_folder_open_to_others_is_still_refused(tmp_path: Path) -> None:
    folder = row_seal.key_path().parent
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    with pytest.raises(row_seal.KeyUnavailable, match="open to others"):
        row_seal.user_key(create=True)
    assert not row_seal.key_path().exists()


def test_a_key_file_open_to_others_is_refused(tmp_path: Path) -> None:
    row_seal.user_key(create=True)
    os.chmod(row_seal.key_path(), 0o644)
    row_seal.forget()
    with pytest.raises(row_seal.KeyUnavailable, match="open to others"):
        row_seal.user_key()
