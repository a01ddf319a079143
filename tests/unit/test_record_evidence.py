"""Issue 42, class 3: a saved analysis is evidence about one file, and must prove it. A record
beside a report (`<report>.gh-run.json`, orchestrator/analysis/records.py) stands for the report
only when the report here has the sha256 the record was made from, the record is the report
owner's, and it reads whole; a .nsys-rep whose export is not here must be the one the record
names. Otherwise the report is read here and the analysis says why (a note of its source), or,
with no report to read, one sentence. Each way a record can lie is built here on a real export;
every relative path a manifest gives stays inside its folder."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis import loader, records, write_records
from orchestrator.core.errors import GhRunError, UserError

REPO = Path(__file__).resolve().parents[2]
SAXPY = REPO / "tests" / "data" / "nsys" / "saxpy-mpi-cuda_perlmutter0.sqlite"
CLOVER = REPO / "tests" / "data" / "nsys" / "cloverleaf-cuda_perlmutter.sqlite"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report-hash cache of the test's own."""
    from orchestrator.analysis import report_digest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    report_digest.cache_dir.cache_clear()


def _kernel_ns(m: Any) -> int:
    return int(sum(r.busy_ns + sum(r.kernel_types_ns.values()) for r in m.ranks))


def _notes(m: Any) -> str:
    return " ".join(n for s in m.sources for n in s.notes)


