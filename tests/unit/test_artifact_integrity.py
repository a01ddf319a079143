"""Issue 15, class 8 (size limits with a site default and a flag, refused files listed, holes
of sparse files kept, sources opened without following links and checked once opened), class 2
(concurrent `fetch` of one run) and class 9 (a same-size tampered artifact is caught by the copy
check, by the skip-if-unchanged path and by the verify step, which is part of collection)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.artifacts import collect as artifacts
from orchestrator.core.errors import RuntimeFailure
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import Run, Store
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _finished(tmp: Path, home: Path, files: dict[str, bytes], cluster: str = "dev") -> Run:
    """A run that ended, with `files` in its artifacts folder (no job needed to make them)."""
    run_dir = tmp / "runs" / "r-1"
    (run_dir / "artifacts").mkdir(parents=True)
    for name, data in files.items():
        path = run_dir / "artifacts" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (run_dir / "local_0_log.out").write_text("done\n")
    spec = JobSpec.model_validate(
        {"name": "t", "cluster": cluster, "workload": {"command": "true"}, "artifacts": ["**/*"]}
    )
    run = Run(
        run_id="r-1",
        name="t",
        job_name="ghr-r-1",
        spec_path=None,
        spec_json=spec.model_dump_json(),
        cluster="dev",
        partition="gh",
        executor="local",
        run_dir=str(run_dir),
        job_id="local-1",
        state="COMPLETED",
        ended_at=1.0,
    )
    Store(home).add_run(run)
    return run


def _spec(run: Run) -> JobSpec:
    return JobSpec.model_validate_json(run.spec_json)


def _copy(home: Path, rel: str) -> Path:
    return home / "artifacts" / "r-1" / "artifacts" / rel


MiB = 1 << 20


def test_per_file_limit_from_the_flag(tmp_path: Path, gh_home: Path) -> None:
    _finished(tmp_path, gh_home, {"big.bin": b"x" * (3 * MiB), "small.txt": b"ok\n"})
    res = run_cli(["fetch", "r-1", "--max-file-size", "1M"], gh_home)
    assert res.rc == 0, res.text
    assert "not collected: big.bin: 3145728 bytes, over the per-file limit of 1M" in res.err
    assert _copy(gh_home, "small.txt").read_bytes() == b"ok\n"
    assert not _copy(gh_home, "big.bin").exists()
    manifest = (gh_home / "artifacts" / "r-1" / "manifest.json").read_text()
    assert '"path": "big.bin"' in manifest and "per-file limit" in manifest
    res = run_cli(["fetch", "r-1", "--max-file-size", "lots"], gh_home)
    assert res.rc == 2 and "--max-file-size" in res.err, res.text


def test_per_run_limit_keeps_the_run_files(tmp_path: Path, gh_home: Path) -> None:
    files = {f"part{i}.bin": bytes([i]) * MiB for i in range(4)}
    run = _finished(tmp_path, gh_home, files)
    limits = artifacts.SizeLimits(max_run_size="2M")
    manifest = artifacts.collect(Store(gh_home), run, _spec(run), gh_home, limits)
    got = {f.relpath for f in manifest.files}
    assert "logs/local_0_log.out" in got  # the run's own files come first
    assert sum(f.size for f in manifest.files) <= 2 * MiB
    refused = {r.path: r.reason for r in manifest.refused}
    assert set(refused) | {g.removeprefix("artifacts/") for g in got} >= set(files)
    assert all("past its limit of 2M" in why for why in refused.values()) and refused


def test_site_default_in_the_cluster_file(tmp_path: Path, gh_home: Path) -> None:
    cluster = tmp_path / "site.yaml"
    text = (REPO / "clusters" / "dev.yaml").read_text()
    cluster.write_text(text + "artifacts: {max_file_size: 512K}\n")
    _finished(tmp_path, gh_home, {"big.bin": b"y" * MiB}, cluster=str(cluster))
    res = run_cli(["fetch", "r-1"], gh_home)
    assert res.rc == 0, res.text
    assert "over the per-file limit of 512K" in res.err
    res = run_cli(["fetch", "r-1", "--max-file-size", "2M"], gh_home)  # the flag wins
    assert res.rc == 0 and _copy(gh_home, "big.bin").stat().st_size == MiB, res.text


def test_holes_of_sparse_files_are_kept(tmp_path: Path, gh_home: Path) -> None:
    run = _finished(tmp_path, gh_home, {})
    sparse = Path(run.run_dir) / "artifacts" / "sparse.bin"
    # 64 holes of the collector's 1 MiB chunk on either side of the data: a copy that wrote
    # them would hold 64 times the MiB the copy may take (at 1 GiB, the four sha256 passes
    # over the zeros took 11 s of CPU, for the same proof)
    with sparse.open("wb") as f:
        f.seek(32 * MiB)
        f.write(b"data" * 1024)
        f.seek(64 * MiB - 1)
        f.write(b"\0")
    assert sparse.stat().st_blocks * 512 < MiB  # the file system keeps holes at all
    manifest = artifacts.collect(Store(gh_home), run, _spec(run), gh_home)
    copy = _copy(gh_home, "sparse.bin")
    assert copy.stat().st_size == 64 * MiB
    assert copy.stat().st_blocks * 512 < MiB, copy.stat().st_blocks
    assert artifacts.sha256_of(copy) == artifacts.sha256_of(sparse)
    assert any(f.relpath == "artifacts/sparse.bin" for f in manifest.files)


def test_links_fifos_and_link_components_are_refused(tmp_path: Path, gh_home: Path) -> None:
    run = _finished(tmp_path, gh_home, {"ok.txt": b"ok\n"})
    art = Path(run.run_dir) / "artifacts"
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("not yours\n")
    (art / "link.txt").symlink_to(secret / "key.txt")
    (art / "dirlink").symlink_to(secret)
    os.mkfifo(art / "pipe.txt")  # must not hang the open
    root = Path(run.run_dir)
    for rel, why in [
        ("artifacts/link.txt", "symbolic link"),
        ("artifacts/dirlink/key.txt", "symbolic link"),
        ("artifacts/pipe.txt", "not a regular file"),
        ("artifacts/../../secret/key.txt", "outside"),
    ]:
        with (
            pytest.raises(artifacts.SourceRefused, match=why),
            artifacts.open_beneath(root, Path(rel)),
        ):
            pass
    manifest = artifacts.collect(Store(gh_home), run, _spec(run), gh_home)
    assert {f.relpath for f in manifest.files} >= {"artifacts/ok.txt"}
    assert {r.path for r in manifest.refused} >= {"link.txt", "pipe.txt"}
    assert not list((gh_home / "artifacts").rglob("key.txt"))


def test_a_file_swapped_for_a_link_after_listing_is_not_followed(
    tmp_path: Path, gh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job swaps a listed file for a link between gh-run's listing and its open."""
    run = _finished(tmp_path, gh_home, {"out.txt": b"result\n"})
    target = Path(run.run_dir) / "artifacts" / "out.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours\n")
    listing = artifacts.select_sources

    def list_then_swap(run_dir: Path, spec: JobSpec):  # type: ignore[no-untyped-def]
        found = listing(run_dir, spec)
        target.unlink()
        target.symlink_to(secret)  # a real rename race, won by the job
        return found

    monkeypatch.setattr(artifacts, "select_sources", list_then_swap)
    manifest = artifacts.collect(Store(gh_home), run, _spec(run), gh_home)
    assert [r.path for r in manifest.refused] == ["out.txt"]
    assert "symbolic link" in manifest.refused[0].reason
    assert not _copy(gh_home, "out.txt").exists()


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, other content


