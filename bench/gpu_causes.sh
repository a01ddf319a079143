#!/usr/bin/env bash
# Workloads with planted, known causes (issue 35 item 7) and the pairs issue 41 checks its
# projections on, recorded under Nsight Systems 2024.2 through gh-run itself: each variant is
# `gh-run submit bench/workloads/causes/job.yaml --executor local --wait` on a machine with one
# NVIDIA GPU and no SLURM (bench/clusters/gpu-host.yaml), the script and its switches set with
# --set. Each run writes its own truth (bench/workloads/causes/harness.py: per-step walls, what
# the planted cause measured in each step, the walls inside and outside the capture window) in
# metrics.json beside its report. The reports are exported to SQLite where they land.
#
#   source .gpu/setup.sh                # nsys 2024.2 and the wheels (scripts/gpu-bundle.sh)
#   bench/gpu_causes.sh [OUTDIR]        # default bench/out/gpu_causes
#
# Variants (VARIANTS, in this order by default: the planted causes first, then the pairs):
#   img_input_w0   images.py: 0.4 ms of sleep per item in __getitem__, 128 items a batch, 0 workers
#   ml_eager       many_layers.py: 96 blocks of width 64: µs kernels, launch-bound (graph truth)
#   dl_host        dataless.py: 40 ms of numpy after the optimizer step of every 3rd step
#   dl_backward    dataless.py: 15 ms of numpy in a backward hook (autograd's thread), no data
#   ml_sync        many_layers.py: 16 .item() reads in the forward of every 2nd step, big kernels
#   dl_fp32        dataless.py: fp32 GEMMs (no autocast, no TF32)
#   img_pageable   images.py: float32 batches from 8 workers, pin_memory off (pageable copies)
#   hf_w0          hf_llama.py: transformers' Llama from a config, Python tokenizing, 0 workers
#   img_input_w6   pair of img_input_w0: 6 workers
#   ml_graphs      pair of ml_eager: the step captured once as a CUDA graph, replayed
#   dl_clean       pair of dl_host (host work removed) and of dl_fp32 (bf16 autocast)
#   hf_w4          pair of hf_w0: 4 workers
#   img_pinned     pair of img_pageable: pin_memory on
#   hf_fp32        pair of hf_w4: fp32
# Writes OUTDIR/env.txt, OUTDIR/<variant>/ (report, metrics.json, submit output, job.sbatch,
# spec.lock.yaml, the job's logs), OUTDIR/summary.txt. Knobs (environment): PYTHON (python3),
# VARIANTS, DEVICE (cuda), BUDGET_S (start no variant after this many seconds; 0: no limit),
# RUN_TIMEOUT_S (150), EXTRA_SET (more --set words for every variant), CAPTURE (cudaProfilerApi;
# none for a dry run on a machine without CUDA), SMALL=1 (tiny sizes: a dry run on CPUs),
# PACK_DIR (after each variant, PACK_DIR/causes-<N>.tar.xz is rewritten for the pair of variants
# that holds it, N = its place in VARIANTS halved: the device tool brings back 8 files of at most
# 16 MiB; the output, env.txt and summary.txt included, is the caller's to keep).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_causes}")
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
BUDGET_S=${BUDGET_S:-0}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-150}
CAPTURE=${CAPTURE:-cudaProfilerApi}
VARIANTS=${VARIANTS:-img_input_w0 ml_eager dl_host dl_backward ml_sync dl_fp32 img_pageable hf_w0 img_input_w6 ml_graphs dl_clean hf_w4 img_pinned hf_fp32}
read -ra variants <<<"$VARIANTS"
export PYTHONUNBUFFERED=1 COLUMNS=160
export GH_RUN_HOME="$OUTDIR/home" SCRATCH="$OUTDIR/scratch"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gh() { timeout -k 10 "$RUN_TIMEOUT_S" "$PYTHON" -m orchestrator "$@"; }
# shellcheck source=bench/lib/gpu_jobs.sh
source bench/lib/gpu_jobs.sh
# shellcheck source=bench/lib/nsys_record.sh
NSYS=nsys source bench/lib/nsys_record.sh # pack_dirs

