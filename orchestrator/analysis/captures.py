"""Which inputs are one run: ranks of one job are read together, separate captures (a folder of
unrelated runs, two variants, a retried job) are separate runs.

Each input's capture (`Capture`) says what the input itself records about where it came from:
- its **window**: the first and last event in Unix time (nsys: `TARGET_INFO_SESSION_START_TIME.
  utcEpochNs` plus the export's times, which count from the session's start; Kineto:
  `baseTimeNanoseconds` plus the trace's times, or times that are Unix microseconds already);
- its **host** (nsys `TARGET_INFO_SYSTEM_ENV.Hostname`) and **command** (nsys
  `META_DATA_CAPTURE`: `PROCESS_0:COMMAND` and its `ARGUMENT_<n>`; launcher-given rank
  arguments such as `--local_rank=1` left out);
- its **job** (the launcher's variables in the environment nsys recorded: SLURM job and step,
  torchrun's `TORCHELASTIC_RUN_ID`, the rendezvous `MASTER_ADDR:MASTER_PORT`, gh-run's
  `GH_RUN_ID`), and the gh-run run folder around it (`spec.lock.yaml`);
- its **ranks** and **world size** (Kineto `distributedInfo.rank` / `world_size`; nsys the rank
  variable and its size variable, e.g. `RANK` / `WORLD_SIZE`, `SLURM_PROCID` / `SLURM_NTASKS`),
  or a rank in its file name.

Two inputs are **separate captures** (`separated`) when any of these says so, the first that
does is the reason given: they claim the same rank of the trace; one says its job has one rank
(world size 1); their world sizes differ; a job variable differs; they lie in different gh-run
run folders; their windows are more than `APART_NS` apart (the ranks of one job run at the same
time: their collectives hold them together, so their windows overlap; a new process needs far
longer than that to start and reach its profiled steps); their commands differ; or, with no rank
in either, they ran on different hosts.

Two inputs are **ranks of one job** (`tied`) when something ties them: distinct ranks (from the
traces or their names) of one world size; the same SLURM job step, torchrun run id or gh-run run
id; the same gh-run run folder; or, with no rank in either, windows that overlap on one host.
The same rendezvous address ties nothing: two runs one after the other may use the same port.

`split` keeps the inputs in their order and puts each into the first run whose inputs it is
tied to and separated from none; an input tied to no run starts its own. Inputs that nothing
ties are therefore separate runs, and the reason says so. One input is always one run: the
processes of one nsys export are ranks of the capture it holds.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.analysis.run_labels import short_labels
from orchestrator.analysis.timeline import model as T
from orchestrator.core.human import elapsed

APART_NS = 2 * 10**9
# Unix microseconds from 2001 on: a Kineto trace whose times are absolute (older PyTorch)
UNIX_US = 10**15

# (rank variable, its world-size variable), as the launchers set them
WORLD_VARS = {
    "RANK": "WORLD_SIZE",
    "SLURM_PROCID": "SLURM_NTASKS",
    "PMI_RANK": "PMI_SIZE",
    "PMIX_RANK": "PMIX_SIZE",
    "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE",
    "MV2_COMM_WORLD_RANK": "MV2_COMM_WORLD_SIZE",
}
# the variables that name one job: equal values tie inputs (`TIES`), different ones separate
JOB_KEYS: tuple[tuple[str, ...], ...] = (
    ("SLURM_JOB_ID", "SLURM_STEP_ID"),
    ("SLURM_JOB_ID",),
    ("TORCHELASTIC_RUN_ID",),
    ("GH_RUN_ID",),
    ("MASTER_ADDR", "MASTER_PORT"),
)
TIES = {("SLURM_JOB_ID", "SLURM_STEP_ID"), ("TORCHELASTIC_RUN_ID",), ("GH_RUN_ID",)}
_ENV_NAMES = {v for key in JOB_KEYS for v in key} | set(WORLD_VARS.values())
# arguments a launcher adds per rank (torch.distributed.launch), not part of what ran
_RANK_ARG = re.compile(r"--local[-_]rank(=\d+)?$")


@dataclass
class Capture:
    """What one input records about the capture it came from (see the module docstring)."""

    path: Path
    kind: str
    window: tuple[int, int] | None = None
    host: str | None = None
    command: tuple[str, ...] | None = None
    job: dict[str, str] = field(default_factory=dict)
    world: tuple[int, str] | None = None  # (size, where it was read)
    ranks: list[int] = field(default_factory=list)  # ranks the trace claims
    rank_rule: str | None = None
    name_rank: int | None = None
    spec: str | None = None  # the gh-run run folder's spec.lock.yaml, resolved: which folder
    spec_named: str | None = None  # the same file as the input's path names it: what is shown

    @property
    def ranked(self) -> bool:
        return bool(self.ranks) or self.name_rank is not None

    def claimed(self) -> set[int]:
        """The ranks the trace claims, else the one its file name gives (none: empty)."""
        if self.ranks:
            return set(self.ranks)
        return {self.name_rank} if self.name_rank is not None else set()


def _extent(tls: list[T.RankTimeline]) -> tuple[int, int] | None:
    """The first and last event time of the timelines (their own clock)."""
    lo: int | None = None
    hi: int | None = None
    for tl in tls:
        for start, end in ((tl.gpu.start, tl.gpu.end), (tl.host.start, tl.host.end)):
            if start.size:
                a, b = int(start.min()), int(end.max())
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
    return (lo, hi) if lo is not None and hi is not None else None


def _env(value: str) -> dict[str, str]:
    """The job variables of nsys's `DeviceEnvironment` (NUL- or `;`-separated NAME=value)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|[;\x00])([A-Z_][A-Z0-9_]*)=([^;\x00]*)", value):
        if m.group(1) in _ENV_NAMES or m.group(1) in WORLD_VARS:
            out.setdefault(m.group(1), m.group(2))
    return out


