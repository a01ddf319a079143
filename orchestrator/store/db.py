"""The state store: one SQLite file (WAL) in the gh-run home holding runs, their state
changes (events), collected artifacts and metrics.

Contract: a run row is written *before* sbatch is called (state INTENT, with the unique SLURM
job name), then updated with the job id. A crash in between leaves an INTENT row whose job can
be found by its name and repaired (see executors.slurm.repair_intents).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.core.errors import GhRunError, RuntimeFailure, UserError
from orchestrator.store import row_seal

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id        TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    job_name      TEXT NOT NULL UNIQUE,
    spec_path     TEXT,
    spec_json     TEXT NOT NULL,
    cluster       TEXT NOT NULL,
    partition     TEXT NOT NULL,
    executor      TEXT NOT NULL,
    run_dir       TEXT NOT NULL,
    job_id        TEXT,
    state         TEXT NOT NULL,
    exit_code     INTEGER,
    reason        TEXT,
    attempt       INTEGER NOT NULL DEFAULT 0,
    campaign_id   TEXT,
    variant       TEXT,
    created_at    REAL NOT NULL,
    submitted_at  REAL,
    ended_at      REAL,
    collected_at  REAL,
    transport     TEXT,
    slurm_cluster   TEXT,
    clusters_option TEXT,
    script_sha256   TEXT,
    seal            TEXT
);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE INDEX IF NOT EXISTS runs_campaign ON runs(campaign_id);
CREATE TABLE IF NOT EXISTS events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL REFERENCES runs(run_id),
    ts      REAL NOT NULL,
    state   TEXT NOT NULL,
    detail  TEXT
);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id        TEXT NOT NULL REFERENCES runs(run_id),
    relpath       TEXT NOT NULL,
    size          INTEGER NOT NULL,
    sha256        TEXT NOT NULL,
    source        TEXT NOT NULL,
    collected_at  REAL NOT NULL,
    PRIMARY KEY (run_id, relpath)
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id  TEXT NOT NULL REFERENCES runs(run_id),
    key     TEXT NOT NULL,
    value   REAL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id    TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    file           TEXT,
    campaign_json  TEXT NOT NULL,
    executor       TEXT NOT NULL,
    state          TEXT NOT NULL,
    baseline_id    TEXT,
    regressions    INTEGER,
    report_dir     TEXT,
    created_at     REAL NOT NULL,
    ended_at       REAL
);
CREATE INDEX IF NOT EXISTS campaigns_name ON campaigns(name, created_at);
CREATE TABLE IF NOT EXISTS campaign_groups (
    campaign_id   TEXT NOT NULL REFERENCES campaigns(campaign_id),
    group_index   INTEGER NOT NULL,
    job_name      TEXT NOT NULL UNIQUE,
    script        TEXT NOT NULL,
    size          INTEGER NOT NULL,
    is_array      INTEGER NOT NULL,
    state         TEXT NOT NULL,
    job_id        TEXT,
    submitted_at  REAL,
    seal          TEXT,
    PRIMARY KEY (campaign_id, group_index)
);
CREATE TABLE IF NOT EXISTS campaign_variants (
    campaign_id    TEXT NOT NULL REFERENCES campaigns(campaign_id),
    variant        TEXT NOT NULL,
    overrides_json TEXT NOT NULL,
    group_index    INTEGER NOT NULL,
    array_index    INTEGER NOT NULL,
    run_id         TEXT NOT NULL REFERENCES runs(run_id),
    -- the verdict of its night (1 regressed, 0 not, NULL before the night was judged): a
    -- noise band learns only from a variant's own good nights (schema 3)
    regressed      INTEGER,
    PRIMARY KEY (campaign_id, variant)
);
CREATE TABLE IF NOT EXISTS projection_scores (
    -- a finding's projection checked by running its knob (`gh-run try`, store/scores.py,
    -- schema 6): the run it was made on, the run with the knob, what was predicted and came
    try_run_id    TEXT PRIMARY KEY REFERENCES runs(run_id),
    base_run_id   TEXT NOT NULL REFERENCES runs(run_id),
    rule          TEXT NOT NULL,
    knob          TEXT NOT NULL,
    base_ms       REAL,
    predicted_ms  REAL,
    low_ms        REAL,
    high_ms       REAL,
    measured_ms   REAL,
    error_pct     REAL,
    created_at    REAL NOT NULL,
    scored_at     REAL,
    note          TEXT,
    -- schema 7: a try of several rounds (`gh-run try --rounds N`): how many were measured and
    -- the spread of the step they give (each round's ratio applied to base_ms)
    rounds        INTEGER NOT NULL DEFAULT 1,
    measured_low_ms  REAL,
    measured_high_ms REAL
);

CREATE TABLE IF NOT EXISTS projection_rounds (
    -- one round of a try of several (schema 7): the run again without the knob, then with it,
    -- one after the other, each one's step in one frame (store/scores.py)
    try_run_id      TEXT NOT NULL REFERENCES projection_scores(try_run_id),
    round           INTEGER NOT NULL,
    control_run_id  TEXT REFERENCES runs(run_id),
    round_run_id    TEXT REFERENCES runs(run_id),
    control_ms      REAL,
    try_ms          REAL,
    PRIMARY KEY (try_run_id, round)
);
"""


