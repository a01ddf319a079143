#!/usr/bin/env bash
# `make test`: every test, under every interpreter, in two streams that run side by side so
# that waiting and computing overlap on the machine's cores (issue 38):
#
#   integration  tests/integration under the venv's Python, TEST_WORKERS xdist workers (4).
#                These mostly wait (for SLURM to schedule and run their jobs, for sacct, for
#                cron, for a daemon they stopped), so their workers outnumber the cores.
#   unit         tests/unit under the venv's Python, then under each extra interpreter
#                (scripts/test-pythons.sh: 3.13, 3.14), UNIT_WORKERS workers (4) each. These
#                compute, and wait for the processes they start about 45 % of their time:
#                twice the cores' workers overlap that (the Makefile has the figures). They
#                run at a lower priority (nice UNIT_NICE, 10), so they take the cores whenever
#                the integration tests wait and give them back at once when an integration
#                test (or the SLURM job it submitted) has work: the integration tests see the
#                machine much as they would alone, and their timeouts mean what they meant.
#
# Every test of the former one-after-the-other order runs, under the same interpreters, with
# GH_RUN_NO_SKIPS=1 (a skip fails). Each stream writes its own log (TEST_LOGS, default
# .test-logs/); each is printed whole when it ends, and the exit status is 1 when either failed.
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

log "integration: $LOGS/integration.log; unit (3.11, then the extra interpreters): $LOGS/unit.log"
.venv/bin/pytest -q "${XDIST[@]}" -n "${TEST_WORKERS:-4}" tests/integration \
    >"$LOGS/integration.log" 2>&1 &
integration=$!
# nice: the stream's pytest workers and everything they start inherit it
NICE=(nice -n "${UNIT_NICE:-10}")
(
    set +e
    # The extra interpreters' venvs are made while the first unit tests run: part of their
    # making is waiting (PyPI, disk), which the tests' computing fills (DEVELOPERS.md: little
    # gained on this machine's fast link).
    "${NICE[@]}" bash scripts/test-pythons.sh --venvs-only >"$LOGS/venvs.log" 2>&1 &
    venvs=$!
    "${NICE[@]}" .venv/bin/pytest -q "${XDIST[@]}" -n "${UNIT_WORKERS:-4}" tests/unit
    main=$?
    log "unit tests under the venv: exit $main after $((SECONDS - t0)) s"
    wait "$venvs"
    made=$?
    cat "$LOGS/venvs.log"
    extra=1
    if ((made == 0)); then
        PYTEST_WORKERS="${UNIT_WORKERS:-4}" "${NICE[@]}" bash scripts/test-pythons.sh
        extra=$?
    else
        log "the extra interpreters' venvs were not made (exit $made; above)"
    fi
    ((main == 0 && extra == 0))
) >"$LOGS/unit.log" 2>&1 &
unit=$!

failed=()
wait "$integration" || failed+=(integration)
log "integration tests done in $((SECONDS - t0)) s"
cat "$LOGS/integration.log"
wait "$unit" || failed+=(unit)
log "unit tests (every interpreter) done in $((SECONDS - t0)) s"
cat "$LOGS/unit.log"
if ((${#failed[@]})); then
    log "FAILED: ${failed[*]} (logs in $LOGS), $((SECONDS - t0)) s in all"
    exit 1
fi
log "passed: every test under every interpreter in $((SECONDS - t0)) s"
