"""Reader of `nsys export --type sqlite` files → one `RankTimeline` per process that ran GPU work.

The reading is spread over modules beside this one, one concept each:
- `nsys_db`: the file opened read-only, the tables and columns it has (a table that a trace
  option did not produce is tolerated: what it feeds is left empty and it is listed in
  `SourceInfo.missing`), its string ids;
- `sqlite_columns`: the column read of a big table: the compiled page reader (`sqlite_pages`)
  where it reads a range exactly, else SQLite; in parts on a thread pool;
- `nsys_gpu`: kernels, memcpys and memsets (one `GpuTable`) and their launch times from the
  runtime calls; `nsys_host`: synchronisation calls, NVTX ranges, OS-runtime calls, thread
  names; `nsys_memory`: Unified Memory and the memory peaks; `nsys_ranks`: which process is
  which rank, and the split into a timeline per process;
- here: the order of the reads, the export's metadata (TARGET_INFO_GPU device names,
  META_DATA_EXPORT or EXPORT_META_DATA in older exports; a capture that lost data refused,
  `capture_health`), and the timelines put together.

Speed: the big tables (kernels, memcpys, memsets, runtime calls) are read once each, as
columns, in parts of equal rows that a thread pool reads on every core, all queued at once;
the host tables are read in this thread meanwhile. What else is wanted of the big tables comes
from the same reads (the rowids of the synchronisation calls, the UM copies' migration causes:
`sqlite_columns.Subset`); the rest are small queries.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from orchestrator.analysis.readers import (
    capture_health,
    export_schema,
    nsys_gpu,
    nsys_gpu_metrics,
    nsys_host,
    nsys_memory,
    nsys_nccl,
    nsys_ranks,
)
from orchestrator.analysis.readers import table_parts as TP
from orchestrator.analysis.readers.nsys_db import (
    DAMAGED,
    KERNEL,
    MEMCPY,
    MEMSET,
    NVTX,
    OSRT,
    RUNTIME,
    Db,
    Export,
)
from orchestrator.analysis.readers.sqlite_columns import READ_THREADS, PartsRead
from orchestrator.analysis.timeline import model as T
from orchestrator.core.errors import RuntimeFailure, UserError

# the tables whose absence the figures cannot show (a count of 0 reads like a measured 0): named
# in a note when the export has none of them (the UM and memory tables' figures show "-")
FED = {
    KERNEL: "kernels",
    MEMCPY: "copies",
    MEMSET: "memsets",
    RUNTIME: "CUDA runtime calls",
    NVTX: "NVTX ranges",
    OSRT: "OS-runtime calls",
}


class _Reader:
    """One export → timelines (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        db = Db(path)
        db.check_export()
        self.ex = Export(path, db)
        self.path = path

    def _meta(self, name: str) -> str | None:
        """A value of the export's metadata table (`META_DATA_EXPORT`; 2022.x:
        `EXPORT_META_DATA`, resolved as an older name of it)."""
        db = self.ex.db
        if not db.has("META_DATA_EXPORT", "name", "value"):
            return None
        r = db.q(f'SELECT value FROM "{db.name("META_DATA_EXPORT")}" WHERE name = ?', (name,))
        return str(r[0][0]) if r and r[0][0] is not None else None

    def _version(self) -> str | None:
        return self._meta("EXPORT_PRODUCT_VERSION")

    def _check_capture(self) -> None:
        """Refuse (exit 1) an export that lost data the workload made (`capture_health`), unless
        GH_RUN_ACCEPT_LOST_DATA=1 asks to read it anyway (then a note). A loss of the host's
        samples alone is read, with its note."""
        partial = capture_health.cpu_side_losses(self.ex.db.conn, self.ex.db.schema)
        if partial is not None:
            self.ex.notes.append(partial)
        why = capture_health.lost_data(self.ex.db.conn, self.ex.db.schema)
        if why is None:
            return
        if capture_health.accept_lost():
            self.ex.notes.append(f"this capture lost data: {why}")
            return
        raise RuntimeFailure(
            f"{self.path}: this capture lost data ({why}), so its GPU figures would be wrong;"
            " record it again (nsys 2024.2 or later keeps CUDA 12.5+ kernels that 2023.4 drops),"
            f" or set {capture_health.ACCEPT_ENV}=1 to read what it kept"
        )

    def _schema_note(self) -> None:
        """One note when the export's schema is newer than those gh-run has met (it is read
        for what it has: tables by resolution, columns by name), and one for each table read
        under a versioned name, renamed beyond what gh-run knows, or lacking a column."""
        note = export_schema.note(self._meta("EXPORT_SCHEMA_VERSION"))
        if note:
            self.ex.notes.append(note)
        self.ex.notes += self.ex.db.schema_notes()

    def read(self) -> list[T.RankTimeline]:
        ex = self.ex
        db = ex.db
        try:
            self._check_capture()
            self._schema_note()
            cuda_pids = nsys_host.cuda_pids(db)
            # several processes with CUDA work, or no table that says: read each row's pid
            by_pid = len(cuda_pids) != 1 and any(
                db.has(t, "globalPid") for t in (KERNEL, MEMCPY, MEMSET)
            )
            # the big tables in parts on every core, all queued at once (GPU tables first);
            # the host tables in this thread meanwhile
            pool = ThreadPoolExecutor(max_workers=READ_THREADS)
            try:
                pending = nsys_gpu.queue(ex, pool, by_pid)
                # the runtime calls' process only matters with several processes (a column of
                # 8 bytes a call otherwise)
                rt_cols = nsys_gpu.runtime_cols(ex, by_pid)
                # the synchronisation calls are gathered in the same scan of the runtime table
                # (read for them alone where it has no correlation ids for the launch times)
                sync_ids = nsys_host.sync_ids(ex)
                sync_sub = nsys_host.sync_subset(sync_ids) if sync_ids else None
                rt = (
                    PartsRead(
                        pool, ex.path, ex.table(RUNTIME), rt_cols or ["start"], True, sync_sub
                    )
                    if rt_cols or sync_sub
                    else None
                )
                got = nsys_gpu.collect(ex, pending)
                gpu, gpu_pid = got.gpu, got.pid
                del pending
                pids = nsys_ranks.ranked_pids(gpu_pid, gpu, nsys_host.context_devices(db))
                if len(pids) > 1 and gpu_pid is None:
                    if gpu.size:  # GPU rows without their process: one rank after all
                        pids = pids[:1]
                    else:
                        gpu_pid = np.zeros(0, dtype=np.int64)
                multi = len(pids) > 1
                seen = set(cuda_pids)
                if gpu_pid is not None and gpu_pid.size:
                    lo, hi = int(gpu_pid.min()), int(gpu_pid.max())
                    seen |= {lo} if lo == hi else {int(p) for p in np.unique(gpu_pid).tolist()}
                if not multi:  # one rank: nothing reads the rows' pids any more
                    gpu_pid = None

                def sync() -> T.HostTable:
                    if rt is not None:
                        rt.wait()
                    if sync_sub is None:
                        return T.HostTable.empty()
                    return nsys_host.sync_calls(ex, sync_ids, sync_sub.columns()[0])

                host, threads, osrt_traced = nsys_host.read(ex, seen, sync)
            finally:
                # parts still queued (a part failed: the error is on its way) are not read
                pool.shutdown(cancel_futures=True)
            launch_rt = rt.take() if rt is not None and rt_cols else iter(())
            nsys_gpu.launches(gpu, gpu_pid if multi else None, launch_rt)
            rt = None  # the parts taken are let go
            um_copies = bool(np.isin(gpu.copy, list(nsys_memory.UM_KINDS)).any())
            um_whole, um_per_pid = nsys_memory.unified_memory(ex, um_copies, got.um_found)
            peak, peak_source = nsys_memory.peak_memory(db)
            history = nsys_memory.memory_timelines(db)
            gpu_names: dict[int, str] = {}
            if db.has("TARGET_INFO_GPU", "id", "name"):
                gpu_names = {
                    int(i): str(n)
                    for i, n in db.q(f'SELECT id, name FROM "{db.name("TARGET_INFO_GPU")}"')
                    if isinstance(i, int)
                }
            version = self._version()
            rank_env = nsys_ranks.env_rank(db)
            samples = nsys_gpu_metrics.read(ex.path, db.conn, db.schema)
            nccl = nsys_nccl.read(db)
        finally:
            db.conn.close()
        source = T.SourceInfo(
            path=str(ex.path),
            kind="nsys-sqlite",
            tool_version=version,
            missing=sorted(set(ex.missing)),
        )
        absent = [f"{t} ({what})" for t, what in FED.items() if t in source.missing]
        if absent:
            ex.notes.append(
                f"not in this export: {', '.join(absent)}: nothing was recorded there, or that"
                " trace was off; the figures they feed read as none"
            )
        base = T.RankTimeline(
            source=source,
            names=ex.names.table(),
            gpu=gpu,
            host=host,
            threads=threads,
            cuda_pids=cuda_pids,
            single_main_rule="tid == pid (the only process)",
            osrt_traced=osrt_traced,
            device_names=gpu_names,
            peak_memory_source=peak_source,
            hta=T.HtaClock(unit_ns=1, rounds=False, step_filter=False),
            split_devices=True,
            notes=[*ex.notes, *samples.notes],
            gpu_samples=samples,
            nccl_ops=nccl,
        )
        if rank_env is not None:
            base.rank, base.rank_rule = rank_env[0], f"{rank_env[1]} in the profiled environment"
        if not multi:
            base.pid = pids[0] if pids else (next(iter(cuda_pids)) if len(cuda_pids) == 1 else None)
            base.um = um_whole
            nsys_ranks.set_peaks(base, peak.get(-1, {}))
            base.memory = history.get(base.pid if base.pid is not None else -1, []) or (
                history.get(-1, [])
            )
            return [base]
        assert gpu_pid is not None
        out = nsys_ranks.split(base, gpu_pid, pids, um_whole, um_per_pid)
        for tl in out:
            nsys_ranks.set_peaks(tl, peak.get(tl.pid if tl.pid is not None else -1, {}))
            tl.memory = history.get(tl.pid if tl.pid is not None else -1, [])
        return out


def read_timelines(path: Path) -> list[T.RankTimeline]:
    """Read one nsys SQLite export: a timeline per process with GPU work (one, with no GPU work
    at all, for the host side)."""
    try:
        return _Reader(path).read()
    except TP.DamagedTable as exc:  # a b-tree that contradicts itself: never a fraction of it
        raise UserError(
            f"{path}: {exc.table} is damaged: {exc.detail}; copy the file again, or export the"
            " report again with `nsys export --type sqlite` (`sqlite3 FILE 'PRAGMA"
            " integrity_check'` lists the damage)"
        ) from exc
    except DAMAGED as exc:  # a damaged file, found partway through the reading
        raise UserError(
            f"{path}: SQLite cannot read this file ({exc}); it is damaged or was cut short:"
            " copy it again, or export the report again with `nsys export --type sqlite`"
        ) from exc
