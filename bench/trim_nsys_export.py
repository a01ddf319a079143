"""Trim a real `nsys export --type=sqlite` file for use as committed test data.

    python bench/trim_nsys_export.py SRC.sqlite DST.sqlite

What changes (everything else is the export as nsys wrote it, row for row):
- the rows of SAMPLING_CALLCHAINS and OSRT_CALLCHAINS are deleted (call stacks of CPU samples
  and OS-runtime calls: nothing in gh-run reads them; the tables stay, empty);
- TARGET_INFO_SYSTEM_ENV: `DeviceEnvironment` (the environment nsys was started in, `K=V;...`)
  keeps only the variables that say who the process was (KEEP_ENV: ranks, world size,
  rendezvous, gh-run's run id and name, NCCL/NVSHMEM switches); `GpuMetricsConfig` (a YAML
  description of GPU-metric sets, ~150 kB, unused here) becomes empty;
- the file is vacuumed.
The source is never modified.
"""

from __future__ import annotations

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


def trim(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table in EMPTIED_TABLES:
            if table in tables:
                conn.execute(f"DELETE FROM {table}")
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
            conn.execute(
                "UPDATE TARGET_INFO_SYSTEM_ENV SET value = '' WHERE name = 'GpuMetricsConfig'"
            )
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    if src.resolve() == dst.resolve():
        print("trim_nsys_export: DST must differ from SRC", file=sys.stderr)
        return 2
    trim(src, dst)
    print(f"{src.name}: {src.stat().st_size / 1e6:.2f} MB -> {dst.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
