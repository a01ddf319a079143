#!/usr/bin/env bash
# The seed's experiments under the real Nsight Systems, through gh-run itself: for each variant,
# `gh-run submit jobs/canary_nsys.yaml --executor local --wait` runs the very script SLURM would run
# (launcher direct, no container) with the seed's nsys flags, then the in-job `nsys export` and
# `nsys stats`; `gh-run analyze` reads what came back. For a machine with one NVIDIA GPU and no
# SLURM (the device tool's H100). Run by hand; CI has no GPU.
#
#   source .gpu/setup.sh          # nsys and the wheels (scripts/gpu-bundle.sh made them)
#   bench/gpu_nsys.sh [OUTDIR]    # default bench/out/gpu_nsys
#
# Variants (the reference workload, 8 x 2048, seq 1024, batch 8, fused AdamW, item cost 28 so that
# loading is the bottleneck at workers 0; capture window WINDOW unless said):
#   baseline       full SFT, workers 0, bf16
#   workers4       --num-workers 4
#   offload        --offload-activations
#   lora           --peft lora
#   full           full SFT again (the same flags as baseline: a repeat, for the run-to-run spread)
#   fp32           --precision fp32
#   lora_um        LoRA on Unified Memory (RMM managed pool as torch's allocator), UM page-fault
#                  tracing, and a host snapshot each step: the CPU reads up to HOST_TOUCH_MB MiB of
#                  the trainable parameters (the adapters, ~4 MB): pages migrate device→host and
#                  back inside the steady-state window
#   full_um        the same for full SFT (trainable: every weight, so the whole HOST_TOUCH_MB)
#   full_um_first  full SFT on Unified Memory without the snapshot, capture window UM_WINDOW from
#                  step 0: the first touch of activations, gradients and Adam state (in steady
#                  state, where the model fits, no page moves)
#   lora_um_first  the same for LoRA (not in the default VARIANTS)
# The managed pool is capped at UM_POOL_FRACTION of the free GPU memory: never more managed
# memory than the card has free (no oversubscription on a lent GPU).
#
# Writes OUTDIR/env.txt (GPU, driver, versions, an --event-sample probe), OUTDIR/<variant>/
# (the report, its SQLite export, stats CSVs, metrics.json, analysis.json, job.sbatch,
# spec.lock.yaml, the job's logs), OUTDIR/summary.txt. With PACK_DIR set, after each variant the
# archive of its group (PACK_GROUPS) is rewritten there, so a run stopped midway still returns what
# finished. Knobs (environment): PYTHON (python3), DEVICE (cuda), STEPS (10), WINDOW (6:8), UM_WINDOW (0:3),
# ITEM_COST (28), MODEL_ARGS, VARIANTS, UM_POOL_FRACTION (0.6), HOST_TOUCH_MB (64), PACK_DIR,
# PACK_GROUPS ("baseline workers4 offload|lora_um full_um|lora fp32|full_um_first full"),
# GH_RUN_COMMIT (the commit named in env.txt where the tree is no git checkout), PROBE (1: try
# --event-sample=system-wide once and note what nsys says).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_nsys}")
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-10}
WINDOW=${WINDOW:-6:8}
UM_WINDOW=${UM_WINDOW:-0:3}
ITEM_COST=${ITEM_COST:-28}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --hidden 2048 --heads 16 --vocab 32000 --seq-len 1024 --batch-size 8}
VARIANTS=${VARIANTS:-baseline workers4 offload lora_um full_um lora fp32 full_um_first full}
UM_POOL_FRACTION=${UM_POOL_FRACTION:-0.6}
HOST_TOUCH_MB=${HOST_TOUCH_MB:-64}
GROUPS_SPEC=${PACK_GROUPS:-baseline workers4 offload|lora_um full_um|lora fp32|full_um_first full}
PACK_LIMIT=$((15 * 1024 * 1024)) # the device tool brings back files of up to 16 MiB
read -ra variants <<<"$VARIANTS"
export PYTHONUNBUFFERED=1 COLUMNS=160
export GH_RUN_HOME="$OUTDIR/home" SCRATCH="$OUTDIR/scratch"
gh() { "$PYTHON" -m orchestrator "$@"; }
# shellcheck source=bench/lib/gpu_jobs.sh
source bench/lib/gpu_jobs.sh

UM_FLAGS="--unified-memory --um-max-pool-fraction $UM_POOL_FRACTION"
TOUCH="--um-host-touch-mb $HOST_TOUCH_MB"
UM_REPORTS="cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, um_sum"
UM_REPORTS+=", um_total_sum, um_cpu_page_faults_sum, osrt_sum, nvtx_sum"
variant_args() { # -> workload flags, then '|' and the capture window
  case "$1" in
    baseline | full) echo "--num-workers 0 --precision bf16|$WINDOW" ;;
    workers4) echo "--num-workers 4 --precision bf16|$WINDOW" ;;
    offload) echo "--num-workers 0 --precision bf16 --offload-activations|$WINDOW" ;;
    lora) echo "--num-workers 0 --precision bf16 --peft lora|$WINDOW" ;;
    fp32) echo "--num-workers 0 --precision fp32|$WINDOW" ;;
    lora_um) echo "--num-workers 0 --precision bf16 --peft lora $UM_FLAGS $TOUCH|$WINDOW" ;;
    full_um) echo "--num-workers 0 --precision bf16 $UM_FLAGS $TOUCH|$WINDOW" ;;
    full_um_first) echo "--num-workers 0 --precision bf16 $UM_FLAGS|$UM_WINDOW" ;;
    lora_um_first) echo "--num-workers 0 --precision bf16 --peft lora $UM_FLAGS|$UM_WINDOW" ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}

