#!/usr/bin/env bash
# Benchmark: does the canary tell noise from a regression on a busy machine? On the dev cluster
# (scripts/devcluster.sh up), in a fresh gh-run home, with a bursty load beside it
# (bench/bursty_load.py: every 2-5 s a random number, 0 to 4, of busy loops), campaigns/
# canary.yaml runs ORDINARY nights from an empty history, then one night with a planted
# slowdown: data-bound's item cost (a real knob of workloads/sft.py: extra tokenisation passes
# per sample) from 20 to PLANTED, about 40 % slower steps at 40. Printed: per night its
# verdict, alarms and the spread of wall time per step over the variants; data-bound's relative
# CPU time per step against what judged it (the warm-up's median or the band); then the false
# alarms over the ordinary nights (by rule), how far load moved each variant's wall time and
# its judged figure, the planted night's detection and what changed, the canary's wall time,
# and what the load was. HOME/history.json keeps every night's metrics.
#
# Usage: bench/campaign_noise.sh [ORDINARY_NIGHTS (4)] [PLANTED item cost (40)] [LOAD: bursty|none]
#        LOAD_SEED=N sets the load's random seed (default 30).
#        CANARY=FILE runs another canary file of the same name (a baseline: the canary of an
#        earlier commit, say); its job path is made absolute.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
NIGHTS=${1:-4}
PLANTED=${2:-40}
LOAD=${3:-bursty}
case $LOAD in bursty | none) ;; *) echo "LOAD must be bursty or none, not $LOAD" >&2; exit 2 ;; esac
export GH_RUN_DEVCLUSTER_DIR=${GH_RUN_DEVCLUSTER_DIR:-$REPO/.devcluster}
export SLURM_CONF=${SLURM_CONF:-$GH_RUN_DEVCLUSTER_DIR/etc/slurm.conf}
GH_RUN_HOME=$(mktemp -d /tmp/gh-run-noise.XXXXXX)
export GH_RUN_HOME
# Jobs inherit this environment: the venv's python3 (with torch) first, as an activated venv.
export PATH="$REPO/.venv/bin:$PATH"
cd "$REPO"

LOAD_PID=
stop_load() {
  if [ -n "$LOAD_PID" ]; then
    kill -TERM "$LOAD_PID" 2> /dev/null || true
    wait "$LOAD_PID" 2> /dev/null || true
    LOAD_PID=
  fi
}
trap stop_load EXIT
if [ "$LOAD" = bursty ]; then
  "$REPO/.venv/bin/python" bench/bursty_load.py "$GH_RUN_HOME/load.log" --seed "${LOAD_SEED:-30}" &
  LOAD_PID=$!
fi

CANARY_FILE=campaigns/canary.yaml
if [ -n "${CANARY:-}" ]; then
  sed -e "s|^job: ../jobs/|job: $REPO/jobs/|" "$CANARY" > "$GH_RUN_HOME/canary.yaml"
  CANARY_FILE=$GH_RUN_HOME/canary.yaml
fi

night() {  # $1: label, $2: campaign file (default: the canary)
  local label=$1 file=${2:-$CANARY_FILE} start end cid rc=0
  start=$(date +%s.%N)
  gh-run campaign run "$file" --wait --timeout 900 \
    > "$GH_RUN_HOME/$label.log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  # the campaign id from its first line ("campaign ID: N variants ..."), "-" if none began
  cid=$(sed -n 's/^campaign \([^ ]*\): .*/\1/p' "$GH_RUN_HOME/$label.log" | head -1)
  echo "$label $rc $(echo "$end - $start" | bc) ${cid:--}" >> "$GH_RUN_HOME/nights.txt"
  echo "$label: exit $rc, $(echo "$end - $start" | bc | cut -c1-5) s" >&2
}

echo "machine: $(nproc) cores, $(uname -srm); load $LOAD; gh-run home $GH_RUN_HOME" >&2
for i in $(seq 1 "$NIGHTS"); do
  night "ordinary-$i"
done
# The planted night: the same campaign (same name, so the same history) with data-bound's
# item cost raised; its job path made absolute, as the copy lives in the gh-run home.
sed -e "s|^job: ../jobs/|job: $REPO/jobs/|" -e "s|--item-cost, 20]|--item-cost, $PLANTED]|" \
  "$CANARY_FILE" > "$GH_RUN_HOME/canary-planted.yaml"
grep -q -- "--item-cost, $PLANTED]" "$GH_RUN_HOME/canary-planted.yaml"
night planted "$GH_RUN_HOME/canary-planted.yaml"
stop_load

"$REPO/.venv/bin/python" bench/campaign_noise_summary.py "$GH_RUN_HOME" "$NIGHTS" "$PLANTED"
