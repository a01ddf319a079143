#!/usr/bin/env bash
# The unit tests (tests/unit: the analysis readers and everything that needs no torch) under each
# extra CPython interpreter that scripts/install-python.sh put in the tools prefix, with every
# warning an error (`-W error`: what Python 3.12-3.14 deprecates fails here first), except
# ResourceWarning, which is shown: it reports a leak, not a change of the language (Python
# ignores it by default), and some are by design (the local executor leaves its supervisor
# running, and Python warns of a Popen object let go while its process runs; 3.13 added one for
# each sqlite3 connection never closed). Each
# interpreter has its own small venv, .venvs/<X.Y>, with gh-run (editable, its C readers built
# for that interpreter) and the `test` extra; it is made again when pyproject.toml, setup.py or
# a C reader changes. The whole suite runs under the system Python (`make test`).
#
#   bash scripts/test-pythons.sh [X.Y...]     # default: every interpreter installed
#   PYTEST_ARGS='-k nsys' bash scripts/test-pythons.sh 3.14
#   PYTEST_WORKERS=4 bash scripts/test-pythons.sh   # pytest-xdist workers (default 4: twice the
#                                                   # cores, as UNIT_WORKERS: the Makefile says why)
#   bash scripts/test-pythons.sh --venvs-only       # make the venvs, run nothing (test-suite.sh
#                                                   # makes them while the first tests run)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${GH_RUN_TOOLS:-/opt/gh-run}"
cd "$REPO"
log() { printf '[test-pythons] %s\n' "$*" >&2; }

venvs_only=0
if [[ ${1:-} == --venvs-only ]]; then
    venvs_only=1
    shift
fi
versions=("$@")
if ((${#versions[@]} == 0)); then
    for py in "$PREFIX"/python/*/bin/python3.*; do
        [[ -x $py ]] && versions+=("${py##*/python}")
    done
fi
((${#versions[@]})) || { log "no extra interpreter in $PREFIX/python (bash scripts/install-python.sh)"; exit 1; }

# the workload's tests need torch, which these venvs do not install (the system venv's run has it)
no_torch=()
for f in tests/unit/test_*.py; do
    grep -q 'importorskip("torch")' "$f" && no_torch+=("--ignore=$f")
done

# A quarter of the property and fuzz examples (tests/budget.py says why); GH_RUN_EXAMPLES_SCALE=1
# draws them all.
export GH_RUN_EXAMPLES_SCALE="${GH_RUN_EXAMPLES_SCALE:-0.25}"

# Every venv first (about 15 s of CPU each), then the tests under each.
for v in "${versions[@]}"; do
    py="$PREFIX/python/$v/bin/python$v"
    [[ -x $py ]] || { log "no Python $v in $PREFIX/python (bash scripts/install-python.sh $v)"; exit 1; }
    venv=".venvs/$v"
    stamp="$venv/.installed"
    t0=$SECONDS
    stale=0
    for f in pyproject.toml setup.py orchestrator/analysis/readers/*.c; do
        [[ $f -nt $stamp ]] && stale=1
    done
    if [[ ! -e $stamp || $stale == 1 ]]; then
        rm -rf "$venv"
        "$py" -m venv --without-pip "$venv"
        # the system venv's pip installs pip into it (Debian's interpreters carry no ensurepip wheels)
        .venv/bin/pip --python "$venv/bin/python" install -q pip
        # --no-compile: the tests compile what they import (PYTHONDONTWRITEBYTECODE is unset),
        # not every module of every dependency
        "$venv/bin/pip" install -q --no-compile -e '.[test]'
        touch "$stamp"
        log "Python $v: $venv made in $((SECONDS - t0)) s"
    fi
done

((venvs_only)) && exit 0

failed=()
for v in "${versions[@]}"; do
    venv=".venvs/$v"
    t0=$SECONDS
    # shellcheck disable=SC2086  # PYTEST_ARGS: words on purpose
    if GH_RUN_NO_SKIPS=1 "$venv/bin/python" -W error -W default::ResourceWarning -m pytest -q \
        -p no:cacheprovider -n "${PYTEST_WORKERS:-4}" --dist worksteal tests/unit "${no_torch[@]}" \
        ${PYTEST_ARGS:-}; then
        log "Python $v: unit tests passed in $((SECONDS - t0)) s"
    else
        log "Python $v: unit tests FAILED ($((SECONDS - t0)) s)"
        failed+=("$v")
    fi
done
((${#failed[@]} == 0)) || { log "failed under Python ${failed[*]}"; exit 1; }