class NoSuchRun(UserError):
    """A run reference that matches no run (a command that also takes paths says so too)."""


# States a run can be in. SLURM's own terminal states are kept as SLURM names them.
INTENT = "INTENT"  # row written, sbatch not yet answered
SUBMIT_FAILED = "SUBMIT_FAILED"  # sbatch refused or unreachable: nothing runs
TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    SUBMIT_FAILED,
    "LOST",
}
ACTIVE = {
    INTENT,
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "COMPLETING",
    "CONFIGURING",
    "SUSPENDED",
    "RESIZING",
    "UNKNOWN",
    "SUBMITTED",
    "RETRYING",  # a retry was claimed, sbatch not yet answered (like INTENT, for attempt > 0)
}
RETRYING = "RETRYING"


def _is_readonly(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "readonly" in text or "read-only" in text or "unable to open database file" in text


def is_terminal(state: str) -> bool:
    return state.split()[0] in TERMINAL


def exit_code_worth_showing(state: str, code: int | None) -> int | None:
    """The exit code to show for a run in `state`: a 0 says nothing of a job that did not
    complete (SLURM records 0:15 for a job scancel stopped), so only COMPLETED shows a 0."""
    if code is None or (code == 0 and state != "COMPLETED"):
        return None
    return code


# The rows of the store are plain dataclasses, not Pydantic models: they are read back from
# gh-run's own database (never from user input), and `gh-run status`/`logs` must answer without
# paying Pydantic's import (several times a bare Python's start-up; see bench/bench_cli.py).
# Like the contracts, they refuse unknown fields (a TypeError from the constructor).
@dataclass(kw_only=True)
class Run:
    run_id: str
    name: str
    job_name: str
    spec_path: str | None
    spec_json: str
    cluster: str
    partition: str
    executor: str
    run_dir: str
    job_id: str | None = None
    state: str = INTENT
    exit_code: int | None = None
    reason: str | None = None
    attempt: int = 0
    campaign_id: str | None = None
    variant: str | None = None
    created_at: float = field(default_factory=time.time)
    submitted_at: float | None = None
    ended_at: float | None = None
    collected_at: float | None = None
    # How the cluster is reached (transport/registry.py): None is this machine, else the
    # resolved SSH login as JSON; run_dir is then a path on the cluster side.
    transport: str | None = None
    # The SLURM cluster the run was submitted to, as its controller named itself then
    # (cluster_identity.py): cancelling checks that the controller reached now is that one.
    slurm_cluster: str | None = None
    # --clusters for every SLURM command about this run (its cluster file's multi_cluster).
    clusters_option: str | None = None
    # The sha256 of the job script written for the run: a retry submits it only while it is
    # still that script.
    script_sha256: str | None = None
    # HMAC of the fields that say what runs where, under this user's key, for this home
    # (row_seal.py): what tells a run of the user's own from a row read from elsewhere.
    seal: str | None = None
    # Not a column: why gh-run must not act on this row (row_seal.run_problem), None when its
    # seal verifies. The store sets it as it reads the row; a Run made otherwise is not bound.
    unbound: str | None = field(default=row_seal.NOT_READ, compare=False, repr=False)

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)


