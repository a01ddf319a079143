"""The side readers that go straight to the export (OS-runtime calls and their stacks,
thread scheduling, CPU samples, pageable copies) read a table by whatever name the export
gives it, as the main reader does (issue 37: versioned names, `export_tables`): the same real
export with those tables renamed to a versioned name gives the same idle causes, evidence
and all. Before, `osrt_stacks` and `sched_events` asked for `OSRT_API`, `OSRT_CALLCHAINS` and
`SCHED_EVENTS` by their literal names and found nothing, silently."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from orchestrator.analysis.loader import analyze_paths
from orchestrator.analysis.readers import osrt_stacks, sched_events
from tests.fixtures.recordings import unpacked

DATA = Path(__file__).resolve().parents[1] / "data" / "causes_h200"
RENAMES = {
    "OSRT_API": "OSRT_API_V2",
    "OSRT_CALLCHAINS": "OSRT_CALLCHAINS_V3",
    "SCHED_EVENTS": "SCHED_EVENTS_V2",
    "COMPOSITE_EVENTS": "COMPOSITE_EVENTS_V2",
    "SAMPLING_CALLCHAINS": "SAMPLING_CALLCHAINS_V2",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "CUPTI_ACTIVITY_KIND_MEMCPY_V2",
}


def _renamed(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for old, new in RENAMES.items():
        if old in have:
            con.execute(f'ALTER TABLE "{old}" RENAME TO "{new}"')
    con.commit()
    con.close()
    return dst


@pytest.mark.parametrize("name", ["dl_host", "img_pageable"])
def test_renamed_side_tables_give_the_same_causes(name: str, tmp_path: Path) -> None:
    src = next(Path(unpacked(DATA / name)).glob("*.sqlite"))
    (tmp_path / "v").mkdir()
    for extra in src.parent.iterdir():
        if extra.suffix != ".sqlite":
            shutil.copy(extra, tmp_path / "v" / extra.name)
    dst = _renamed(src, tmp_path / "v" / src.name)
    a = analyze_paths([src.parent]).ranks[0]
    b = analyze_paths([dst.parent]).ranks[0]
    assert a.idle_causes is not None and b.idle_causes is not None
    assert b.idle_causes.model_dump() == a.idle_causes.model_dump()
    assert b.projections == a.projections


def test_the_osrt_and_scheduling_readers_find_the_renamed_tables(tmp_path: Path) -> None:
    src = next(Path(unpacked(DATA / "dl_host")).glob("*.sqlite"))
    dst = _renamed(src, tmp_path / "v.sqlite")
    con = sqlite3.connect(src)
    (gtid,) = con.execute(
        "SELECT globalTid FROM OSRT_API GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()
    lo, hi = con.execute('SELECT min(start), max("end") FROM OSRT_API').fetchone()
    con.close()
    thread = ((gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF)
    win = (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
    got = {p: osrt_stacks.read(str(p), *win, {thread}) for p in (src, dst)}
    assert got[src] is not None and got[src].start.size > 0
    assert got[dst] is not None
    assert got[dst].start.tolist() == got[src].start.tolist()
    assert got[dst].frame == got[src].frame
    on = {p: sched_events.on_cpu(str(p), thread, lo, hi) for p in (src, dst)}
    assert on[src] is not None and on[dst] is not None
    assert [x.tolist() for x in on[dst]] == [x.tolist() for x in on[src]]
