#!/usr/bin/env bash
# The held-out nsys workloads' truth measured again, in rounds, without a profiler (the
# window's cudaProfilerStart/Stop are no-ops without one): bench/workloads/heldout/
# gru_copies_syncs.py (pageable A, pinned B, no reads C) or mlp_graphs_copies.py (pageable A,
# pinned B; then one CUDA graph a step, G), `--rounds R` of `--outside STEPS` steps a phase, in
# N fresh processes. The recordings in tests/data/heldout_h200 measured each phase once, one
# after the other (the GRU's B/A came out 0.79 in run1 and 0.69 in run2). Each process's
# metrics.json lands in OUT/<workload>/p<i>/; OUT/<workload>/log.txt holds what the machine was
# and each process's summary line. EXTRA: more of the workload's switches (e.g. --segments).
#
#   bash bench/device/heldout_rounds.sh OUT WORKLOAD [PROCESSES=3] [ROUNDS=5] [STEPS=30]
set -uo pipefail
# shellcheck source=bench/device/machine.sh
source "$(dirname "$0")/machine.sh"
cd "$(dirname "$0")/../workloads/heldout" || exit 1
usage="usage: heldout_rounds.sh OUT gru_copies_syncs|mlp_graphs_copies [PROCESSES] [ROUNDS] [STEPS]"
OUT=$(realpath -m "${1:?$usage}")
W=${2:?$usage}
PROCS=${3:-3} ROUNDS=${4:-5} STEPS=${5:-30}
[[ -f "$W.py" ]] || { echo "no workload $W.py here; $usage" >&2; exit 2; }
PYTHON=${PYTHON:-python3}
OUT=$OUT/$W
mkdir -p "$OUT"
machine_facts "$PYTHON" numpy >"$OUT/log.txt" 2>&1
rc=0
for i in $(seq 1 "$PROCS"); do
  t0=$SECONDS
  # shellcheck disable=SC2086  # EXTRA is a list of switches
  "$PYTHON" "$W.py" --outside "$STEPS" --rounds "$ROUNDS" ${EXTRA:-} --output "$OUT/p$i" \
    >"$OUT/p$i.log" 2>&1
  code=$?
  ((code == 0)) || rc=1
  echo "$W p$i: exit $code after $((SECONDS - t0)) s; $(grep '^{' "$OUT/p$i.log" | tail -1)" | tee -a "$OUT/log.txt"
  rm -f "$OUT/p$i.log"
done
exit $rc