@dataclass(kw_only=True)
class Event:
    run_id: str
    ts: float
    state: str
    detail: str | None


@dataclass(kw_only=True)
class ArtifactRecord:
    run_id: str
    relpath: str
    size: int
    sha256: str
    source: str
    collected_at: float


# Fields of a Run that are not columns of the store.
NOT_COLUMNS = frozenset({"unbound"})
RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(Run)) - NOT_COLUMNS


def as_dict(row: Any) -> dict[str, Any]:
    """A store record as a plain dict of its columns (JSON-ready: str, int, float or None)."""
    out = dataclasses.asdict(row)
    for name in NOT_COLUMNS:
        out.pop(name, None)
    return out


# SQLite stores a NaN as NULL, which reads back as "no value": a metric that came out NaN
# would then never be compared, and so never be a regression. It is kept as the text 'NaN'.
NAN_TEXT = "NaN"


def _metric_in(value: float | None) -> float | str | None:
    return NAN_TEXT if value is not None and math.isnan(value) else value


def _metric_out(value: object) -> float | None:
    if value == NAN_TEXT:
        return math.nan
    return None if value is None else float(value)  # type: ignore[arg-type]


def iso(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


# The store's schema version (PRAGMA user_version). 0 is a store written before versions
# were kept (its tables are those of version 1). A store newer than this gh-run is refused;
# an older one is migrated forward when opened for writing.
# 2: runs.transport (how the run's cluster is reached).
# 4: runs.slurm_cluster and runs.clusters_option (which SLURM cluster the run went to).
# 5: runs.script_sha256, runs.seal and campaign_groups.seal (row_seal.py): rows of older
#    stores carry no seal and are acted on only once adopted (`gh-run adopt`).
# 6: projection_scores (a finding's projection against the run of its knob).
# 7: projection_scores.rounds, measured_low_ms, measured_high_ms and projection_rounds (a try
#    measured in rounds, each against the run again without the knob).
SCHEMA_VERSION = 7


def _reference_columns() -> dict[str, dict[str, tuple[str, str | None]]]:
    """table → column → (declared type, default) of the current SCHEMA."""
    ref = sqlite3.connect(":memory:")
    try:
        ref.executescript(SCHEMA)
        tables = [r[0] for r in ref.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t: {c[1]: (c[2], c[4]) for c in ref.execute(f"PRAGMA table_info({t})")}
            for t in tables
            if not t.startswith("sqlite_")
        }
    finally:
        ref.close()


T = TypeVar("T")

_KNOWN: dict[type, frozenset[str]] = {}


def _known_fields(model: type) -> frozenset[str]:
    """The field names of a record type: a dataclass (the store's rows) or a Pydantic model
    (the campaign records), told apart without importing Pydantic."""
    known = _KNOWN.get(model)
    if known is None:
        names = getattr(model, "model_fields", None)
        if names is None:
            names = [f.name for f in dataclasses.fields(model) if f.name not in NOT_COLUMNS]
        known = _KNOWN[model] = frozenset(names)
    return known


def record(model: type[T], row: sqlite3.Row | Mapping[str, Any]) -> T:
    """A row as a record, read by column name: columns this gh-run does not know are left out
    (a column added by another version must not make every command fail)."""
    known = _known_fields(model)
    return model(**{k: row[k] for k in row.keys() if k in known})  # noqa: SIM118


# SQLite's LIMIT is a signed 64-bit integer: a larger one is text to it ("datatype mismatch",
# which read as a broken store), so any count past it means every row
SQL_MAX_LIMIT = (1 << 63) - 1


def sql_limit(n: int) -> int:
    """A row count for SQL's LIMIT: `n` up to SQLite's largest (every row)."""
    return max(0, min(int(n), SQL_MAX_LIMIT))


class Store:
    """Thread- and process-safe enough for many gh-run processes on one file (WAL + busy wait).

    Every SQLite failure a user can meet (a corrupt file, a read-only or full home, a store of
    a newer gh-run) becomes one sentence naming the file and the fix. A home that cannot be
    written is opened read-only (`readonly`): reading commands work, writing ones say why not.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "state.db"
        self.readonly = False
        self._home_key: str | None = None
        try:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
        except FileExistsError:
            raise UserError(
                f"the gh-run home {home} is a file, not a folder; point --home (or GH_RUN_HOME) "
                "at a folder"
            ) from None
        except OSError as exc:
            if not (exc.errno in (errno.EROFS, errno.EACCES) and self.path.is_file()):
                raise RuntimeFailure(
                    f"cannot create the gh-run home {home}: {exc.strerror}; point --home (or "
                    "GH_RUN_HOME) at a folder you can write"
                ) from None
        fresh = not self.path.exists()
        writable = os.access(home, os.W_OK) and (fresh or os.access(self.path, os.W_OK))
        with self._guard():
            if not writable:
                self._open_readonly()
                return
            try:
                self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
                self._db.row_factory = sqlite3.Row
                # No SQL function runs from the file's own schema (a trigger or view in a store
                # written elsewhere): only gh-run's statements act here.
                self._db.execute("PRAGMA trusted_schema = OFF")
                version = self._version()
                if fresh:
                    os.chmod(self.path, 0o600)
                self._use_wal()
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                if version < SCHEMA_VERSION or fresh:
                    self._migrate()
            except sqlite3.OperationalError as exc:
                if fresh or not _is_readonly(exc):
                    raise
                self._open_readonly()

    def require_writable(self) -> None:
        """Refuse, before anything is written anywhere, a command that must record in a home
        that cannot be written."""
        if self.readonly:
            raise UserError(
                f"{self.path}: the gh-run home cannot be written (read-only); run where the "
                "home is writable, or give another home with --home"
            )

    def _version(self) -> int:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            self._db.close()
            raise UserError(
                f"{self.path}: this state store was written by a newer gh-run (schema {version}; "
                f"this gh-run reads schema {SCHEMA_VERSION} and older); use that newer gh-run, "
                "or give this one another home with --home"
            )
        return version

    def _open_readonly(self) -> None:
        """A home this process cannot write (a read-only file system, or someone else's): read
        a private snapshot of the store. SQLite cannot read a WAL file in place without writing
        beside it (its shared-memory index), so the file and its WAL are copied to a temporary
        folder and read there; nothing in the home is touched."""
        import shutil  # only here: status's start-up imports this module
        import tempfile

        with contextlib.suppress(Exception):
            self._db.close()
        self._snapshot = tempfile.TemporaryDirectory(prefix="gh-run-readonly-")
        copy = Path(self._snapshot.name) / "state.db"
        for suffix in ("", "-wal"):
            src = self.path.with_name(self.path.name + suffix)
            if src.is_file():
                shutil.copyfile(src, copy.with_name(copy.name + suffix))
        self._db = sqlite3.connect(copy, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA trusted_schema = OFF")
        if self._version() < SCHEMA_VERSION:
            self._migrate()  # the snapshot only: an old or absent store reads like a current one
        self._db.execute("PRAGMA query_only = ON")
        self.readonly = True

    def _migrate(self) -> None:
        """Bring the file to SCHEMA_VERSION in one transaction: create what is missing (tables,
        indexes, columns added since the file was written), then record the version."""
        with self.tx() as db:
            if int(db.execute("PRAGMA user_version").fetchone()[0]) >= SCHEMA_VERSION:
                return  # another process migrated it while this one waited for the lock
            statements = [x.strip() for x in SCHEMA.split(";") if x.strip()]
            for statement in statements:  # tables first: an index may name an added column
                if statement.startswith("CREATE TABLE"):
                    db.execute(statement)
            for table, columns in _reference_columns().items():
                have = {c[1] for c in db.execute(f"PRAGMA table_info({table})")}
                for name, (decl, default) in columns.items():
                    if name not in have:
                        extra = f" DEFAULT {default}" if default is not None else ""
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}{extra}")
            for statement in statements:
                if not statement.startswith("CREATE TABLE"):
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite's failures in the words of the user's situation (file named, fix given)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self._explain(exc) from None

    def _explain(self, exc: sqlite3.DatabaseError) -> GhRunError:
        text = str(exc)
        if _is_readonly(exc):
            return UserError(
                f"{self.path}: the gh-run home cannot be written ({text}); run where the home "
                "is writable, or give another home with --home (reading commands such as "
                "`gh-run status` still work here)"
            )
        if "disk is full" in text or "disk I/O error" in text:
            return RuntimeFailure(
                f"{self.path}: the disk holding the gh-run home is full or failing ({text}); "
                "free space there and run the command again"
            )
        if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
            return RuntimeFailure(
                f"{self.path}: the state store stayed locked by another gh-run for 60 s; "
                "wait for it to finish and run the command again"
            )
        return RuntimeFailure(
            f"{self.path}: not a readable gh-run state store ({text}); move it aside (mv "
            f"{self.path} {self.path}.broken) and run again, or give another home with --home"
        )

    def _use_wal(self) -> None:
        """Switch the file to WAL once; the mode is persistent, so later opens only read it.

        Switching needs an exclusive lock, and SQLite answers SQLITE_BUSY at once (no busy
        wait) when another process is opening the same fresh file: retry for a while.
        """
        deadline = time.monotonic() + 60.0
        while True:
            try:
                mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def close(self) -> None:
        self._db.close()

    def _q(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[sqlite3.Row]:
        """A read query's rows, with SQLite's failures explained."""
        with self._guard():
            return self._db.execute(sql, args).fetchall()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE so concurrent writers queue, never interleave."""
        self.require_writable()
        with self._guard():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise

    # -- runs -------------------------------------------------------------------------------
    # -- seals (row_seal.py) ------------------------------------------------------------------
    @property
    def home_key(self) -> str:
        if self._home_key is None:
            self._home_key = row_seal.home_key(self.home)
        return self._home_key

    def sealed(self, run: Run) -> dict[str, Any]:
        """The run's columns with its seal for this home and user (what an INSERT writes)."""
        data = as_dict(run)
        try:
            data["seal"] = row_seal.seal_run(self.home_key, data)
        except (row_seal.KeyUnavailable, OSError) as exc:
            raise RuntimeFailure(
                f"your gh-run key cannot be made or read ({exc}); gh-run binds each run to you "
                f"with it: make {row_seal.key_path().parent} a folder of yours (or set "
                "XDG_DATA_HOME to one)"
            ) from None
        return data

    def run_of(self, row: sqlite3.Row | Mapping[str, Any]) -> Run:
        """A row as a Run, with why it must not be acted on (`Run.unbound`) when its seal is
        not this user's for this home."""
        data = dict(row)
        run = record(Run, data)
        run.unbound = row_seal.run_problem(self.home_key, data)
        return run

    def adopt(self, run_id: str, script_sha256: str | None, detail: str) -> Run:
        """Bind a run to this home and user (`gh-run adopt`): its script's sha256 as it is now,
        and the seal of its fields, with an event saying so."""
        with self.tx() as db:
            row = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise UserError(f"run {run_id} is not in the state store {self.path}")
            data = {**dict(row), "script_sha256": script_sha256}
            db.execute(
                "UPDATE runs SET script_sha256 = ?, seal = ? WHERE run_id = ?",
                (script_sha256, row_seal.seal_run(self.home_key, data), run_id),
            )
            db.execute(
                "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
                (run_id, time.time(), row["state"], detail),
            )
        return self.get_run(run_id)

    def add_run(self, run: Run, detail: str = "intent written before submission") -> None:
        data = self.sealed(run)
        cols = ", ".join(data)
        marks = ", ".join(f":{k}" for k in data)
        with self.tx() as db:
            db.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", data)
            db.execute(
                "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
                (run.run_id, run.created_at, run.state, detail),
            )

    def add_runs(self, runs: list[Run], detail: str = "intent written before submission") -> None:
        """Many intent rows in one transaction (a campaign's plan)."""
        if not runs:
            return
        data = [self.sealed(r) for r in runs]
        cols = ", ".join(data[0])
        marks = ", ".join(f":{k}" for k in data[0])
        with self.tx() as db:
            db.executemany(f"INSERT INTO runs ({cols}) VALUES ({marks})", data)
            db.executemany(
                "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
                [(r.run_id, r.created_at, r.state, detail) for r in runs],
            )

    def update_run(self, run_id: str, *, event: str | None = None, **fields: Any) -> Run:
        """Update fields; when the state changes, an event is recorded in the same transaction."""
        allowed = RUN_FIELDS - {"run_id"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown run fields: {sorted(bad)}")
        with self.tx() as db:
            row = db.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise UserError(f"run {run_id} is not in the state store {self.path}")
            if fields:
                sets = ", ".join(f"{k} = :{k}" for k in fields)
                db.execute(
                    f"UPDATE runs SET {sets} WHERE run_id = :run_id", {**fields, "run_id": run_id}
                )
            new_state = fields.get("state")
            if (new_state and new_state != row["state"]) or event:
                db.execute(
                    "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
                    (run_id, time.time(), new_state or row["state"], event),
                )
        return self.get_run(run_id)

    def update_run_if(
        self, run_id: str, expect: dict[str, Any], *, event: str | None = None, **fields: Any
    ) -> Run | None:
        """Update only when the row still has the `expect`ed values (compare-and-set).

        Two gh-run processes refreshing the same run must not both act on it (e.g. both
        resubmit a retry): the one whose expectation no longer holds gets None.
        """
        allowed = RUN_FIELDS - {"run_id"}
        bad = (set(fields) | set(expect)) - allowed
        if bad:
            raise ValueError(f"unknown run fields: {sorted(bad)}")
        with self.tx() as db:
            row = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None or any(row[k] != v for k, v in expect.items()):
                return None
            if fields:
                sets = ", ".join(f"{k} = :{k}" for k in fields)
                db.execute(
                    f"UPDATE runs SET {sets} WHERE run_id = :run_id", {**fields, "run_id": run_id}
                )
            db.execute(
                "INSERT INTO events (run_id, ts, state, detail) VALUES (?, ?, ?, ?)",
                (run_id, time.time(), fields.get("state", row["state"]), event),
            )
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> Run:
        rows = self._q("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise UserError(f"no run {run_id!r} in {self.path}; `gh-run status` lists the runs")
        return self.run_of(rows[0])

    def find_run(self, ref: str) -> Run:
        """A run by id, unique id prefix, job id, or `last`: the one resolver of run references
        of every command (status, logs, cancel, fetch, wait, analyze, compare, report).
        NoSuchRun when nothing matches; an ambiguous prefix is a UserError listing matches."""
        if ref == "last":
            last = self._q("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1")
            if not last:
                raise NoSuchRun(f"no runs yet in {self.path}; submit one with `gh-run submit`")
            return self.run_of(last[0])
        rows = self._q(
            "SELECT * FROM runs WHERE run_id = ? OR job_id = ? OR run_id LIKE ? ESCAPE '\\' "
            "ORDER BY created_at DESC",
            (ref, ref, ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"),
        )
        exact = [r for r in rows if r["run_id"] == ref or r["job_id"] == ref]
        if len(exact) == 1:
            return self.run_of(exact[0])
        if len(rows) == 1:
            return self.run_of(rows[0])
        if not rows:
            raise NoSuchRun(
                f"no run matches {ref!r} in {self.path}; `gh-run status` lists the runs (give "
                "--home when they are in another gh-run home)"
            )
        raise UserError(
            f"{ref!r} matches {len(rows)} runs ({', '.join(r['run_id'] for r in rows[:5])}…); "
            "give more of the run id"
        )

    def list_runs(
        self,
        *,
        limit: int | None = None,
        states: set[str] | None = None,
        campaign_id: str | None = None,
    ) -> list[Run]:
        sql = "SELECT * FROM runs"
        args: list[Any] = []
        where = []
        if states:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args += sorted(states)
        if campaign_id:
            where.append("campaign_id = ?")
            args.append(campaign_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if limit:
            sql += f" LIMIT {sql_limit(limit)}"
        return [self.run_of(r) for r in self._q(sql, args)]

    def events(self, run_id: str) -> list[Event]:
        rows = self._q(
            "SELECT run_id, ts, state, detail FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return [record(Event, r) for r in rows]

    # -- artifacts and metrics --------------------------------------------------------------
    def record_artifacts(self, run_id: str, records: list[ArtifactRecord], when: float) -> None:
        with self.tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO artifacts (run_id, relpath, size, sha256, source, "
                "collected_at) VALUES (:run_id, :relpath, :size, :sha256, :source, :collected_at)",
                [as_dict(r) for r in records],
            )
            db.execute("UPDATE runs SET collected_at = ? WHERE run_id = ?", (when, run_id))
            db.execute(
                "INSERT INTO events (run_id, ts, state, detail) VALUES "
                "(?, ?, (SELECT state FROM runs WHERE run_id = ?), ?)",
                (run_id, when, run_id, f"collected {len(records)} artifacts, sha256 verified"),
            )

    def artifacts(self, run_id: str) -> list[ArtifactRecord]:
        rows = self._q("SELECT * FROM artifacts WHERE run_id = ? ORDER BY relpath", (run_id,))
        return [record(ArtifactRecord, r) for r in rows]

    def put_metrics(self, run_id: str, values: dict[str, float | None]) -> None:
        with self.tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO metrics (run_id, key, value) VALUES (?, ?, ?)",
                [(run_id, k, _metric_in(v)) for k, v in values.items()],
            )

    def metrics(self, run_id: str) -> dict[str, float | None]:
        rows = self._q("SELECT key, value FROM metrics WHERE run_id = ?", (run_id,))
        return {r["key"]: _metric_out(r["value"]) for r in rows}

    def rows(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        """A read query as plain dicts (the campaign tables are read through this)."""
        return [dict(r) for r in self._q(sql, args)]

    def metrics_of(self, run_ids: list[str]) -> dict[str, dict[str, float | None]]:
        """Metrics of many runs in one query: run_id → {key: value}."""
        out: dict[str, dict[str, float | None]] = {r: {} for r in run_ids}
        for i in range(0, len(run_ids), 500):
            chunk = run_ids[i : i + 500]
            marks = ", ".join("?" * len(chunk))
            for r in self._q(
                f"SELECT run_id, key, value FROM metrics WHERE run_id IN ({marks})", chunk
            ):
                out[r["run_id"]][r["key"]] = _metric_out(r["value"])
        return out

    def dump_run(self, run_id: str) -> dict[str, Any]:
        run = self.get_run(run_id)
        shown = as_dict(run)
        shown.pop("seal", None)
        shown["bound"] = run.unbound is None
        return {
            "run": shown,
            "events": [as_dict(e) for e in self.events(run_id)],
            "artifacts": [as_dict(a) for a in self.artifacts(run_id)],
        }
