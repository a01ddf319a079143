#!/bin/bash
# shellcheck disable=SC2016  # values are data: single-quoted on purpose, never expanded
# One task of gh-run run mem-oom-20261129-052023-940468: rank from SLURM under srun, 0 when run directly.
set -euo pipefail
export RANK="${SLURM_PROCID:-0}"
export LOCAL_RANK="${SLURM_LOCALID:-0}"
export NODE_RANK="${SLURM_NODEID:-0}"
# profile.memory: PyTorch's allocator history, recorded by gh-run's import hook (a sitecustomize
# that runs the image's own after it) without a change to the workload; docs/profiling.md
export GH_RUN_MEMORY=snapshot
export GH_RUN_MEMORY_DIR=/root/ghm/out/scratch/gh-run/runs/mem-oom-20261129-052023-940468/artifacts/memory
export GH_RUN_MEMORY_MAX_EVENTS=100000
export GH_RUN_MEMORY_DUMP_AT=exit
export PYTHONPATH=/root/ghm/out/scratch/gh-run/runs/mem-oom-20261129-052023-940468/memory_hook"${PYTHONPATH:+:$PYTHONPATH}"
cd /root/ghm/src
exec python3 \
  bench/workloads/memory_cases.py \
  oom \
  --device \
  cuda