pack() { # the archive of the group that holds variant $1, rewritten from what is done
  [[ -n ${PACK_DIR:-} ]] || return 0
  local g i members=() have=()
  IFS='|' read -ra groups <<<"$GROUPS_SPEC"
  for i in "${!groups[@]}"; do
    read -ra members <<<"${groups[$i]}"
    g=" ${members[*]} "
    [[ $g == *" $1 "* ]] || continue
    for v in "${members[@]}"; do [[ -d $OUTDIR/$v ]] && have+=("$v"); done
    mkdir -p "$PACK_DIR"
    local file="$PACK_DIR/nsys-group$((i + 1)).tar.xz"
    tar -C "$OUTDIR" --exclude='*.qdstrm' -cf - "${have[@]}" | xz -6 -T0 >"$file.tmp"
    if (($(stat -c %s "$file.tmp") > PACK_LIMIT)); then # the exports can be made again from the reports
      tar -C "$OUTDIR" --exclude='*.qdstrm' --exclude='*.sqlite' -cf - "${have[@]}" |
        xz -6 -T0 >"$file.tmp"
    fi
    mv "$file.tmp" "$file"
  done
}

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
{
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  "$PYTHON" -c 'import rmm; print("rmm", rmm.__version__)' 2>&1 | tail -n 1
  echo "gh-run commit: ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  nsys --version
  echo "== nsys status --environment"
  nsys status --environment 2>&1
  if [[ ${PROBE:-1} == 1 ]]; then
    echo "== probe: --event-sample=system-wide (the seed's flag)"
    probe=$(mktemp -d)
    timeout 40 nsys profile --event-sample=system-wide --duration=3 --force-overwrite=true \
      --output="$probe/probe" sleep 1 2>&1 | tail -n 8
    echo "probe exit: ${PIPESTATUS[0]}"
    rm -rf "$probe"
  fi
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

failed=0
read -ra model_args <<<"$MODEL_ARGS"
for v in "${variants[@]}"; do
  spec_text=$(variant_args "$v") || { failed=1; continue; }
  read -ra extra <<<"${spec_text%|*}"
  window=${spec_text##*|}
  args=(-m workloads.sft --device "$DEVICE" "${model_args[@]}" --steps "$STEPS" --fused-adam
    --item-cost "$ITEM_COST" "${extra[@]}" --cuda-profiler-window "$window")
  sets=(--set container.runtime=none --set "workload.command=$PYTHON"
    --set "workload.args=$(yaml_list "${args[@]}")" --set "profile.output=$v"
    --set "name=nsys-$v")
  if [[ $v == *_um* ]]; then
    sets+=(--set profile.cuda_um_cpu_page_faults=true --set profile.cuda_um_gpu_page_faults=true
      --set "profile.reports=[$UM_REPORTS]")
  fi
  echo "== $v: window $window, workload ${args[*]}"
  t0=$(date +%s)
  run_variant jobs/canary_nsys.yaml "$OUTDIR/$v" "${sets[@]}"
  rc=$RUN_RC
  if [[ -d $RUN_DIR ]]; then
    gh analyze "$RUN_DIR/artifacts" --json >"$OUTDIR/$v/analysis.json" 2>"$OUTDIR/$v/analysis.err"
  fi
  echo "   exit $rc in $(($(date +%s) - t0)) s; files: $(find "$OUTDIR/$v" -type f -printf '%f ')"
  tail -n 3 "$OUTDIR/$v/submit.txt"
  ((rc == 0)) || failed=1
  pack "$v"
done

"$PYTHON" - "$OUTDIR" "${variants[@]}" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sys
from pathlib import Path
out, variants = Path(sys.argv[1]), sys.argv[2:]
print(f"{'variant':14} {'step ms':>8} {'data ms':>8} {'peak GiB':>9} {'rep KiB':>8} {'sqlite KiB':>10}  source of peak")
for v in variants:
    m_path = out / v / "metrics.json"
    if not m_path.exists():
        print(f"{v:14} (no metrics.json)")
        continue
    m = json.loads(m_path.read_text())
    peak = m.get("peak_gpu_memory_bytes")
    rep = sum(p.stat().st_size for p in (out / v).glob("*.nsys-rep")) / 1024
    sql = sum(p.stat().st_size for p in (out / v).glob("*.sqlite")) / 1024
    print(f"{v:14} {m['median_step_time_s'] * 1e3:8.1f} {m['median_data_time_s'] * 1e3:8.1f} "
          f"{'-' if peak is None else f'{peak / 2**30:.2f}':>9} {rep:8.0f} {sql:10.0f}  "
          f"{m.get('peak_gpu_memory_source')}")
PY
[[ -n ${PACK_DIR:-} ]] && cp "$OUTDIR/summary.txt" "$OUTDIR/env.txt" "$PACK_DIR/"
exit "$failed"
