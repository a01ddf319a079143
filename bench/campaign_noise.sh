#!/usr/bin/env bash
# Benchmark: does the canary tell noise from a regression? On the dev cluster
# (scripts/devcluster.sh up), in a fresh gh-run home, campaigns/canary.yaml runs ORDINARY
# nights as they are, then one night with a planted slowdown: data-bound's item cost (a real
# knob of workloads/sft.py: extra tokenisation passes per sample) from 20 to PLANTED, which
# makes its steps about 40 % slower. Printed: per night its state, wall time and regressions;
# data-bound's step time against the band it was judged by; then false alarms (regressions
# in ordinary nights, split into those judged by a band and those before enough history),
# detections and misses of the planted night, and the slowdown it planted (its step time
# over the band's centre, both measured in this run).
#
# Usage: bench/campaign_noise.sh [ORDINARY_NIGHTS (default 6)] [PLANTED item cost (default 40)]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
NIGHTS=${1:-6}
PLANTED=${2:-40}
export GH_RUN_DEVCLUSTER_DIR=${GH_RUN_DEVCLUSTER_DIR:-$REPO/.devcluster}
export SLURM_CONF=${SLURM_CONF:-$GH_RUN_DEVCLUSTER_DIR/etc/slurm.conf}
GH_RUN_HOME=$(mktemp -d /tmp/gh-run-noise.XXXXXX)
export GH_RUN_HOME
# Jobs inherit this environment: the venv's python3 (with torch) first, as an activated venv.
export PATH="$REPO/.venv/bin:$PATH"
cd "$REPO"

night() {  # $1: label, then extra arguments for `campaign run`
  local label=$1 start end rc=0
  shift
  start=$(date +%s.%N)
  gh-run campaign run campaigns/canary.yaml --wait --timeout 900 "$@" \
    > "$GH_RUN_HOME/$label.log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  echo "$label $rc $(echo "$end - $start" | bc)" >> "$GH_RUN_HOME/nights.txt"
  echo "$label: exit $rc, $(echo "$end - $start" | bc | cut -c1-5) s" >&2
}

echo "machine: $(nproc) cores, $(uname -srm); gh-run home $GH_RUN_HOME" >&2
for i in $(seq 1 "$NIGHTS"); do
  night "ordinary-$i"
done
night planted --set "include.0.set.1=workload.args+=[--item-cost, $PLANTED]"

"$REPO/.venv/bin/python" - "$GH_RUN_HOME" "$NIGHTS" "$PLANTED" <<'EOF'
import json
import sys
from pathlib import Path

home, nights, planted = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
walls = {}
for line in (home / "nights.txt").read_text().splitlines():
    label, rc, wall = line.split()
    walls[label] = (int(rc), float(wall))
reports = sorted((home / "campaigns").glob("*/report/campaign.json"), key=lambda p: p.stat().st_mtime)
labels = [f"ordinary-{i}" for i in range(1, nights + 1)] + ["planted"]
false_band = false_warmup = detected = 0
print(f"{'night':<12} {'state':<10} {'exit':>4} {'wall s':>7}  data-bound step_time_s vs band (rule)  regressions")
for label, path in zip(labels, reports, strict=False):
    r = json.loads(path.read_text())
    rc, wall = walls[label]
    db = next(v for v in r["variants"] if v["variant"] == "data-bound")
    f = next(f for f in db["findings"] if f["metric"] == "step_time_s")
    if f["rule"] == "band":
        ref = f"band {f['band_low']:.4f}..{f['band_high']:.4f} ({f['band_nights']} nights)"
    else:
        ref = f"baseline {f['baseline'] if f['baseline'] is None else round(f['baseline'], 4)}"
    regs = [f"{g['variant']}:{g['metric']}({g['rule']})" for g in r["regressions"]]
    value = f["value"]
    print(f"{label:<12} {r['state']:<10} {rc:>4} {wall:>7.1f}  {value:.4f} vs {ref}  {' '.join(regs) or '-'}")
    if label == "planted":
        detected = int(any(g["variant"] == "data-bound" and g["metric"] == "step_time_s" for g in r["regressions"]))
        center = f["baseline"]
        slow = (value / center - 1) * 100 if center else float("nan")
        planted_rule = f["rule"]
        others = [g for g in r["regressions"] if g["variant"] != "data-bound"]
    else:
        for g in r["regressions"]:
            if g["rule"] == "band":
                false_band += 1
            else:
                false_warmup += 1
ordinary_walls = [walls[f"ordinary-{i}"][1] for i in range(1, nights + 1)]
print()
print(f"false alarms over {nights} ordinary nights x 7 variants: {false_band} judged by a band, "
      f"{false_warmup} before enough history (last-good night and threshold)")
print(f"planted night (item cost 20 -> {planted}): data-bound step time {slow:+.1f}% over the "
      f"band's centre ({planted_rule}); detections {detected}/1, misses {1 - detected}/1; "
      f"other variants flagged that night: {len(others)}")
print(f"canary wall time per night: median {sorted(ordinary_walls)[len(ordinary_walls) // 2]:.1f} s, "
      f"max {max(ordinary_walls):.1f} s")
EOF
