"""Issue 42, class 2: trust covers the whole chain, and is checked on what is read. A user's own
cluster file that `extends:` a file another user can write took that file's setup lines into
the job (only the first file was checked); a link flipped between the check and the read of a
template or cluster file swapped another file in. Every file of an `extends:` chain and every
template is now checked by `fstat` of the descriptor it is read from (trust.read_checked).
Hostile chains are built here in several shapes; the races flip a real link while gh-run
renders, and the planted line must never reach a script."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "jobs" / "smoke.yaml"
DEV = (REPO / "clusters" / "dev.yaml").read_text()


def _cluster_text(marker: str) -> str:
    return DEV.replace("    setup:\n", f"    setup:\n      - touch {marker}\n")


def _render(cluster: Path, tmp_path: Path) -> str:
    from orchestrator.checks.prepare import prepare, render

    prep = prepare(SMOKE, [f"cluster={cluster}"])
    return render(prep, "r-1", tmp_path / "runs" / "r-1").script


def _open_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


# Where the base of the chain lies, and what makes it not the user's to trust.
def _in_open_folder(tmp_path: Path) -> Path:
    return _open_folder(tmp_path / "open") / "base.yaml"


def _open_file(tmp_path: Path) -> Path:
    f = tmp_path / "mine" / "base.yaml"
    f.parent.mkdir(exist_ok=True)
    f.write_text("")
    f.chmod(0o666)
    return f


def _through_a_link(tmp_path: Path) -> Path:
    """A base named by a link in the user's own folder, whose target lies in an open one."""
    target = _open_folder(tmp_path / "open2") / "real-base.yaml"
    target.write_text("")
    link = tmp_path / "mine" / "base.yaml"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    return link


BASES: dict[str, Callable[[Path], Path]] = {
    "in a folder every user can write": _in_open_folder,
    "a file every user can write": _open_file,
    "a link into a folder every user can write": _through_a_link,
}


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("where", sorted(BASES))
def test_every_file_of_an_extends_chain_is_checked(tmp_path: Path, where: str, depth: int) -> None:
    """The user's own file (0644, in a 0755 folder of theirs) extends, after `depth - 1` files
    of the user's own, a base whose setup line would run in the job."""
    marker = tmp_path / "planted-setup"
    base = BASES[where](tmp_path)
    real = base.resolve()
    real.write_text(_cluster_text(str(marker)))
    mine = tmp_path / "mine"
    mine.mkdir(exist_ok=True)
    mine.chmod(0o755)
    previous = base
    for i in range(depth - 1):
        mid = mine / f"mid{i}.yaml"
        mid.write_text(f"extends: {os.path.relpath(previous, mine)}\n")
        previous = mid
    top = mine / "dev.yaml"
    top.write_text(f"extends: {os.path.relpath(previous, mine)}\nname: dev\n")
    for f in mine.iterdir():
        if not f.is_symlink():
            f.chmod(0o644) if f != base else None
    with pytest.raises(UserError) as got:
        _render(top, tmp_path)
    text = got.value.message
    assert "writable by every user" in text and "extended by" in text, text
    assert str(real.parent) in text or str(real) in text, text
    # control: the same chain with the base made the user's alone renders with its line
    real.chmod(0o644)
    real.parent.chmod(0o755)
    assert f"touch {marker}" in _render(top, tmp_path)


def test_another_users_base_is_refused(tmp_path: Path, other_user: int) -> None:
    marker = tmp_path / "planted"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "base.yaml").write_text(_cluster_text(str(marker)))
    os.chown(theirs / "base.yaml", other_user, other_user)
    top = tmp_path / "dev.yaml"
    top.write_text("extends: theirs/base.yaml\n")
    with pytest.raises(UserError, match="owned by user ghrun-other"):
        _render(top, tmp_path)


def _flip(link: Path, targets: list[Path], stop: threading.Event) -> None:
    i = 0
    tmp = link.with_name(link.name + ".flip")
    while not stop.is_set():
        i += 1
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(targets[i % 2])
        os.replace(tmp, link)


def _race(
    link: Path, good: Path, bad: Path, attempt: Callable[[], str], tries: int
) -> dict[str, int]:
    """Render `tries` times while another thread flips `link` between a trusted and an
    untrusted file; the outcomes counted (the planted text must never come out)."""
    link.symlink_to(good)
    stop = threading.Event()
    flipper = threading.Thread(target=_flip, args=(link, [good, bad], stop), daemon=True)
    flipper.start()
    seen = {"trusted": 0, "refused": 0}
    try:
        for _ in range(tries):
            try:
                text = attempt()
            except UserError as exc:
                assert (
                    "writable by every user" in exc.message
                    or "changed while" in exc.message
                    or ("no such file" in exc.message)
                ), exc.message
                seen["refused"] += 1
                continue
            assert "PLANTED" not in text, "the untrusted file was read"
            seen["trusted"] += 1
    finally:
        stop.set()
        flipper.join()
    return seen


def test_a_cluster_file_link_flipped_while_rendering_never_reads_the_other(tmp_path: Path) -> None:
    good = tmp_path / "mine" / "dev.yaml"
    good.parent.mkdir()
    good.write_text(DEV)
    bad = _open_folder(tmp_path / "open") / "dev.yaml"
    bad.write_text(_cluster_text("PLANTED"))
    link = tmp_path / "mine" / "current.yaml"
    seen = _race(link, good, bad, lambda: _render(link, tmp_path), 150)
    assert sum(seen.values()) == 150


def test_a_template_link_flipped_while_rendering_never_reads_the_other(tmp_path: Path) -> None:
    from orchestrator.render import scripts as render

    tpl = tmp_path / "tpl" / "partitions"
    tpl.mkdir(parents=True)
    good = tmp_path / "good.sbatch.j2"
    good.write_text('{% extends "sbatch/base.sbatch.j2" %}\n')
    bad = _open_folder(tmp_path / "open") / "bad.sbatch.j2"
    bad.write_text('{% extends "sbatch/base.sbatch.j2" %}{% block setup %}PLANTED{% endblock %}\n')
    cluster = tmp_path / "dev.yaml"
    cluster.write_text(DEV + f"template_dirs: [{tpl.parent}]\n")

    def attempt() -> str:
        render._environment.cache_clear()  # each render reads the template again
        return _render(cluster, tmp_path)

    seen = _race(tpl / "gh.sbatch.j2", good, bad, attempt, 150)
    assert sum(seen.values()) == 150
