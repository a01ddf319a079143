#!/usr/bin/env bash
# Turn what bench/gpu_unannotated.sh and bench/gpu_nsys2024.sh recorded into committed test data:
# each nsys export trimmed (bench/trim_nsys_export.py), scrubbed of the recording machine's
# paths, host name and environment (bench/scrub_nsys_export.py) and xz-compressed (the GPU-metric
# exports are 4-18 MB as SQLite; every byte committed also travels to the GPU machine with each
# device call); Kineto traces and the workloads' metrics.json scrubbed as they are.
#
#   bench/gpu_test_data.sh RESULTS [DEST]     # DEST default tests/data
#
# RESULTS holds the two benches' output folders as unpacked from their archives: nsys/<variant>,
# kineto/<variant> (gpu_unannotated.sh) and ddp, metrics_bf16, metrics_fp32, metrics_ddp
# (gpu_nsys2024.sh). Writes DEST/unannotated/{nsys,kineto}/<variant>/, DEST/ddp_nsys2024/,
# DEST/gpu_metrics/{bf16,fp32,ddp}/ (the READMEs there are written by hand). Knobs: PYTHON
# (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: bench/gpu_test_data.sh RESULTS [DEST]" >&2; exit 2; }
R=$(realpath "$1")
D=$(realpath -m "${2:-tests/data}")
PYTHON=${PYTHON:-.venv/bin/python}

export_to() { # SRC.sqlite DST.sqlite [trim flags]: DST.sqlite.xz
  mkdir -p "$(dirname "$2")"
  "$PYTHON" bench/trim_nsys_export.py "$1" "$2" "${@:3}"
  "$PYTHON" bench/scrub_nsys_export.py "$2"
  xz -9 -T1 -f "$2"
}

for v in sft_w0 sft_w4 convnet_w0 convnet_w4; do
  # the call stacks stay: what the host did while the GPU waited is these recordings' question
  export_to "$R/nsys/$v/$v.sqlite" "$D/unannotated/nsys/$v/$v.sqlite" --keep-callchains
  cp "$R/nsys/$v/metrics.json" "$D/unannotated/nsys/$v/"
  mkdir -p "$D/unannotated/kineto/$v"
  cp "$R/kineto/$v"/*.pt.trace.json.gz "$R/kineto/$v/metrics.json" "$D/unannotated/kineto/$v/"
done
for r in 0 1; do export_to "$R/ddp/ddp.rank$r.sqlite" "$D/ddp_nsys2024/ddp.rank$r.sqlite"; done
cp "$R/ddp/metrics.json" "$R/ddp/metrics_rank1.json" "$D/ddp_nsys2024/"
for v in bf16 fp32; do
  export_to "$R/metrics_$v/metrics_$v.sqlite" "$D/gpu_metrics/$v/metrics_$v.sqlite" \
    --gpu-metrics-window
  cp "$R/metrics_$v/metrics.json" "$D/gpu_metrics/$v/"
done
for r in 0 1; do
  export_to "$R/metrics_ddp/metrics_ddp.rank$r.sqlite" \
    "$D/gpu_metrics/ddp/metrics_ddp.rank$r.sqlite" --gpu-metrics-window
done
cp "$R/metrics_ddp/metrics.json" "$R/metrics_ddp/metrics_rank1.json" "$D/gpu_metrics/ddp/"
mapfile -t texts < <(find "$D/unannotated" "$D/ddp_nsys2024" "$D/gpu_metrics" \
  -name 'metrics*.json' -o -name '*.pt.trace.json.gz')
"$PYTHON" bench/scrub_nsys_export.py "${texts[@]}"
du -sh "$D/unannotated" "$D/ddp_nsys2024" "$D/gpu_metrics"