# variant -> script and its switches (SMALL: sizes a CPU runs in seconds)
variant_args() {
  local small=${SMALL:-0}
  case "$1" in
    img_input_w0) echo "images.py --item-sleep-ms 0.4 --num-workers 0" ;;
    img_input_w6) echo "images.py --item-sleep-ms 0.4 --num-workers 6" ;;
    img_pageable) echo "images.py --host-float32 --no-pin-memory --num-workers 8 --width 96 --image-size 160" ;;
    img_pinned) echo "images.py --host-float32 --pin-memory --num-workers 8 --width 96 --image-size 160" ;;
    ml_eager) echo "many_layers.py" ;;
    ml_graphs) echo "many_layers.py --cuda-graphs" ;;
    ml_sync) echo "many_layers.py --width 2048 --layers 16 --batch-size 4096 --precision bf16 --item-syncs 16 --sync-every 2" ;;
    dl_host) echo "dataless.py --host-every 3 --host-ms 40" ;;
    dl_backward) echo "dataless.py --backward-host-ms 15" ;;
    dl_fp32) echo "dataless.py --precision fp32" ;;
    dl_clean) echo "dataless.py" ;;
    hf_w0) echo "hf_llama.py --num-workers 0" ;;
    hf_w4) echo "hf_llama.py --num-workers 4" ;;
    hf_fp32) echo "hf_llama.py --num-workers 4 --precision fp32" ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
  [[ $small == 1 ]] || return 0
  case "$1" in # appended: argparse takes the last value
    img_*) echo " --batch-size 8 --image-size 32 --width 8 --steps 5 --cuda-profiler-window 2:4" ;;
    ml_sync) echo " --width 64 --layers 4 --batch-size 16 --steps 6 --cuda-profiler-window 2:5" ;;
    ml_*) echo " --layers 8 --steps 5 --cuda-profiler-window 2:4" ;;
    dl_*) echo " --width 64 --tokens 256 --vocab 512 --steps 5 --cuda-profiler-window 2:5" ;;
    hf_*) echo " --hidden 64 --layers 2 --heads 4 --vocab 1000 --seq-len 128 --batch-size 2 --steps 4 --cuda-profiler-window 1:3" ;;
  esac
}

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
{
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "kernel: $(uname -r)"
  "$PYTHON" -c 'import sys, torch, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__)' 2>&1
  "$PYTHON" -c 'import transformers; print("transformers", transformers.__version__)' 2>&1 | tail -n 1
  echo "gh-run commit: ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  nsys --version 2>&1
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

t_start=$(date +%s)
failed=0
for v in "${variants[@]}"; do
  if ((BUDGET_S > 0 && $(date +%s) - t_start > BUDGET_S)); then
    echo "== $v: not started (BUDGET_S=$BUDGET_S spent)" | tee -a "$OUTDIR/skipped.txt"
    continue
  fi
  text=$(variant_args "$v" | tr -d '\n') || { failed=1; continue; }
  read -ra words <<<"$text"
  words+=(--device "$DEVICE")
  sets=(--cluster bench/clusters/gpu-host.yaml --set partition=gpu
    --set "workload.command=$PYTHON" --set "workload.args=$(yaml_list "${words[@]}")"
    --set "profile.output=$v" --set "name=causes-${v//_/-}"
    --set "profile.capture_range=$CAPTURE")
  [[ $CAPTURE == none ]] && sets+=(--set "profile.capture_range_end=null")
  read -ra extra <<<"${EXTRA_SET:-}"
  for word in "${extra[@]}"; do sets+=(--set "$word"); done
  echo "== $v: ${words[*]}"
  t0=$(date +%s)
  run_variant bench/workloads/causes/job.yaml "$OUTDIR/$v" "${sets[@]}"
  printf '%s\n' "${words[*]}" >"$OUTDIR/$v/command.txt"
  echo "   exit $RUN_RC in $(($(date +%s) - t0)) s; files: $(find "$OUTDIR/$v" -type f -printf '%f ')"
  ((RUN_RC == 0)) || { failed=1; tail -n 12 "$OUTDIR/$v/submit.txt"; }
  # timed out: the job still runs under its supervisor; it must not share the GPU with the next
  ((RUN_RC == 124)) && "$PYTHON" -m orchestrator cancel last
  if [[ -n ${PACK_DIR:-} ]]; then # the pair of variants that holds v, archived again
    for i in "${!variants[@]}"; do [[ ${variants[$i]} == "$v" ]] && n=$((i / 2)); done
    # shellcheck disable=SC2046  # the pair's names, split on purpose
    pack_dirs "$PACK_DIR/causes-$n.tar.xz" "$OUTDIR" $(printf '%s\n' "${variants[@]:$((2 * n)):2}")
  fi
done

"$PYTHON" - "$OUTDIR" "${variants[@]}" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sys
from pathlib import Path
out, variants = Path(sys.argv[1]), sys.argv[2:]
print(f"{'variant':14} {'window ms/step':>14} {'outside ms':>10}  planted (ms per window step)")
for v in variants:
    f = out / v / "metrics.json"
    if not f.exists():
        print(f"{v:14} (no metrics.json)")
        continue
    t = json.loads(f.read_text())["truth"]
    causes = ", ".join(f"{k} {c['window_ms_per_step']:.2f}" for k, c in t["causes"].items())
    mean, med = t["window_wall_mean_ms"], t["outside_wall_median_ms"]
    print(f"{v:14} {mean:14.2f} {med if med is None else round(med, 2)!s:>10}  {causes or '-'}")
PY
exit "$failed"
