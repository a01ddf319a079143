#!/usr/bin/env bash
# The reference workload data-parallel (DDP over NCCL, one process per GPU) on one machine with
# NPROC GPUs and no SLURM, through gh-run itself: `gh-run submit jobs/canary_ddp.yaml --executor
# local` with bench/clusters/gpu-host.yaml, torchrun starting the ranks inside the one task.
# A normal run and one where rank STRAGGLE_RANK does STRAGGLE_MS of extra host work per step, each
# under the PyTorch profiler (one Kineto trace per rank, with distributedInfo) and under the real
# Nsight Systems with one report per rank (`--output=...%q{RANK}`: nsys runs inside torchrun, once
# per rank); then `nsys export`/`nsys stats` of each report, and `gh-run analyze`.
# Optionally (VARIANTS) `nsys_one_report`: gh-run's own nsys prefix around torchrun, one report
# holding every rank's process. Run by hand; CI has no GPU.
#
#   source .gpu/setup.sh          # nsys and the wheels (scripts/gpu-bundle.sh made them)
#   bench/gpu_ddp.sh [OUTDIR]     # default bench/out/gpu_ddp
#
# NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1: exported here and set by the job).
# Writes OUTDIR/env.txt, OUTDIR/<variant>/ (traces or reports and exports, metrics*.json,
# analysis.json, job.sbatch, the job's logs), OUTDIR/summary.txt; with PACK_DIR set, after each
# variant OUTDIR/<variant> is packed into PACK_DIR/ddp-<variant>.tar.xz.
# Knobs (environment): PYTHON (python3), DEVICE (cuda; cpu runs gloo, for a check without GPUs),
# NPROC (2), STEPS (10), WINDOW (6:8), STRAGGLE_RANK (1), STRAGGLE_MS (100), MODEL_ARGS,
# VARIANTS ("kineto kineto_straggler nsys nsys_straggler"), PACK_DIR, GH_RUN_COMMIT,
# NSYS_RANGE (cudaProfilerApi; none records the whole run, e.g. on a CPU, where no CUDA call
# opens the capture range).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_ddp}")
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
NPROC=${NPROC:-2}
STEPS=${STEPS:-10}
WINDOW=${WINDOW:-6:8}
STRAGGLE_RANK=${STRAGGLE_RANK:-1}
STRAGGLE_MS=${STRAGGLE_MS:-100}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --hidden 2048 --heads 16 --vocab 32000 --seq-len 1024 --batch-size 8}
VARIANTS=${VARIANTS:-kineto kineto_straggler nsys nsys_straggler}
read -ra variants <<<"$VARIANTS"
read -ra model_args <<<"$MODEL_ARGS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 COLUMNS=160
export GH_RUN_HOME="$OUTDIR/home" SCRATCH="$OUTDIR/scratch"
gh() { "$PYTHON" -m orchestrator "$@"; }
# shellcheck source=bench/lib/gpu_jobs.sh
source bench/lib/gpu_jobs.sh
TORCHRUN=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NPROC")
NSYS_FLAGS=("--trace=cuda,cudnn,cublas,osrt,nvtx" --cuda-memory-usage=true --force-overwrite=true)
if [[ ${NSYS_RANGE:-cudaProfilerApi} == cudaProfilerApi ]]; then
  NSYS_FLAGS+=(--capture-range=cudaProfilerApi --capture-range-end=stop)
fi

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
{
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -n 6
  "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None, "gpus", torch.cuda.device_count())'
  echo "gh-run commit: ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  nsys --version 2>&1
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS)='
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

