#!/usr/bin/env bash
# Record the held-out PyTorch-profiler workloads (bench/workloads/heldout/gpt_host_batches.py,
# convnet_precision.py, metric_syncs.py, gpt2_precision.py, convnext_precision.py,
# resnet_pinned.py, transformer_graphs.py, metric_numpy.py) on one lent
# GPU: each writes its trace and its truth
# (metrics.json) into OUT/<workload>/; OUT/log.txt holds what the machine was (first lines) and
# each workload's log (a call brings back 8 files at most, and each workload leaves 2-3: name two
# or three a call).
# No nsys, no gh-run: torch.profiler is the recorder, as a user's own script would use it.
#
#   bash bench/device/heldout_kineto.sh OUT [WORKLOAD...]   # default: all eight
# ROUNDS: the rounds each runs (the scripts' default, 3, where unset; the last three were recorded
# with ROUNDS=5)
set -uo pipefail
# shellcheck source=bench/device/machine.sh
source "$(dirname "$0")/machine.sh"
cd "$(dirname "$0")/../workloads/heldout" || exit 1
OUT=$(realpath -m "${1:?usage: heldout_kineto.sh OUT [WORKLOAD...]}")
shift
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
machine_facts "$PYTHON" transformers torchvision >"$OUT/log.txt" 2>&1
rc=0
for w in "${@:-gpt_host_batches convnet_precision metric_syncs gpt2_precision convnext_precision resnet_pinned transformer_graphs metric_numpy}"; do
  for one in $w; do
    t0=$SECONDS
    "$PYTHON" "$one.py" --output "$OUT/$one" ${ROUNDS:+--rounds "$ROUNDS"} >"$OUT/$one.log" 2>&1
    code=$?
    ((code == 0)) || rc=1
    echo "$one: exit $code after $((SECONDS - t0)) s; $(grep '^{' "$OUT/$one.log" | tail -1)"
    { echo "== $one (exit $code)"; cat "$OUT/$one.log"; } >>"$OUT/log.txt"
    rm -f "$OUT/$one.log"
  done
done
exit $rc
