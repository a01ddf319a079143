#!/usr/bin/env bash
# Workloads nobody annotated (issue 28 item 5), recorded on one NVIDIA GPU under the real Nsight
# Systems and under the PyTorch profiler. Two plain training scripts, each at DataLoader workers 0
# and 4, each with a data-loading cost planted per sample (known in advance: at workers 0 the loop
# and the GPU wait for it every step; at 4 the workers prepare batches while the GPU computes):
#   sft_w0, sft_w4          the reference workload (`python -m workloads.sft`) with --no-nvtx (no
#                           NVTX ranges, no record_function), bf16, fused AdamW, --item-ms SFT_ITEM_MS
#   convnet_w0, convnet_w4  bench/workloads/convnet_sgd.py: a ResNet-style CNN, fp32, SGD with
#                           Nesterov momentum, --item-ms CONVNET_ITEM_MS
# Each is run twice: under `nsys profile` (bench/lib/nsys_record.sh: the seed's --trace list, CPU
# and Python sampling, OS runtime, the cudaProfilerApi window over steps WINDOW) with the in-place
# SQLite export and stats CSVs, and under torch.profiler (a Kineto trace of the same steps). Each
# run writes its own truth in metrics.json: per-step wall and data-wait times, step starts (Unix
# ns), the planted cost, the windows. No SLURM, no gh-run in the loop: nsys is called directly.
# Run by hand on a GPU machine; CI has no GPU.
#
#   source .gpu/setup.sh                      # nsys 2024.2 on PATH (scripts/gpu-bundle.sh)
#   bench/gpu_unannotated.sh [OUTDIR]         # default bench/out/gpu_unannotated
#
# Writes OUTDIR/env.txt, OUTDIR/{nsys,kineto}/<variant>/ (report, export, stats CSVs, the
# workload's metrics.json and log), OUTDIR/summary.txt. With PACK_DIR set, the archives
# PACK_DIR/unannotated-{nsys-sft,nsys-convnet,kineto}.tar.xz are rewritten after each run.
# Knobs (environment): NSYS (nsys), PYTHON (python3), DEVICE (cuda), STEPS (12), WINDOW (6:10),
# SFT_ITEM_MS (6: 48 ms a batch of 8), CONVNET_ITEM_MS (0.4: 38.4 ms a batch of 96), SFT_ARGS,
# CONVNET_ARGS, VARIANTS ("sft_w0 sft_w4 convnet_w0 convnet_w4"), TOOLS ("nsys kineto"),
# NSYS_RANGE (cudaProfilerApi; none: whole run), PYTHON_SAMPLING (1), PACK_DIR, GH_RUN_COMMIT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_unannotated}")
NSYS=${NSYS:-nsys}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-12}
WINDOW=${WINDOW:-6:10}
SFT_ITEM_MS=${SFT_ITEM_MS:-6}
CONVNET_ITEM_MS=${CONVNET_ITEM_MS:-0.4}
SFT_ARGS=${SFT_ARGS:---layers 8 --hidden 2048 --heads 16 --vocab 32000 --seq-len 1024 --batch-size 8}
CONVNET_ARGS=${CONVNET_ARGS:---batch-size 96 --image-size 192}
VARIANTS=${VARIANTS:-sft_w0 sft_w4 convnet_w0 convnet_w4}
TOOLS=${TOOLS:-nsys kineto}
read -ra variants <<<"$VARIANTS"
read -ra tools <<<"$TOOLS"
read -ra sft_args <<<"$SFT_ARGS"
read -ra convnet_args <<<"$CONVNET_ARGS"
export PYTHONUNBUFFERED=1
# shellcheck source=bench/lib/nsys_record.sh
source bench/lib/nsys_record.sh

