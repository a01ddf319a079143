"""The nsys export schema versions gh-run has met, and the one note an unknown newer one gets.

`META_DATA_EXPORT.EXPORT_SCHEMA_VERSION` (2022.x: `EXPORT_META_DATA`) names the schema of an
`nsys export --type sqlite` file. NVIDIA's documentation (2025.6+): a minor bump may rename or
retype columns, and exports no longer guarantee any row order. The reader therefore finds every
table by resolution (`export_tables`: versioned and older names), names every column it reads
and checks each is there (a table it lacks is listed in `SourceInfo.missing`, a column a present
table lacks gets a note), and never relies on the order rows are stored in (rowid ranges are
storage: each table's rows are put in time order where order matters, tests/unit/
test_export_versions.py stores every table shuffled and expects byte-identical output).

Met, each with a real export (the CPU captures are recorded by the test of the three installed
versions; the others are in tests/data):
- 2.9.1: nsys 2022.2.1 (tests/data/nsys/saxpy-mpi-cuda_perlmutter0.sqlite);
- 3.0.0: nsys 2022.4.2 (`EXPORT_META_DATA`; tests/data/nsys_cpu);
- 3.7.2: nsys 2023.4.4 (`META_DATA_EXPORT` + `META_DATA_CAPTURE`; tests/data/nsys_h100);
- 3.11.1: nsys 2024.2.3 (adds `DIAGNOSTIC_EVENT`, graph tables; the tables gh-run reads keep
  their columns);
- 3.13.2: nsys 2024.5.1 (adds kernel columns such as `greenContextId`;
  tests/data/nsys/cloverleaf-cuda_perlmutter.sqlite);
- 3.24.14: nsys 2026.1.1 (adds `TARGET_INFO_CUDA_CONTEXT_INFO.numMultiprocessors`,
  `CUPTI_ACTIVITY_KIND_MEMCPY.copyCount`; `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.syncType` kept
  beside a new `deprecatedSyncType`; tests/data/nsys2026/mock);
- 3.25.0: nsys 2026.2.1 (`NVTX_EVENTS.binaryData`; PyTorch's operator ranges from
  `--pytorch=autograd-nvtx`: tests/data/nsys2026/h100_2gpu_1s, mfu_2gpu_*). The tables gh-run
  reads keep their names and columns in both.
"""

from __future__ import annotations

# The tables gh-run reads and the columns it names in each (nsys_*.py, capture_health.py).
# Every export met, of every schema above, has all of them wherever it has the table
# (tests/unit/test_export_versions.py checks each real export, and a 2024.2 capture it makes);
# the reader still checks each column by name, so an unknown schema reads for what it has.
READ_COLUMNS: dict[str, tuple[str, ...]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName",
        "shortName",
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "copyKind", "bytes",
        "migrationCause",
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "correlationId", "globalTid", "nameId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "text", "textId", "globalTid"),
    "OSRT_API": ("start", "end", "globalTid", "nameId"),
    "ThreadNames": ("nameId", "globalTid", "priority"),
    "StringIds": ("id", "value"),
    "CUDA_GPU_MEMORY_USAGE_EVENTS": (
        "start", "globalPid", "deviceId", "bytes", "memoryOperationType", "memKind",
    ),
    "CUDA_UM_GPU_PAGE_FAULT_EVENTS": (
        "globalPid", "deviceId", "numberOfPageFaults", "faultAccessType",
    ),
    "TARGET_INFO_GPU": ("id", "name"),
    "TARGET_INFO_SYSTEM_ENV": ("name", "value"),
    "TARGET_INFO_CUDA_CONTEXT_INFO": ("processId", "deviceId"),
    "TARGET_INFO_CUDA_STREAM": ("processId",),
    "DIAGNOSTIC_EVENT": ("timestamp", "severity", "text"),
}  # fmt: skip

KNOWN: dict[str, str] = {
    "2.9.1": "2022.2.1",
    "3.0.0": "2022.4.2",
    "3.7.2": "2023.4.4",
    "3.11.1": "2024.2.3",
    "3.13.2": "2024.5.1",
    "3.24.14": "2026.1.1",
    "3.25.0": "2026.2.1",
}


def _parts(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in version.strip().split("."))
    except ValueError:
        return None


NEWEST = max(KNOWN, key=lambda v: _parts(v) or ())


def note(found: str | None) -> str | None:
    """The note an export of schema `found` gets: None for a schema met or older than the
    newest met; for a newer one (or one that is not a version), what reading it means (the
    tables read under other names get notes of their own: `export_tables.Schema.notes`)."""
    if found is None or found in KNOWN:
        return None
    got, newest = _parts(found), _parts(NEWEST)
    if got is None:
        return (
            f"export schema {found!r} is not a version gh-run can read: the tables and columns "
            "there are read by name"
        )
    if newest is not None and got[:2] <= newest[:2]:
        return None
    return (
        f"export schema {found} is newer than those gh-run has met (newest {NEWEST}, nsys "
        f"{KNOWN[NEWEST]}): tables read by name or versioned name (X_V2), columns by name; a"
        " column renamed beyond what gh-run knows is named in a note"
    )


def reading() -> list[str]:
    """What gh-run reads of an nsys SQLite export, one line each (`gh-run doctor`)."""
    met = ", ".join(f"{k} (nsys {v})" for k, v in sorted(KNOWN.items(), key=lambda kv: _parts(
        kv[0]) or ()))  # fmt: skip
    return [
        f"export schemas met: {met}; a newer one is read for what it holds, with a note",
        "tables found by name, by versioned name (X_V2, X_V3: the highest wins, a note names"
        " it) or by nsys 2022.x's older name (EXPORT_META_DATA), in any case; a look-alike"
        " name or a column gh-run reads that a table lacks gets a note",
        "NVTX ranges: the workload's, libraries' (other domains) and PyTorch's operators"
        " (emit_nvtx names, op ids stripped: the per-operator breakdown)",
        "NCCL operations with an id shared by every rank (commHash + seqNumber or operationId,"
        " nsys 2025.6+) match collectives across ranks where the export holds them",
    ]
