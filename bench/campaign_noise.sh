#!/usr/bin/env bash
# Benchmark: does the canary tell noise from a regression? On the dev cluster
# (scripts/devcluster.sh up), in a fresh gh-run home, campaigns/canary.yaml runs ORDINARY
# nights as they are, then one night with a planted slowdown: data-bound's item cost (a real
# knob of workloads/sft.py: extra tokenisation passes per sample) from 20 to PLANTED, which
# makes its steps about 40 % slower. Printed: per night its state, wall time and regressions;
# data-bound's relative CPU time per step (step_cpu_relative, with its CPU and wall time per
# step) against the band it was judged by; then false alarms (regressions in ordinary nights,
# split into those judged by a band and those before enough history), detections and misses
# of the planted night, and the slowdown it planted (its relative CPU time over the band's
# centre, both measured in this run).
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

night() {  # $1: label, $2: campaign file (default campaigns/canary.yaml)
  local label=$1 file=${2:-campaigns/canary.yaml} start end rc=0
  start=$(date +%s.%N)
  gh-run campaign run "$file" --wait --timeout 900 \
    > "$GH_RUN_HOME/$label.log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  echo "$label $rc $(echo "$end - $start" | bc)" >> "$GH_RUN_HOME/nights.txt"
  echo "$label: exit $rc, $(echo "$end - $start" | bc | cut -c1-5) s" >&2
}

echo "machine: $(nproc) cores, $(uname -srm); gh-run home $GH_RUN_HOME" >&2
for i in $(seq 1 "$NIGHTS"); do
  night "ordinary-$i"
done
# The planted night: the same campaign (same name, so the same history) with data-bound's
# item cost raised; its job path made absolute, as the copy lives in the gh-run home.
sed -e "s|^job: ../jobs/|job: $REPO/jobs/|" -e "s|--item-cost, 20]|--item-cost, $PLANTED]|" \
  campaigns/canary.yaml > "$GH_RUN_HOME/canary-planted.yaml"
grep -q -- "--item-cost, $PLANTED]" "$GH_RUN_HOME/canary-planted.yaml"
night planted "$GH_RUN_HOME/canary-planted.yaml"

"$REPO/.venv/bin/python" - "$GH_RUN_HOME" "$NIGHTS" "$PLANTED" <<'EOF'
import json
import sys
from pathlib import Path

home, nights, planted = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
walls = {}
for line in (home / "nights.txt").read_text().splitlines():
    label, rc, wall = line.split()
    walls[label] = (int(rc), float(wall))
reports = sorted(
    (home / "campaigns").glob("*/report/campaign.json"), key=lambda p: p.stat().st_mtime
)
labels = [f"ordinary-{i}" for i in range(1, nights + 1)] + ["planted"]
WATCH = "step_cpu_relative"  # data-bound's tight limit (campaigns/canary.yaml), a ratio
false_band = false_warmup = 0
planted_row = None
print(f"{'night':<12} {'state':<10} {'exit':>4} {'wall s':>6}  data-bound {WATCH} (CPU, wall "
      "per step) vs what it was judged by  |  regressions")
for label, path in zip(labels, reports, strict=False):
    r = json.loads(path.read_text())
    rc, wall = walls[label]
    db = next(v for v in r["variants"] if v["variant"] == "data-bound")
    f = next(f for f in db["findings"] if f["metric"] == WATCH)
    if f["rule"] == "band":
        ref = f"band {f['band_low']:.2f}..{f['band_high']:.2f} ({f['band_nights']} nights)"
    elif f["baseline"] is not None:
        ref = f"last good night {f['baseline']:.2f}"
    else:
        ref = "nothing (first night)"
    regs = [f"{g['variant']}:{g['metric']}({g['rule']})" for g in r["regressions"]]
    wall_step = db["metrics"].get("step_time_s") or 0
    cpu_step = db["metrics"].get("step_cpu_time_s") or 0
    print(f"{label:<12} {r['state']:<10} {rc:>4} {wall:>6.0f}  {f['value']:.2f} "
          f"({cpu_step*1e3:.1f} ms, {wall_step*1e3:.1f} ms) vs {ref}  |  {' '.join(regs) or '-'}")
    if label == "planted":
        planted_row = (r, f)
    else:
        for g in r["regressions"]:
            if g["rule"] == "band":
                false_band += 1
            else:
                false_warmup += 1
variants = len(json.loads(reports[0].read_text())["variants"]) if reports else 0
print()
print(f"false alarms over {nights} ordinary nights x {variants} variants: {false_band} judged by "
      f"a band, {false_warmup} before enough history (last good night and threshold)")
if planted_row is None:
    print(f"planted night: no report (exit {walls['planted'][0]}; see {home}/planted.log)")
else:
    r, f = planted_row
    hit = any(g["variant"] == "data-bound" and g["metric"] == WATCH for g in r["regressions"])
    slow = (f["value"] / f["baseline"] - 1) * 100 if f["baseline"] else float("nan")
    others = sorted({g["variant"] for g in r["regressions"]} - {"data-bound"})
    changed = next(v for v in r["variants"] if v["variant"] == "data-bound")["what_changed"]
    print(f"planted night (item cost 20 -> {planted}): data-bound {WATCH} {slow:+.1f}% over the "
          f"{'band centre' if f['rule'] == 'band' else 'last good night'}; detections "
          f"{int(hit)}/1, misses {1 - int(hit)}/1; other variants flagged: {others or 'none'}")
    if changed:
        print(f"what changed: {changed['finding']}")
ordinary = sorted(walls[f"ordinary-{i}"][1] for i in range(1, nights + 1))
print(f"canary wall time per night (submit to report): median {ordinary[len(ordinary) // 2]:.0f} s,"
      f" max {ordinary[-1]:.0f} s; machine load during the run is whatever else ran")
EOF