workload() { # VARIANT DIR TOOL -> the command line, one word a line
  local v=$1 dir=$2 tool=$3 workers=${1##*_w} win
  if [[ $tool == nsys ]]; then win=(--cuda-profiler-window "$WINDOW"); else
    win=(--torch-profile "$dir" --profile-steps "$WINDOW")
  fi
  case "$v" in
    sft_w*) printf '%s\n' "$PYTHON" -m workloads.sft --device "$DEVICE" --no-nvtx "${sft_args[@]}" \
      --steps "$STEPS" --fused-adam --precision bf16 --item-ms "$SFT_ITEM_MS" \
      --num-workers "$workers" --output "$dir" "${win[@]}" ;;
    convnet_w*) printf '%s\n' "$PYTHON" bench/workloads/convnet_sgd.py --device "$DEVICE" \
      "${convnet_args[@]}" --steps "$STEPS" --item-ms "$CONVNET_ITEM_MS" \
      --num-workers "$workers" --output "$dir" "${win[@]}" ;;
    *) echo "unknown variant $v" >&2; return 1 ;;
  esac
}

pack() {
  [[ -n ${PACK_DIR:-} ]] || return 0
  pack_dirs "$PACK_DIR/unannotated-nsys-sft.tar.xz" "$OUTDIR" nsys/sft_w0 nsys/sft_w4
  pack_dirs "$PACK_DIR/unannotated-nsys-convnet.tar.xz" "$OUTDIR" nsys/convnet_w0 nsys/convnet_w4
  pack_dirs "$PACK_DIR/unannotated-kineto.tar.xz" "$OUTDIR" kineto
  cp "$OUTDIR"/*.txt "$PACK_DIR/" 2>/dev/null
  return 0
}

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
nsys_env >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

failed=0
for v in "${variants[@]}"; do
  for tool in "${tools[@]}"; do
    dir="$OUTDIR/$tool/$v"
    mkdir -p "$dir"
    mapfile -t cmd < <(workload "$v" "$dir" "$tool") || { failed=1; continue; }
    ((${#cmd[@]})) || { failed=1; continue; }
    if [[ $tool == nsys ]]; then
      cmd=("$NSYS" profile "${NSYS_FLAGS[@]}" --output="$dir/$v" "${cmd[@]}")
    fi
    echo "== $tool $v: ${cmd[*]}" | tee "$dir/command.txt"
    t0=$(date +%s)
    "${cmd[@]}" >"$dir/log.txt" 2>&1
    rc=$?
    [[ $tool == nsys ]] && { nsys_post "$dir/$v.nsys-rep" || rc=1; }
    echo "   exit $rc in $(($(date +%s) - t0)) s; $(grep -m1 '^median step' "$dir/log.txt")"
    ((rc == 0)) || { failed=1; tail -n 15 "$dir/log.txt"; }
    pack
  done
done

"$PYTHON" - "$OUTDIR" "${tools[@]}" -- "${variants[@]}" <<'PY' | tee "$OUTDIR/summary.txt"
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
cut = sys.argv.index("--")
tools, variants = sys.argv[2:cut], sys.argv[cut + 1:]
print(f"{'run':22} {'win':>5} {'step ms (window)':>18} {'data ms (window)':>18} {'planted':>8}  files")
for tool in tools:
    for v in variants:
        d = out / tool / v
        m_path = d / "metrics.json"
        if not m_path.exists():
            print(f"{tool + '/' + v:22} (no metrics.json)")
            continue
        m = json.loads(m_path.read_text())
        win = m.get("cuda_profiler_window") or m["config"].get("cuda_profiler_window")
        if tool == "kineto":
            win = m.get("profile_steps") or m["config"].get("profile_steps")
        s, e = win
        steps = [t * 1e3 for t in m["step_times_s"][s:e]]
        data = [t * 1e3 for t in m["data_times_s"][s:e]]
        files = " ".join(sorted(p.name for p in d.iterdir() if p.suffix in {".sqlite", ".gz", ".nsys-rep"}))
        print(f"{tool + '/' + v:22} {s:>2}:{e:<2} {statistics.mean(steps):8.1f} "
              f"({min(steps):.0f}-{max(steps):.0f}) {statistics.mean(data):8.1f} "
              f"({min(data):.0f}-{max(data):.0f}) {m['planted_data_ms_per_step']:8.1f}  {files}")
PY
pack
exit "$failed"
