#!/usr/bin/env bash
# The GPU canary through gh-run itself, on a machine with one NVIDIA GPU and no SLURM (the
# device tool's H100): `gh-run submit jobs/canary.yaml --executor local` runs the very script
# SLURM would run (launcher direct), without the container (Singularity is not there), with the
# Kineto trace and the cudaProfilerApi window of steps 10-11; then status, analyze and report
# on what was collected. Run by hand; CI has no GPU.
# Usage: bench/gpu_canary.sh [OUTDIR]   (default bench/out/gpu_canary)
# Knobs (environment): PYTHON (python3), EXTRA_SET (more --set a.b=c words).
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=$(realpath -m "${1:-bench/out/gpu_canary}")
PYTHON=${PYTHON:-python3}
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
export GH_RUN_HOME="$OUTDIR/home" SCRATCH="$OUTDIR/scratch" COLUMNS=160 PYTHONUNBUFFERED=1
gh() { "$PYTHON" -m orchestrator "$@"; }
read -ra extra <<<"${EXTRA_SET:-}"
sets=(--set container.runtime=none --set "workload.command=$PYTHON")
for word in "${extra[@]}"; do sets+=(--set "$word"); done

gh render jobs/canary.yaml --executor local "${sets[@]}" >"$OUTDIR/canary.sbatch"
gh submit jobs/canary.yaml --executor local "${sets[@]}" --wait
gh status last
gh logs last | tail -n 5
gh analyze last
gh analyze last --json >"$OUTDIR/analysis.json"
gh report last --out "$OUTDIR/report"
run_dir=$(gh status last --json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["run"]["run_dir"])')
echo "run folder: ${run_dir:-?}"