def _nsys_facts(
    path: Path,
) -> tuple[int | None, str | None, tuple[str, ...] | None, dict[str, str]]:
    """(session start in Unix ns, host, command, environment variables) of an export; what a
    table does not hold stays None (older nsys versions lack META_DATA_CAPTURE)."""
    from orchestrator.analysis.readers.export_tables import read_schema
    from orchestrator.analysis.readers.nsys_db import DAMAGED, connect_ro

    start: int | None = None
    host: str | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = {}
    conn = connect_ro(path)
    try:
        tables = read_schema(
            conn, ("TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV", "META_DATA_CAPTURE")
        )

        def rows(sql: str) -> list[Any]:
            try:
                return conn.execute(sql).fetchall()
            except sqlite3.OperationalError:  # a column this nsys version names otherwise
                return []

        if "TARGET_INFO_SESSION_START_TIME" in tables:
            for (v,) in rows(
                f'SELECT utcEpochNs FROM "{tables.name("TARGET_INFO_SESSION_START_TIME")}" LIMIT 1'
            ):
                start = int(v) if isinstance(v, int) else None
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            for name, v in rows(
                f'SELECT name, value FROM "{tables.name("TARGET_INFO_SYSTEM_ENV")}"'
                " WHERE name IN ('Hostname', 'DeviceEnvironment')"
            ):
                if name == "Hostname" and isinstance(v, str) and v:
                    host = v
                elif name == "DeviceEnvironment" and isinstance(v, str):
                    env.update(_env(v))
        if "META_DATA_CAPTURE" in tables:
            parts: dict[int, str] = {}
            for name, v in rows(
                f'SELECT name, value FROM "{tables.name("META_DATA_CAPTURE")}"'
                " WHERE name = 'PROCESS_0:COMMAND'"
                " OR name LIKE 'PROCESS_0:ARGUMENT_%'"
            ):
                if name == "PROCESS_0:COMMAND":
                    parts[-1] = str(v)
                elif str(name).rsplit("_", 1)[-1].isdigit():
                    parts[int(str(name).rsplit("_", 1)[-1])] = str(v)
            if -1 in parts:
                args = [parts[k] for k in sorted(parts)]
                command = tuple(a for a in args if not _RANK_ARG.match(a))
    except DAMAGED:
        pass  # the reader already read what it could; these facts stay unknown
    finally:
        conn.close()
    return start, host, command, env


