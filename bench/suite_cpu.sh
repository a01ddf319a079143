#!/usr/bin/env bash
# Where a command's CPU goes, every process counted: the Linux kernel's process accounting
# (acct(5), switched on with accton) records each process that ends, whoever started it, so
# this sees what the timings plugin (tests/timings.py) cannot: the SLURM jobs under slurmd, the
# commands sshd runs for the SSH tests, nsys's own processes, Chromium, pip. `make test` is bound
# below by all its CPU over the machine's cores (issue 38), so this says what to make cheaper.
#
#   bash bench/suite_cpu.sh                          # scripts/test-suite.sh (the dev cluster up)
#   bash bench/suite_cpu.sh .venv/bin/pytest -q -n 4 tests/unit
#
# Needs root and Debian's `acct` package (apt-get install acct); the accounting is switched on
# for the whole machine while the command runs, so run nothing else meanwhile. Prints the CPU by
# program and the Python processes by size (bench/pacct_summary.py); the records stay in
# $PACCT (default /tmp/gh-run-pacct).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PACCT="${PACCT:-/tmp/gh-run-pacct}"
command -v accton >/dev/null || { echo "no accton here: apt-get install acct" >&2; exit 2; }
((EUID == 0)) || { echo "process accounting needs root" >&2; exit 2; }
(($#)) || set -- bash scripts/test-suite.sh

: >"$PACCT"
accton "$PACCT" >/dev/null
trap 'accton off >/dev/null' EXIT
t0=$SECONDS
rc=0
"$@" || rc=$?
accton off >/dev/null
trap - EXIT
wall=$((SECONDS - t0))
echo "[suite-cpu] '$*' exited $rc after $wall s"
dump-acct "$PACCT" | .venv/bin/python bench/pacct_summary.py --wall "$wall" --cores "$(nproc)"
exit "$rc"
