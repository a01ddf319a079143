#!/usr/bin/env bash
# `make test`: every test, under every interpreter, in three streams that run side by side so
# that waiting and computing overlap on the machine's cores (issue 38):
#
#   integration  tests/integration under the venv's Python, TEST_WORKERS xdist workers (4).
#                These mostly wait (for SLURM to schedule and run their jobs, for sacct, for
#                cron, for a daemon they stopped), so their workers outnumber the cores.
#   unit         tests/unit under the venv's Python, UNIT_WORKERS workers (4). These compute,
#                and wait for the processes they start about 45 % of their time: twice the
#                cores' workers overlap that (the Makefile has the figures).
#   pythons      scripts/test-pythons.sh: the extra interpreters' venvs (3.13, 3.14) made first,
#                then tests/unit under each in turn, PYTHONS_WORKERS workers (4), a quarter of
#                the property and fuzz examples (tests/budget.py says why).
# The two unit streams' tests run at a lower priority (nice UNIT_NICE and PYTHONS_NICE, 10 both),
# so they take the cores whenever the integration tests wait and give them back at once when an
# integration test (or the SLURM job it submitted) has work: the integration tests see the
# machine much as they would alone, and their timeouts mean what they meant. One after the
# other, the unit streams left the cores a fifth idle (each waits on its own processes) and
# ended 5 minutes after the integration tests. (The extra interpreters' stream at nice 7 ended
# sooner, but starved the other unit stream, which then ran alone at the end: 1,095 s in all,
# against 978 at equal priority.)
#
# Every test of the former one-after-the-other order runs, under the same interpreters, with
# GH_RUN_NO_SKIPS=1 (a skip fails). Each stream writes its own log (TEST_LOGS, default
# .test-logs/); each is printed whole when it ends, and the exit status is 1 when any failed.
#
#   bash scripts/test-suite.sh             # what `make test` runs after install, deps, cluster-up
#   TEST_WORKERS=6 UNIT_NICE=5 bash scripts/test-suite.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { printf '[test-suite] %s\n' "$*" >&2; }

# Python writes each module's bytecode once and reads it after that. An environment that sets
# PYTHONDONTWRITEBYTECODE (some containers do) makes every process the tests start (about a
# thousand `python -m orchestrator` per interpreter) compile gh-run's modules again, and every
# xdist worker rewrite the test modules' asserts again. The files go to __pycache__ (ignored by
# git), one per interpreter.
export PYTHONDONTWRITEBYTECODE=
export GH_RUN_NO_SKIPS=1

LOGS="${TEST_LOGS:-$REPO/.test-logs}"
mkdir -p "$LOGS"
XDIST=(-p no:cacheprovider --dist worksteal)
t0=$SECONDS

log "logs: $LOGS/integration.log, $LOGS/unit.log (the venv's Python), $LOGS/pythons.log (3.13, 3.14)"
# cpu_used NAME: the CPU this stream's processes used (bash's `times`: the children it waited
# for, the pytest workers and what they started; not the SLURM jobs, which slurmd runs), so a
# run says where the cores went: the run's wall time is at least the streams' CPU over the cores.
cpu_used() {
    local kids
    # `times` run here, not in $(...) or a pipe: a subshell has no children of its own
    times >"$LOGS/.times-$1"
    kids="$(tail -n 1 "$LOGS/.times-$1")"
    rm -f "$LOGS/.times-$1"
    log "$1: CPU $(awk '{ u = $1; s = $2; gsub(/[ms]/, " ", u); gsub(/[ms]/, " ", s)
        split(u, a, " "); split(s, b, " "); printf "%.0f s (user %.0f, sys %.0f)",
        a[1] * 60 + a[2] + b[1] * 60 + b[2], a[1] * 60 + a[2], b[1] * 60 + b[2] }' <<<"$kids")"
}

(
    set +e
    .venv/bin/pytest -q "${XDIST[@]}" -n "${TEST_WORKERS:-4}" tests/integration
    rc=$?
    cpu_used integration
    exit "$rc"
) >"$LOGS/integration.log" 2>&1 &
integration=$!
# nice: each stream's pytest workers and everything they start inherit it
NICE=(nice -n "${UNIT_NICE:-10}")
(
    set +e
    "${NICE[@]}" .venv/bin/pytest -q "${XDIST[@]}" -n "${UNIT_WORKERS:-4}" tests/unit
    rc=$?
    log "unit tests under the venv: exit $rc after $((SECONDS - t0)) s"
    cpu_used unit
    exit "$rc"
) >"$LOGS/unit.log" 2>&1 &
unit=$!
(
    # the venvs at full priority (seconds of CPU; at nice 10 beside the other streams, minutes
    # of waiting that this stream, the longest, would end later by), then the tests at nice 10
    bash scripts/test-pythons.sh --venvs-only || exit
    PYTEST_WORKERS="${PYTHONS_WORKERS:-4}" nice -n "${PYTHONS_NICE:-10}" bash scripts/test-pythons.sh
    rc=$?
    cpu_used pythons
    exit "$rc"
) >"$LOGS/pythons.log" 2>&1 &
pythons=$!

failed=()
# each stream's log printed whole as it ends, in the order they end
declare -A pid_of=([integration]=$integration [unit]=$unit [pythons]=$pythons)
left=(integration unit pythons)
while ((${#left[@]})); do
    wait -n "${pid_of[@]}" 2>/dev/null || true
    still=()
    for name in "${left[@]}"; do
        pid="${pid_of[$name]}"
        if kill -0 "$pid" 2>/dev/null; then
            still+=("$name")
            continue
        fi
        wait "$pid" || failed+=("$name")
        log "$name tests done in $((SECONDS - t0)) s"
        cat "$LOGS/$name.log"
        unset "pid_of[$name]"
    done
    left=("${still[@]}")
done
if ((${#failed[@]})); then
    log "FAILED: ${failed[*]} (logs in $LOGS), $((SECONDS - t0)) s in all"
    exit 1
fi
log "passed: every test under every interpreter in $((SECONDS - t0)) s"
