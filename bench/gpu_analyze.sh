#!/usr/bin/env bash
# `gh-run analyze` of recordings, under a Python whose warnings are errors (issue 24: the GPU
# machine's Python 3.12 is a useful manual check of what CI's 3.11 does not see). For each folder
# given (one recording: an nsys export or Kineto trace, with its metrics.json), runs
#   PYTHON -W error -m orchestrator analyze FOLDER          (text, as a user sees it)
#   PYTHON -W error -m orchestrator analyze FOLDER --json
# and, where one of those fails, the same without -W error, to tell a warning from a failure.
#
#   bench/gpu_analyze.sh OUTFILE FOLDER...      # everything printed goes to OUTFILE too
#
# Knobs (environment): PYTHON (python3), COLUMNS (140).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[[ $# -ge 2 ]] || { echo "usage: bench/gpu_analyze.sh OUTFILE FOLDER..." >&2; exit 2; }
PYTHON=${PYTHON:-python3}
export COLUMNS=${COLUMNS:-140} PYTHONUNBUFFERED=1
out=$(realpath -m "$1")
shift
mkdir -p "$(dirname "$out")"
{
  echo "== $("$PYTHON" -c 'import sys; print("python", sys.version.split()[0])')," \
    "gh-run commit ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}," \
    "native readers: $("$PYTHON" -c 'from orchestrator.analysis import native; print(native.library_path("_sqlite_pages"), native.library_path("_kineto_scan"))' 2>&1 | tail -n 1)"
  for folder in "$@"; do
    for mode in text json; do
      args=(analyze "$folder")
      [[ $mode == json ]] && args+=(--json)
      echo "== -W error analyze ${folder#"$PWD"/} ($mode)"
      t0=$(date +%s%N)
      "$PYTHON" -W error -m orchestrator "${args[@]}" >"$out.tmp" 2>&1
      rc=$?
      t1=$(date +%s%N)
      if [[ $mode == json && $rc == 0 ]]; then
        cp "$out.tmp" "${folder%/}/analysis.json"
        "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print("json keys:", sorted(d)[:12])' "$out.tmp"
      else
        cat "$out.tmp"
      fi
      echo "exit $rc in $(((t1 - t0) / 1000000)) ms"
      if ((rc != 0)); then
        echo "-- again without -W error:"
        "$PYTHON" -m orchestrator "${args[@]}" 2>&1 | tail -n 40
        echo "exit ${PIPESTATUS[0]}"
      fi
    done
  done
  rm -f "$out.tmp"
} 2>&1 | tee "$out"
