#!/usr/bin/env bash
# The planted-cause recordings (bench/gpu_causes.sh, brought back as causes-N.tar.xz) made into
# test data (tests/data/causes_h200/<variant>/): each report exported to SQLite with nsys 2024.2.3
# here, trimmed (bench/trim_nsys_export.py --keep-callchains: the idle classes read the call
# stacks), scrubbed (bench/scrub_nsys_export.py: paths and the environment's values) and
# xz-packed, with the workload's own truth (metrics.json, scrubbed too) and the command it ran.
#
#   bash bench/causes_test_data.sh UNPACKED_DIR [DST]   # DST: tests/data/causes_h200
#
# UNPACKED_DIR holds one folder per variant (the archives unpacked). Knobs: NSYS (nsys 2024.2.3
# under /opt/gh-run), PYTHON (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(realpath "${1:?usage: causes_test_data.sh UNPACKED_DIR [DST]}")
DST=$(realpath -m "${2:-tests/data/causes_h200}")
NSYS=${NSYS:-/opt/gh-run/nsys/2024.2.3/target-linux-x64/nsys}
PYTHON=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in "$SRC"/*/; do
  v=$(basename "$d")
  [[ -f $d/$v.nsys-rep && -f $d/metrics.json ]] || { echo "skip $v (no report or truth)"; continue; }
  "$NSYS" export --type sqlite --force-overwrite true -o "$tmp/$v.full.sqlite" "$d/$v.nsys-rep" >/dev/null 2>&1
  "$PYTHON" bench/trim_nsys_export.py "$tmp/$v.full.sqlite" "$tmp/$v.sqlite" --keep-callchains
  mkdir -p "$DST/$v"
  cp "$d/metrics.json" "$DST/$v/metrics.json"
  cp "$d/command.txt" "$DST/$v/command.txt"
  "$PYTHON" bench/scrub_nsys_export.py "$tmp/$v.sqlite" "$DST/$v/metrics.json"
  xz -9 -c "$tmp/$v.sqlite" >"$DST/$v/$v.sqlite.xz"
  echo "$v: $(stat -c %s "$DST/$v/$v.sqlite.xz") bytes"
done