def _world(env: dict[str, str], rank_var: str | None) -> tuple[int, str] | None:
    """The world size that goes with the rank variable that answered (`WORLD_SIZE` with
    `RANK`, `SLURM_NTASKS` with `SLURM_PROCID`, ...), else the first one set."""
    order = [WORLD_VARS[rank_var]] if rank_var in WORLD_VARS else []
    order += [v for v in WORLD_VARS.values() if v not in order]
    for var in order:
        v = env.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v), f"{var}={v} in the profiled environment"
    return None


def of_nsys(
    path: Path, tls: list[T.RankTimeline], ranks: list[int], rank_rule: str | None
) -> Capture:
    """The capture of an nsys export (its timelines, and the ranks its processes claim)."""
    start, host, command, env = _nsys_facts(path)
    extent = _extent(tls)
    window = (start + extent[0], start + extent[1]) if start is not None and extent else None
    rank_var = rank_rule.split()[0] if rank_rule else None
    return Capture(
        path=path,
        kind="nsys",
        window=window,
        host=host,
        command=command,
        job={k: v for k, v in env.items() if k not in WORLD_VARS},
        world=_world(env, rank_var) if ranks else None,
        ranks=ranks,
        rank_rule=rank_rule,
    )


def of_kineto(path: Path, tl: T.RankTimeline, rank: int | None) -> Capture:
    """The capture of a PyTorch-profiler trace."""
    extent = _extent([tl])
    base = tl.meta.get("baseTimeNanoseconds")
    window = None
    if extent is not None:
        if isinstance(base, int) and not isinstance(base, bool) and base > 0:
            window = (base + extent[0], base + extent[1])
        elif extent[0] >= UNIX_US * 1000:  # times that are Unix microseconds already
            window = extent
    info = tl.meta.get("distributedInfo")
    world = None
    if isinstance(info, dict):
        w = info.get("world_size")
        if isinstance(w, int) and not isinstance(w, bool) and w > 0:
            world = (w, f"distributedInfo.world_size {w}")
    return Capture(
        path=path,
        kind="kineto",
        window=window,
        world=world,
        ranks=[rank] if rank is not None else [],
        rank_rule="distributedInfo.rank" if rank is not None else None,
    )


def _gap_ns(a: Capture, b: Capture) -> int | None:
    """How far apart two windows are (0 when they overlap), None when one is unknown."""
    if a.window is None or b.window is None:
        return None
    return max(0, max(a.window[0], b.window[0]) - min(a.window[1], b.window[1]))


