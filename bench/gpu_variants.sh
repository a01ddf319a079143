#!/usr/bin/env bash
# The seed's five experiments on one GPU, each a run of the reference workload with a Kineto
# trace of a short step window and its metrics.json:
#   baseline  workers 0 (data loading in the training loop, made the bottleneck by --item-cost)
#   workers4  --num-workers 4
#   offload   --offload-activations (saved activations in pinned host memory)
#   lora      --peft lora (adapters on q/k/v/o, base frozen)
#   fp32      --precision fp32 (no autocast)
# ITEM_COST=auto (the default) first runs `probe` (item cost 0, no trace) to time the compute
# of a step, then picks the item cost that makes loading one batch take DATA_FACTOR (2) times
# that on this machine's CPU, so workers 0 is data-bound and workers 4 can hide the loading.
# Usage: bench/gpu_variants.sh [OUTDIR]     (default bench/out/gpu_variants)
# Writes OUTDIR/<variant>/{sft_rank0.pt.trace.json.gz,metrics.json,log.txt}, OUTDIR/summary.txt
# and OUTDIR.tar.gz. Knobs (environment): PYTHON, DEVICE, STEPS, WINDOW, ITEM_COST, MODEL_ARGS,
# VARIANTS. Timings belong here, not in tests.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=${1:-bench/out/gpu_variants}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-20}
WINDOW=${WINDOW:-10:12}
ITEM_COST=${ITEM_COST:-auto}
DATA_FACTOR=${DATA_FACTOR:-2}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --hidden 2048 --heads 16 --vocab 32000 --seq-len 1024 --batch-size 8}
VARIANTS=${VARIANTS:-baseline workers4 offload lora fp32}
read -ra model_args <<<"$MODEL_ARGS"
read -ra variants <<<"$VARIANTS"
export PYTHONUNBUFFERED=1

variant_args() {
  case "$1" in
    baseline) echo "--num-workers 0 --precision bf16" ;;
    workers4) echo "--num-workers 4 --precision bf16" ;;
    offload) echo "--num-workers 0 --precision bf16 --offload-activations" ;;
    lora) echo "--num-workers 0 --precision bf16 --peft lora" ;;
    fp32) echo "--num-workers 0 --precision fp32" ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}

mkdir -p "$OUTDIR"
failed=0

if [ "$ITEM_COST" = auto ]; then
  rm -rf "$OUTDIR/probe" && mkdir -p "$OUTDIR/probe"
  echo "== probe: compute-only step time (item cost 0, workers 0, bf16)"
  "$PYTHON" -m workloads.sft --device "$DEVICE" --steps 8 --fused-adam --item-cost 0 \
    "${model_args[@]}" --num-workers 0 --precision bf16 --output "$OUTDIR/probe" \
    >"$OUTDIR/probe/log.txt" 2>&1 || { tail -n 20 "$OUTDIR/probe/log.txt"; exit 1; }
  tail -n 1 "$OUTDIR/probe/log.txt"
  ITEM_COST=$("$PYTHON" - "$OUTDIR/probe/metrics.json" "$DATA_FACTOR" <<'PY'
import json, sys, time
from workloads.data import SyntheticInstructions
m = json.load(open(sys.argv[1]))
c = m["config"]
def per_item(cost: int) -> float:
    ds = SyntheticInstructions(16, c["seq_len"], c["vocab"], item_cost=cost)
    t = time.perf_counter()
    for i in range(16):
        ds[i]
    return (time.perf_counter() - t) / 16
base, heavy = per_item(0), per_item(10)
per_pass = (heavy - base) / 10
target = float(sys.argv[2]) * m["median_step_time_s"] / c["batch_size"]
cost = max(1, round((target - base) / per_pass))
print(f"item: {base * 1e3:.2f} ms + {per_pass * 1e3:.3f} ms/pass; step {m['median_step_time_s'] * 1e3:.1f} ms"
      f" -> item cost {cost}", file=sys.stderr)
print(cost)
PY
  ) || exit 1
  echo "== item cost $ITEM_COST"
fi
for v in "${variants[@]}"; do
  dir="$OUTDIR/$v"
  rm -rf "$dir" && mkdir -p "$dir"
  extra_text=$(variant_args "$v") || { failed=1; continue; }
  read -ra extra <<<"$extra_text"
  cmd=("$PYTHON" -m workloads.sft --device "$DEVICE" --steps "$STEPS" --fused-adam
       --item-cost "$ITEM_COST" "${model_args[@]}" "${extra[@]}"
       --output "$dir" --torch-profile "$dir" --profile-steps "$WINDOW")
  echo "== $v: ${cmd[*]}"
  if ! "${cmd[@]}" >"$dir/log.txt" 2>&1; then
    echo "== $v FAILED (exit $?); last lines:"; tail -n 20 "$dir/log.txt"; failed=1
  fi
  tail -n 1 "$dir/log.txt"
done

echo "item cost $ITEM_COST, model: $MODEL_ARGS, steps $STEPS, trace window $WINDOW" \
  >"$OUTDIR/summary.txt"
"$PYTHON" - "$OUTDIR" probe "${variants[@]}" <<'PY' | tee -a "$OUTDIR/summary.txt"
import json, sys
from pathlib import Path
out, variants = Path(sys.argv[1]), sys.argv[2:]
print(f"{'variant':10} {'step ms':>8} {'data ms':>8} {'tok/s':>9} {'peak GiB':>9} "
      f"{'offl GiB':>9} {'trace KiB':>9} {'loss':>7}  device")
for v in variants:
    m_path = out / v / "metrics.json"
    if not m_path.exists():
        print(f"{v:10} (not run)")
        continue
    m = json.loads(m_path.read_text())
    peak = m["peak_gpu_memory_bytes"]
    offl = m["offloaded_bytes_per_step"]
    trace = out / v / (m["trace_file"] or "-")
    print(f"{v:10} {m['median_step_time_s'] * 1e3:8.1f} {m['median_data_time_s'] * 1e3:8.1f} "
          f"{m['tokens_per_s']:9.0f} {'-' if peak is None else f'{peak / 2**30:.2f}':>9} "
          f"{'-' if offl is None else f'{offl / 2**30:.2f}':>9} "
          f"{trace.stat().st_size / 1024 if trace.exists() else 0:9.0f} "
          f"{m['final_loss']:7.3f}  {m['device_name']}")
PY
tar -czf "$OUTDIR.tar.gz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")"
echo "wrote $OUTDIR.tar.gz ($(du -k "$OUTDIR.tar.gz" | cut -f1) KiB)"
exit "$failed"