failed=0
for v in "${variants[@]}"; do
  wl=(-m workloads.sft --ddp --device "$DEVICE" "${model_args[@]}" --steps "$STEPS" --fused-adam
    --precision bf16 --num-workers 4)
  [[ $v == *straggler* ]] && wl+=(--straggle-rank "$STRAGGLE_RANK" --straggle-ms "$STRAGGLE_MS")
  sets=(--cluster bench/clusters/gpu-host.yaml --set partition=gpu --set resources.nodes=1
    --set "resources.gpus_per_node=$NPROC" --set resources.ntasks_per_node=1
    --set container.runtime=none --set "name=ddp-$v")
  case "$v" in
    kineto | kineto_straggler)
      args=("${TORCHRUN[@]:1}" "${wl[@]}" --profile-steps "$WINDOW")
      sets+=(--set profile.tool=torch) ;;
    nsys | nsys_straggler)
      # nsys inside torchrun: one report per rank, named by the RANK torchrun gives each
      # process. Through bash, because nsys 2023.4 takes an --output that starts with %q{VAR}
      # as relative (the working folder is put in front of an absolute $GH_RUN_ARTIFACTS).
      # shellcheck disable=SC2016  # expanded by that bash, in each rank's environment
      args=("${TORCHRUN[@]:1}" --no-python bash -c
        'exec nsys profile --output="$GH_RUN_ARTIFACTS/$0.rank$RANK" "$@"' "$v"
        "${NSYS_FLAGS[@]}" "$PYTHON" "${wl[@]}" --cuda-profiler-window "$WINDOW")
      sets+=(--set profile.tool=none) ;;
    nsys_one_report)
      # gh-run's own nsys prefix around torchrun: one report, every rank's process in it
      args=("${TORCHRUN[@]:1}" "${wl[@]}" --cuda-profiler-window "$WINDOW")
      sets+=(--set profile.tool=nsys --set "profile.output=$v"
        --set "profile.trace=[cuda, cudnn, cublas, osrt, nvtx]"
        --set profile.capture_range=cudaProfilerApi --set profile.capture_range_end=stop
        --set profile.cuda_memory_usage=true) ;;
    *) echo "unknown variant $v" >&2; failed=1; continue ;;
  esac
  sets+=(--set "workload.command=$PYTHON" --set "workload.args=$(yaml_list "${args[@]}")")
  echo "== $v: torchrun x $NPROC: ${args[*]}"
  t0=$(date +%s)
  run_variant jobs/canary_ddp.yaml "$OUTDIR/$v" "${sets[@]}"
  rc=$RUN_RC
  if [[ -d $RUN_DIR ]]; then
    for rep in "$OUTDIR/$v"/*.nsys-rep; do
      [[ -e $rep && ! -e ${rep%.nsys-rep}.sqlite ]] || continue
      nsys export --type=sqlite --force-overwrite=true --output="${rep%.nsys-rep}.sqlite" "$rep" \
        >/dev/null 2>>"$OUTDIR/$v/post.err"
      nsys stats --report=cuda_gpu_kern_sum --report=cuda_api_sum --report=nvtx_sum --format=csv \
        --force-overwrite=true --output="${rep%.nsys-rep}" "${rep%.nsys-rep}.sqlite" \
        >/dev/null 2>>"$OUTDIR/$v/post.err"
    done
    gh analyze "$OUTDIR/$v" --json >"$OUTDIR/$v/analysis.json" 2>"$OUTDIR/$v/analysis.err"
  fi
  echo "   exit $rc in $(($(date +%s) - t0)) s; files: $(find "$OUTDIR/$v" -type f -printf '%f ')"
  tail -n 3 "$OUTDIR/$v/submit.txt"
  ((rc == 0)) || failed=1
  if [[ -n ${PACK_DIR:-} ]]; then
    mkdir -p "$PACK_DIR"
    tar -C "$OUTDIR" -cf - "$v" | xz -6 -T0 >"$PACK_DIR/ddp-$v.tar.xz"
  fi
done

"$PYTHON" - "$OUTDIR" "${variants[@]}" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sys
from pathlib import Path
out, variants = Path(sys.argv[1]), sys.argv[2:]
print(f"{'variant':18} {'rank':>4} {'step ms':>8} {'data ms':>8} {'peak GiB':>9} {'checksum':>14} backend")
for v in variants:
    files = sorted((out / v).glob("metrics*.json"))
    if not files:
        print(f"{v:18} (no metrics)")
    for f in files:
        m = json.loads(f.read_text())
        peak = m.get("peak_gpu_memory_bytes")
        print(f"{v:18} {m['rank']:4} {m['median_step_time_s'] * 1e3:8.1f} "
              f"{m['median_data_time_s'] * 1e3:8.1f} "
              f"{'-' if peak is None else f'{peak / 2**30:.2f}':>9} "
              f"{m.get('parameter_checksum', 0):14.6f} {m.get('ddp_backend')}")
PY
[[ -n ${PACK_DIR:-} ]] && cp "$OUTDIR/summary.txt" "$OUTDIR/env.txt" "$PACK_DIR/"
exit "$failed"
