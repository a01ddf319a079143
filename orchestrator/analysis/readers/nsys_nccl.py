"""NCCL operations that carry an id every rank shares: the cross-rank view matches each rank's
instance of one collective by it, not by position.

NVIDIA's documentation (Nsight Systems 2025.6.1 and later, NCCL 2.28 and later: the "advanced"
NCCL trace, `--nccl-trace`) says such operations carry `operationId`, `seqNumber` and `commHash`
(the communicator's hash, the same on each of its ranks, and the operation's sequence number in
it). No page gh-run could read names the export table that holds them, and no real export met
holds one: the table is found by its columns, not its name: a table whose name holds `NCCL`
with `start`, `end` and either `commHash` and `seqNumber` or `operationId`. The key is
(commHash, seqNumber) where the table has both, else operationId; `globalPid` (or
`globalTid`), where present, says which process (rank) ran it.

An export without such a table reads as before (collectives matched by position, the
cross-rank view says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.readers.nsys_db import Db, pid_tid

KEY_COLUMNS = (("commHash", "seqNumber"), ("operationId",))


@dataclass
class NcclOps:
    """NCCL operations of one export (or one process of it): start and end (ns), their key
    (two columns; the second 0 for operationId), the process, sorted by start. `key_name` says
    which columns the key is."""

    start: Any
    end: Any
    key_a: Any
    key_b: Any
    pid: Any
    table: str
    key_name: str

    def take(self, sel: Any) -> NcclOps:
        return NcclOps(
            self.start[sel], self.end[sel], self.key_a[sel], self.key_b[sel], self.pid[sel],
            self.table, self.key_name,
        )  # fmt: skip

    @property
    def size(self) -> int:
        return int(self.start.size)


def candidates(db: Db) -> list[tuple[str, tuple[str, ...]]]:
    """(table, key columns) the export may hold its NCCL operations in, the preferred key
    first."""
    out = []
    for name in sorted(db.schema.physical):
        if "NCCL" not in name.upper():
            continue
        cols = {c.upper(): c for c in db.cols(name)}
        if "START" not in cols or "END" not in cols:
            continue
        for key in KEY_COLUMNS:
            if all(k.upper() in cols for k in key):
                out.append((name, tuple(cols[k.upper()] for k in key)))
    return out


def read(db: Db) -> NcclOps | None:
    """The export's NCCL operations with a shared id (None: it holds none): the first table and
    key (`candidates`) whose rows carry it."""
    for table, key in candidates(db):
        cols = {c.upper(): c for c in db.cols(table)}
        who = cols.get("GLOBALPID") or cols.get("GLOBALTID")
        quoted = [f'"{k}"' for k in key]
        second = quoted[1] if len(quoted) > 1 else "0"
        process = f'"{who}"' if who else "0"
        whole = " AND ".join(f"typeof({c}) = 'integer'" for c in ["start", '"end"', *quoted])
        rows = db.q(
            f'SELECT start, "end", {quoted[0]}, {second}, coalesce({process}, 0) FROM "{table}"'
            f' WHERE {whole} AND "end" >= start'
            " ORDER BY 1, 2, 3, 4, 5"  # time, never the stored order
        )
        if rows:
            s, e, a, b, g = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
            pid = pid_tid(g)[0] if who else np.zeros(s.size, dtype=np.int64)
            return NcclOps(s, e, a, b, pid, table, " + ".join(key))
    return None
