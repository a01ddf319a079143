#!/usr/bin/env bash
# The reference workload under nsys 2024.2 on a machine with two NVIDIA GPUs and no SLURM:
# data-parallel with one report per rank (issue 24 item 6: do the per-rank reports keep their
# kernels, which nsys 2023.4 lost after cudaGetDriverEntryPointByVersion?), and GPU metrics
# (issue 29 item 4: nsys's --gpu-metrics-device with its default metric set and frequency).
#   ddp           torchrun x 2, DDP over NCCL, nsys inside torchrun: one report per rank
#                 (as bench/gpu_ddp.sh's `nsys` variant made under 2023.4)
#   metrics_bf16  one GPU (CUDA_VISIBLE_DEVICES=0), bf16 autocast, GPU metrics of METRICS_DEVICES
#   metrics_fp32  the same in fp32 (no autocast; torch's default keeps TF32 off for matmuls, so
#                 the tensor cores idle where bf16 keeps them busy)
#   metrics_ddp   torchrun x 2 as `ddp`, one sampler: only local rank 0's nsys samples GPU
#                 metrics, of every GPU of the machine (--gpu-metrics-device=all)
# Every report: bench/lib/nsys_record.sh's flags (the seed's --trace list, CPU and Python
# sampling, OS runtime, the cudaProfilerApi window over steps WINDOW), exported to SQLite with
# stats CSVs beside it. Workload (annotated: step_N / data / forward / backward / optimizer
# NVTX ranges): the 8 x 2048 decoder, seq 1024, batch 8, fused AdamW, 4 DataLoader workers.
# NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1). Run by hand; CI has no GPU.
#
#   source .gpu/setup.sh                  # nsys 2024.2 on PATH (scripts/gpu-bundle.sh)
#   bench/gpu_nsys2024.sh [OUTDIR]        # default bench/out/gpu_nsys2024
#
# Writes OUTDIR/env.txt, OUTDIR/<variant>/ (reports, exports, stats CSVs, metrics*.json, logs),
# OUTDIR/summary.txt; with PACK_DIR set, PACK_DIR/nsys2024-<variant>.tar.xz after each variant.
# Knobs (environment): NSYS (nsys), PYTHON (python3), DEVICE (cuda), NPROC (2), STEPS (10),
# WINDOW (6:8), MODEL_ARGS, VARIANTS ("ddp metrics_bf16 metrics_fp32 metrics_ddp"),
# METRICS_DEVICES (all), NSYS_RANGE, PYTHON_SAMPLING (1), PACK_DIR, GH_RUN_COMMIT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_nsys2024}")
NSYS=${NSYS:-nsys}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
NPROC=${NPROC:-2}
STEPS=${STEPS:-10}
WINDOW=${WINDOW:-6:8}
METRICS_DEVICES=${METRICS_DEVICES:-all}
MODEL_ARGS=${MODEL_ARGS:---layers 8 --hidden 2048 --heads 16 --vocab 32000 --seq-len 1024 --batch-size 8}
VARIANTS=${VARIANTS:-ddp metrics_bf16 metrics_fp32 metrics_ddp}
read -ra variants <<<"$VARIANTS"
read -ra model_args <<<"$MODEL_ARGS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# shellcheck source=bench/lib/nsys_record.sh
source bench/lib/nsys_record.sh
TORCHRUN=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NPROC")

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
nsys_env >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

failed=0
for v in "${variants[@]}"; do
  dir="$OUTDIR/$v"
  mkdir -p "$dir"
  wl=(-m workloads.sft --device "$DEVICE" "${model_args[@]}" --steps "$STEPS" --fused-adam
    --num-workers 4 --output "$dir" --cuda-profiler-window "$WINDOW")
  case "$v" in
    ddp | metrics_ddp)
      metrics=()
      [[ $v == metrics_ddp ]] && metrics=(--gpu-metrics-device=all)
      # nsys inside torchrun: one report per rank, named by the RANK torchrun gives each
      # process; only local rank 0 passes the metrics flag (one sampler per machine).
      # shellcheck disable=SC2016  # expanded by that bash, in each rank's environment
      cmd=("${TORCHRUN[@]}" --no-python bash -c '
        out=$1; shift; n=$1; shift
        m=("${@:1:n}"); shift "$n"
        [[ ${LOCAL_RANK:-0} == 0 ]] || m=()
        exec "$NSYS" profile "${m[@]}" --output="$out.rank$RANK" "$@"' bash "$dir/$v"
        "${#metrics[@]}" "${metrics[@]}" "${NSYS_FLAGS[@]}" "$PYTHON" "${wl[@]}" --ddp
        --precision bf16) ;;
    metrics_bf16 | metrics_fp32)
      cmd=(env CUDA_VISIBLE_DEVICES=0 "$NSYS" profile --gpu-metrics-device="$METRICS_DEVICES"
        "${NSYS_FLAGS[@]}" --output="$dir/$v" "$PYTHON" "${wl[@]}" --precision "${v#metrics_}") ;;
    *) echo "unknown variant $v" >&2; failed=1; continue ;;
  esac
  echo "== $v: ${cmd[*]}" | tee "$dir/command.txt"
  t0=$(date +%s)
  NSYS=$NSYS "${cmd[@]}" >"$dir/log.txt" 2>&1
  rc=$?
  for rep in "$dir"/*.nsys-rep; do
    [[ -e $rep ]] || { rc=1; echo "   no report"; continue; }
    nsys_post "$rep" || rc=1
  done
  echo "   exit $rc in $(($(date +%s) - t0)) s; $(grep '^median step' "$dir/log.txt" | tr '\n' ' ')"
  ((rc == 0)) || { failed=1; tail -n 15 "$dir/log.txt"; }
  if [[ -n ${PACK_DIR:-} ]]; then
    pack_dirs "$PACK_DIR/nsys2024-$v.tar.xz" "$OUTDIR" "$v"
    cp "$OUTDIR/env.txt" "$PACK_DIR/nsys2024-env.txt"
  fi
done

"$PYTHON" - "$OUTDIR" "${variants[@]}" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sqlite3, sys
from pathlib import Path
out, variants = Path(sys.argv[1]), sys.argv[2:]
def count(db: Path, table: str) -> str:
    con = sqlite3.connect(db)
    try:
        return str(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.Error:
        return "-"
    finally:
        con.close()
print(f"{'export':34} {'kernels':>8} {'runtime':>8} {'gpu_metrics':>11} {'samples':>8}  step ms (window)")
for v in variants:
    for db in sorted((out / v).glob("*.sqlite")):
        rank = db.stem.rsplit("rank", 1)[-1] if ".rank" in db.stem else "0"
        mf = out / v / ("metrics.json" if rank == "0" else f"metrics_rank{rank}.json")
        steps = "-"
        if mf.exists():
            m = json.loads(mf.read_text())
            s, e = m["config"]["cuda_profiler_window"]
            steps = " ".join(f"{t * 1e3:.1f}" for t in m["step_times_s"][s:e])
        print(f"{v + '/' + db.name:34} {count(db, 'CUPTI_ACTIVITY_KIND_KERNEL'):>8} "
              f"{count(db, 'CUPTI_ACTIVITY_KIND_RUNTIME'):>8} {count(db, 'GPU_METRICS'):>11} "
              f"{count(db, 'COMPOSITE_EVENTS'):>8}  {steps}")
PY
exit "$failed"