def _copy(src: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / (name or src.name)
    shutil.copyfile(src, f)
    return f


@dataclass(frozen=True)
class Recorded:
    """SAXPY's record as write_records.write() made it once, in a folder of its own, and the
    kernel time of SAXPY read afresh: the damage tests (a hundred and more) start from a copy
    of both, not from an analysis each (two thirds of this file's time when each made its own)."""

    folder: str
    text: str
    kernel_ns: int

    def copy_into(self, folder: Path) -> tuple[Path, Path]:
        """The report copied into `folder` and its record beside it, naming `folder`: what
        write() writes there (the record holds the report's paths, its size and sha256)."""
        f = _copy(SAXPY, folder)
        rec = records.record_path(f)
        rec.write_text(self.text.replace(_json_text(self.folder), _json_text(str(folder))))
        return f, rec


def _json_text(s: str) -> str:
    return json.dumps(s)[1:-1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    from orchestrator.analysis import report_digest

    base = tmp_path_factory.mktemp("recorded")
    with pytest.MonkeyPatch.context() as mp:  # the hash cache of its own, as each test's
        mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
        report_digest.cache_dir.cache_clear()
        f = _copy(SAXPY, base / "run")
        text = write_records.write(f).read_text()
        fresh = _kernel_ns(loader.analyze_paths([f], use_records=False))
    report_digest.cache_dir.cache_clear()
    assert _json_text(str(f.parent)) in text
    return Recorded(str(f.parent), text, fresh)


def test_a_copied_record_is_the_one_write_makes_there(tmp_path: Path, recorded: Recorded) -> None:
    f, rec = recorded.copy_into(tmp_path / "copy")
    made = _copy(SAXPY, tmp_path / "made")
    want = write_records.write(made).read_text()
    assert rec.read_text() == want.replace(_json_text(str(made.parent)), _json_text(str(f.parent)))
    got = loader.analyze_paths([f])
    assert "not used" not in _notes(got)
    assert _kernel_ns(got) == recorded.kernel_ns


def _same_size_longer_kernels(f: Path) -> None:
    """Every kernel twice as long, the file's size unchanged (SQLite rewrites pages in place)."""
    size = f.stat().st_size
    db = sqlite3.connect(f)
    db.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + ("end" - start)')
    db.commit()
    db.close()
    assert f.stat().st_size == size


def test_an_export_changed_at_the_same_size_is_read_again(tmp_path: Path) -> None:
    f = _copy(SAXPY, tmp_path / "run")
    write_records.write(f)
    before = _kernel_ns(loader.analyze_paths([f]))
    _same_size_longer_kernels(f)
    got = loader.analyze_paths([f])
    fresh = loader.analyze_paths([f], use_records=False)
    assert _kernel_ns(got) == _kernel_ns(fresh) > before
    assert "content (sha256) is not the one the record was made from" in _notes(got)
    assert "the report was read here instead" in _notes(got)


def test_the_mtime_set_back_does_not_hide_a_change(tmp_path: Path) -> None:
    """The hash cache is keyed by the change time too: `touch -d` of the old time is no alibi."""
    f = _copy(SAXPY, tmp_path / "run")
    write_records.write(f)
    st = f.stat()
    loader.analyze_paths([f])  # the answer is cached
    _same_size_longer_kernels(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    got = loader.analyze_paths([f])
    assert "not the one the record was made from" in _notes(got)


def test_another_users_record_is_not_taken(tmp_path: Path, other_user: int) -> None:
    f = _copy(SAXPY, tmp_path / "run")
    rec = write_records.write(f)
    os.chown(rec, other_user, other_user)
    got = loader.analyze_paths([f])
    assert "owned by user ghrun-other" in _notes(got)


def _record_of_another(tmp_path: Path, f: Path) -> None:
    """Another export's record, renamed and edited to name this report and its size."""
    other = _copy(CLOVER, tmp_path / "elsewhere")
    data = json.loads(write_records.write(other).read_text())
    data["report"]["name"] = f.name
    data["report"]["size"] = f.stat().st_size
    records.record_path(f).write_text(json.dumps(data))


def test_a_record_of_another_export_is_not_taken(tmp_path: Path) -> None:
    f = _copy(SAXPY, tmp_path / "run")
    _record_of_another(tmp_path, f)
    got = loader.analyze_paths([f])
    fresh = loader.analyze_paths([f], use_records=False)
    assert _kernel_ns(got) == _kernel_ns(fresh)
    assert "not the one the record was made from" in _notes(got)


def test_a_report_of_random_bytes_is_not_analysed_from_an_exports_record(tmp_path: Path) -> None:
    """x.nsys-rep of random bytes beside the record of x.sqlite, whose export is gone."""
    run = tmp_path / "run"
    f = _copy(SAXPY, run, "x.sqlite")
    write_records.write(f)
    f.unlink()
    rep = run / "x.nsys-rep"
    rep.write_bytes(os.urandom(200_000))
    with pytest.raises(GhRunError) as got:
        loader.analyze_paths([run])
    assert "x.nsys-rep" in str(got.value) or "nsys" in str(got.value), got.value
    # control: a record made with that very .nsys-rep beside its export vouches for it
    f = _copy(SAXPY, run, "x.sqlite")
    write_records.write(f)
    f.unlink()
    assert loader.analyze_paths([run]).ranks


def test_a_record_without_its_report_must_be_trusted(tmp_path: Path, other_user: int) -> None:
    f = _copy(SAXPY, tmp_path / "run")
    rec = write_records.write(f)
    f.unlink()
    assert loader.analyze_paths([tmp_path / "run"]).ranks  # the user's own: it stands alone
    os.chown(rec, other_user, other_user)
    with pytest.raises(UserError, match="owned by user ghrun-other"):
        loader.analyze_paths([tmp_path / "run"])


def _mutations() -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    """Ways a record is damaged: keys gone, values of the wrong type or out of range, at the
    top, in an entry, in a rank's metrics, in the collectives and the capture."""

    def at(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
        def put(d: dict[str, Any]) -> None:
            node: Any = d
            for k in path[:-1]:
                node = node[k]
            if value is KeyError:
                del node[path[-1]]
            else:
                node[path[-1]] = value

        return put

    places: list[tuple[Any, ...]] = [
        ("source",),
        ("claims",),
        ("entries",),
        ("capture",),
        ("folder",),
        ("entries", 0, "ranks"),
        ("entries", 0, "ranks", 0, "busy_ns"),
        ("entries", 0, "cross"),
        ("entries", 0, "cross", 0, "collectives", "step"),
        ("entries", 0, "cross", 0, "collectives", "name"),
        ("entries", 0, "cross", 0, "steps"),
        ("capture", "window"),
        ("capture", "ranks"),
        ("claims", 0, "by_trace"),
    ]
    values = [KeyError, None, "x", [], {}, 2**70, [[1, 2, 3]], -1.5]
    return [
        (f"{'.'.join(map(str, p))}={v if v is not KeyError else 'deleted'}", at(p, v))
        for p in places
        for v in values
    ]


MUTATIONS = _mutations()


@pytest.mark.parametrize("name", [m[0] for m in MUTATIONS])
def test_a_damaged_record_is_never_a_traceback(
    tmp_path: Path, recorded: Recorded, name: str
) -> None:
    mutate = dict(MUTATIONS)[name]
    f, rec = recorded.copy_into(tmp_path / "run")
    data = json.loads(rec.read_text())
    mutate(data)
    rec.write_text(json.dumps(data))
    try:
        got = loader.analyze_paths([f])
    except UserError as exc:  # only when the record is read and a field is refused as input
        pytest.fail(f"{name}: {exc}")
    if "not used" in _notes(got):
        assert _kernel_ns(got) == recorded.kernel_ns
    # without its report: one sentence, or the record read (a change it tolerates)
    f.unlink()
    try:
        loader.analyze_paths([tmp_path / "run"])
    except UserError as exc:
        assert str(rec) in exc.message and "remove the record" in exc.message, exc.message


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{",
        b"[]",
        b'{"format": 1}',
        b"\xff\xfe",
        b"null",
        b'{"format":"gh-run.report-analysis/2"}',
    ],
)
def test_a_record_that_is_not_one_is_never_a_traceback(
    tmp_path: Path, recorded: Recorded, damage: bytes
) -> None:
    f, rec = recorded.copy_into(tmp_path / "run")
    rec.write_bytes(damage)
    got = loader.analyze_paths([f])
    assert "gh-run.json not used: " in _notes(got), _notes(got)
    f.unlink()
    with pytest.raises(UserError, match="remove the record"):
        loader.analyze_paths([tmp_path / "run"])


def test_a_linked_record_is_not_followed(tmp_path: Path) -> None:
    f = _copy(SAXPY, tmp_path / "run")
    rec = write_records.write(f)
    elsewhere = tmp_path / "elsewhere.json"
    os.replace(rec, elsewhere)
    rec.symlink_to(elsewhere)
    got = loader.analyze_paths([f])
    assert "not used" in _notes(got) and "not readable" in _notes(got)


@pytest.mark.parametrize(
    "rel",
    [
        "artifacts/../../evil.sqlite",
        "/etc/passwd.sqlite",
        "artifacts//x.sqlite",
        "artifacts/./x.sqlite",
        "artifacts/..",
        "artifacts\\..\\x.sqlite",
    ],
)
def test_a_manifest_path_that_leaves_its_folder_is_refused(tmp_path: Path, rel: str) -> None:
    """`analyze --on-cluster` names the reports from the manifest: a path leaving the run
    folder is refused (it read and wrote outside it); a left report's entry too."""
    from orchestrator.artifacts import collect as artifacts
    from orchestrator.artifacts.left_reports import LeftReport
    from orchestrator.runs import on_cluster
    from orchestrator.store.db import Run, Store

    store = Store(tmp_path / "home")
    run = Run(
        run_id="r-1",
        name="r",
        job_name="ghr-r-1",
        spec_path=None,
        spec_json="{}",
        cluster="dev",
        partition="gh",
        executor="slurm",
        run_dir="/cluster/runs/r-1",
        state="COMPLETED",
    )
    store.add_run(run)
    folder = artifacts.store_dir(tmp_path / "home", "r-1")
    folder.mkdir(parents=True)
    entry = {"relpath": rel, "size": 1, "sha256": "0" * 64, "source": "x"}
    (folder / "manifest.json").write_text(json.dumps({"files": [], "left": [entry]}))
    with pytest.raises(UserError, match="does not stay inside its folder"):
        on_cluster.reports_of(tmp_path / "home", store.get_run("r-1"))
    with pytest.raises(ValueError, match="does not stay inside"):
        LeftReport.model_validate(entry)
    assert artifacts._prior_left(folder) == []


def _reduce_answer() -> bytes:
    m = loader.analyze_paths([SAXPY], use_records=False)
    return m.model_dump_json().encode()


@pytest.mark.parametrize(
    "damage",
    [
        lambda good: good[: len(good) // 2],  # the reduce job killed while writing it
        lambda good: b"",
        lambda good: b"[]",
        lambda good: b"null",
        lambda good: b'{"format": "gh-run.runs/1"}',
        lambda good: b'{"ranks": 7}',
        lambda good: b"\xff\xfe" + good,
        lambda good: b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["cut", "empty", "list", "null", "runs-empty", "ranks-7", "not-utf8", "deep"],
)
def test_a_damaged_reduce_answer_is_one_sentence(damage: Callable[[bytes], bytes]) -> None:
    """`analyze --on-cluster` reads its reduce job's answer back as evidence: a file cut short
    or not gh-run's is a RuntimeFailure naming the file and the fix, never a traceback."""
    from orchestrator.core.errors import RuntimeFailure
    from orchestrator.runs.on_cluster import _reduced

    good = _reduce_answer()
    assert _reduced(good, "out/r1.json", "r1").label == "r1"  # control: the answer is read
    with pytest.raises(RuntimeFailure) as exc:
        _reduced(damage(good), "out/r1.json", "r1")
    msg = exc.value.message
    assert msg.startswith("out/r1.json: not an analysis") and "--on-cluster r1" in msg
    assert "\n" not in msg