def test_copy_check_compares_sha256_not_size(
    tmp_path: Path, gh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _finished(tmp_path, gh_home, {"a.bin": os.urandom(MiB)})
    real = artifacts.copy_data

    def corrupting(fin: int, fout: int, size: int) -> None:
        real(fin, fout, size)
        if size == MiB:  # a bit flipped on the way to the store: same size
            byte = os.pread(fout, 1, 10)
            os.pwrite(fout, bytes([byte[0] ^ 1]), 10)

    monkeypatch.setattr(artifacts, "copy_data", corrupting)
    store = Store(gh_home)
    with pytest.raises(RuntimeFailure, match="does not match the source"):
        artifacts.collect(store, run, _spec(run), gh_home)
    assert store.artifacts("r-1") == [] and not _copy(gh_home, "a.bin").exists()


def test_skip_if_unchanged_compares_sha256(tmp_path: Path, gh_home: Path) -> None:
    run = _finished(tmp_path, gh_home, {"a.bin": os.urandom(MiB)})
    store = Store(gh_home)
    artifacts.collect(store, run, _spec(run), gh_home)
    src = Path(run.run_dir) / "artifacts" / "a.bin"
    # The source changed after the first collection, same size: it must be collected again.
    _flip_one_byte(src)
    again = artifacts.collect(store, run, _spec(run), gh_home)
    [rec] = [f for f in again.files if f.relpath == "artifacts/a.bin"]
    assert (rec.size, rec.sha256) == artifacts.sha256_of(src)
    assert _copy(gh_home, "a.bin").read_bytes() == src.read_bytes()
    # The store's copy was tampered with, same size: the next collection restores it.
    _flip_one_byte(_copy(gh_home, "a.bin"))
    artifacts.collect(store, run, _spec(run), gh_home)
    assert _copy(gh_home, "a.bin").read_bytes() == src.read_bytes()


def test_verify_is_part_of_collection(tmp_path: Path, gh_home: Path) -> None:
    run = _finished(tmp_path, gh_home, {"a.bin": os.urandom(MiB), "b.txt": b"b\n"})
    res = run_cli(["fetch", "r-1"], gh_home)
    assert res.rc == 0, res.text
    # The job's folder is cleaned up; later the store's copy is damaged (same size).
    (Path(run.run_dir) / "artifacts" / "a.bin").unlink()
    _flip_one_byte(_copy(gh_home, "a.bin"))
    assert artifacts.verify(Store(gh_home), run, gh_home) == [
        "artifacts/a.bin: size or sha256 differs from the manifest"
    ]
    res = run_cli(["fetch", "r-1"], gh_home)
    assert res.rc == 1, res.text
    [line] = res.err.strip().splitlines()
    assert "artifacts/a.bin: size or sha256 differs" in line and "restore them" in line


def test_concurrent_fetches_of_one_run(tmp_path: Path, gh_home: Path) -> None:
    files = {f"f{i}.bin": os.urandom(2 * MiB) for i in range(12)}
    run = _finished(tmp_path, gh_home, files)
    env = {**os.environ, "GH_RUN_HOME": str(gh_home), "NO_COLOR": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "fetch", "r-1"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    store = Store(gh_home)
    for name, data in files.items():
        assert _copy(gh_home, name).read_bytes() == data
    assert {a.relpath for a in store.artifacts(run.run_id)} >= {f"artifacts/{n}" for n in files}
    assert not list((gh_home / "artifacts").rglob("*.partial"))


def test_limits_are_inclusive() -> None:
    """A file exactly at a limit is collected; one byte more is not (a `make mutate` survivor)."""
    limits = artifacts.SizeLimits(max_file_size="1M", max_run_size="2M")
    assert limits.check(MiB, 0) is None
    assert limits.check(MiB + 1, 0) is not None
    assert limits.check(MiB, MiB) is None
    assert limits.check(MiB, MiB + 1) is not None