def _first_difference(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            before = " ".join(a[max(0, i - 1) : i])
            return f"{before} {x} vs {before} {y}".strip() if before else f"{x} vs {y}"
    longer, which = (a, "first") if len(a) > len(b) else (b, "second")
    return f"the {which} adds {' '.join(longer[min(len(a), len(b)) :][:3])}"


def separated(a: Capture, b: Capture) -> list[tuple[str, str]]:
    """Every (kind, evidence) that says two inputs are separate captures; empty when none does
    (see the module docstring for the order)."""
    out: list[tuple[str, str]] = []
    for c in (a, b):
        # world size 1: the job is this input alone (its processes, if several, are the ranks
        # of a launcher inside it, e.g. nsys around torchrun on one node)
        if c.world is not None and c.world[0] == 1:
            out.append(("world", f"each is a whole job by itself ({c.world[1]})"))
            break
    if same := a.claimed() & b.claimed():
        how = a.rank_rule if a.ranks and b.ranks else "the trace or the file name"
        out.append(("rank", f"both are rank {min(same)} ({how}), which a job has once"))
    if a.world and b.world and a.world[0] != b.world[0]:
        out.append(("world size", f"their world sizes differ ({a.world[1]}, {b.world[1]})"))
    for key in JOB_KEYS:
        va = [a.job.get(k) for k in key]
        vb = [b.job.get(k) for k in key]
        if None not in va and None not in vb and va != vb:
            name = ":".join(key)
            shown = f"{':'.join(map(str, va))}, {':'.join(map(str, vb))}"
            out.append(("job", f"their {name} differ ({shown})"))
            break
    if a.spec and b.spec and a.spec != b.spec:
        shown = f"{a.spec_named or a.spec}, {b.spec_named or b.spec}"
        out.append(("spec", f"they lie in different gh-run run folders ({shown})"))
    gap = _gap_ns(a, b)
    if gap is not None and gap > APART_NS:
        out.append(
            ("time", f"their captures are {elapsed(gap)} apart (the ranks of a job run together)")
        )
    if a.command is not None and b.command is not None and a.command != b.command:
        diff = _first_difference(a.command, b.command)
        out.append(("command", f"their commands differ ({diff})"))
    if not a.ranked and not b.ranked and a.host and b.host and a.host != b.host:
        out.append(("host", f"without a rank, they ran on different hosts ({a.host}, {b.host})"))
    return out


def tied(a: Capture, b: Capture) -> str | None:
    """The evidence that two inputs (not `separated`) are ranks of one job, None without."""
    if a.ranked and b.ranked and not a.claimed() & b.claimed():
        how = a.rank_rule or "file name"
        world = f" of world size {a.world[0]}" if a.world else ""
        return f"distinct ranks{world} ({how})"
    for key in JOB_KEYS:
        known = all(a.job.get(k) is not None for k in key)
        if key in TIES and known and [a.job.get(k) for k in key] == [b.job.get(k) for k in key]:
            return f"the same {':'.join(key)} ({':'.join(a.job[k] for k in key)})"
    if a.spec and a.spec == b.spec:
        return f"the same gh-run run folder ({a.spec_named or a.spec})"
    gap = _gap_ns(a, b)
    if gap is not None and gap <= APART_NS and (not a.host or not b.host or a.host == b.host):
        return "captured at the same time on one host"
    return None


@dataclass
class Group:
    """The inputs of one run (indexes into the inputs), and why they are read together."""

    members: list[int]
    ties: list[str] = field(default_factory=list)


def split(caps: list[Capture]) -> tuple[list[Group], list[str]]:
    """The runs among the inputs (see the module docstring), and the evidence that separated
    them: one line per kind of evidence, with the first pair of inputs it holds for."""
    groups: list[Group] = []
    for i, c in enumerate(caps):
        for g in groups:
            if any(separated(caps[j], c) for j in g.members):
                continue
            tie = next((t for j in g.members if (t := tied(caps[j], c))), None)
            if tie is not None:
                g.members.append(i)
                if tie not in g.ties:
                    g.ties.append(tie)
                break
        else:
            groups.append(Group([i]))
    why: dict[str, str] = {}
    for gi, g in enumerate(groups):
        for h in groups[gi + 1 :]:
            for i in g.members:
                for j in h.members:
                    found = separated(caps[i], caps[j])
                    if not found and tied(caps[i], caps[j]) is None:
                        found = [("untied", _untied(caps[i], caps[j]))]
                    pair = " and ".join(short_labels([str(caps[i].path), str(caps[j].path)]))
                    for kind, text in found:
                        why.setdefault(kind, f"{text}: e.g. {pair}")
    return groups, list(why.values())


def _untied(a: Capture, b: Capture) -> str:
    missing = []
    if not a.ranked or not b.ranked:
        missing.append("no rank in the traces or their names")
    if a.window is None or b.window is None:
        missing.append("no capture time that both record")
    return "nothing ties them (" + (", ".join(missing) or "no common job or capture time") + ")"


def find_spec(capture: Capture, folder: Path) -> None:
    """Sets the capture's run folder (`spec_lock_file` of the input's folder): resolved, to tell
    run folders apart however the inputs were named, and as the input's path names it, so that
    a message shows the path the user gave rather than where a link led."""
    spec = spec_lock_file(folder)
    capture.spec = str(spec.resolve()) if spec is not None else None
    capture.spec_named = str(spec) if spec is not None else None


def spec_lock_file(folder: Path) -> Path | None:
    """The spec.lock.yaml of the run the trace belongs to, from two places only: the trace's own
    folder, and the run folder gh-run made around it (the parent of the nearest `artifacts`
    folder above the trace, holding `spec.lock.yaml`, or `run/spec.lock.yaml` where
    `gh-run fetch` stored it). Never a folder further up: a spec there belongs to something
    else."""
    candidates = [folder / "spec.lock.yaml"]
    for d in [folder, *folder.parents]:
        if d.name == "artifacts":
            candidates += [d.parent / "spec.lock.yaml", d.parent / "run" / "spec.lock.yaml"]
            break
    for f in candidates:
        if f.is_file():
            return f
    return None
