"""Trim a real `nsys export --type=sqlite` file for use as committed test data.

    python bench/trim_nsys_export.py SRC.sqlite DST.sqlite [--keep-callchains]
        [--gpu-metrics-window]

What changes (everything else is the export as nsys wrote it, row for row):
- the rows of SAMPLING_CALLCHAINS and OSRT_CALLCHAINS are deleted (call stacks of CPU samples
  and OS-runtime calls; the tables stay, empty), unless --keep-callchains (recordings whose
  readers ask what the host was doing: issue 28);
- TARGET_INFO_SYSTEM_ENV: `DeviceEnvironment` (the environment nsys was started in, `K=V;...`)
  keeps only the variables that say who the process was (KEEP_ENV: ranks, world size,
  rendezvous, gh-run's run id and name, NCCL/NVSHMEM switches); `GpuMetricsConfig` (a YAML
  description of GPU-metric sets, ~150 kB) becomes empty, unless --gpu-metrics-window;
- --gpu-metrics-window: GPU_METRICS keeps the samples inside the capture window, [0,
  ANALYSIS_DETAILS.duration] on the session's clock (nsys 2024.2 samples from before the
  window opens to after it closes; measured: 'Profiling has started' / 'has stopped' in
  DIAGNOSTIC_EVENT at 0 and at `duration`, which equals META_DATA_CAPTURE's RUN_DURATION_MS),
  and GENERIC_EVENTS loses the rows that hold the same samples again as JSON text (its typeIds
  are TARGET_INFO_GPU_METRICS's); GpuMetricsConfig is kept (how each metric is computed);
- the file is vacuumed.
The source is never modified.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import sys
from pathlib import Path

EMPTIED_TABLES = ("SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS")
KEEP_ENV = re.compile(
    r"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|NODE_RANK|ROLE_RANK|"
    r"ROLE_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_RUN_ID|SLURM_[A-Z_]+|OMPI_COMM_WORLD_"
    r"[A-Z_]+|PMI_RANK|PMI_SIZE|GH_RUN_ID|GH_RUN_NAME|GH_RUN_EXECUTOR|NCCL_[A-Z_]+|"
    r"TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS|CUDA_VISIBLE_DEVICES)$"
)


def trim(
    src: Path, dst: Path, keep_callchains: bool = False, gpu_metrics_window: bool = False
) -> None:
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table in () if keep_callchains else EMPTIED_TABLES:
            if table in tables:
                conn.execute(f"DELETE FROM {table}")
        if gpu_metrics_window and "GPU_METRICS" in tables:
            (duration,) = conn.execute("SELECT duration FROM ANALYSIS_DETAILS").fetchone()
            conn.execute(
                "DELETE FROM GPU_METRICS WHERE timestamp IS NULL OR timestamp < 0 OR timestamp > ?",
                (duration,),
            )
            if "GENERIC_EVENTS" in tables:
                conn.execute(
                    "DELETE FROM GENERIC_EVENTS"
                    " WHERE typeId IN (SELECT typeId FROM TARGET_INFO_GPU_METRICS)"
                )
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            rows = conn.execute(
                "SELECT rowid, value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"
            ).fetchall()
            for rowid, value in rows:
                kept = [
                    kv
                    for kv in str(value).split(";")
                    if "=" in kv and KEEP_ENV.match(kv.split("=", 1)[0])
                ]
                conn.execute(
                    "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE rowid = ?",
                    (";".join(kept), rowid),
                )
            if not gpu_metrics_window:
                conn.execute(
                    "UPDATE TARGET_INFO_SYSTEM_ENV SET value = '' WHERE name = 'GpuMetricsConfig'"
                )
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/trim_nsys_export.py",
        description="Trim a real nsys SQLite export for committed test data (see the module doc).",
    )
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--keep-callchains", action="store_true")
    parser.add_argument("--gpu-metrics-window", action="store_true")
    ns = parser.parse_args(argv)
    src, dst = ns.src, ns.dst
    if src.resolve() == dst.resolve():
        print("trim_nsys_export: DST must differ from SRC", file=sys.stderr)
        return 2
    trim(src, dst, ns.keep_callchains, ns.gpu_metrics_window)
    print(f"{src.name}: {src.stat().st_size / 1e6:.2f} MB -> {dst.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
