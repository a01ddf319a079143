#!/usr/bin/env bash
# The real profiler and container runtime, and the test image, for `make deps` (and so for
# `make test` and CI): Nsight Systems CLI 2023.4.4 + 2022.4.2 + 2024.2.3, Apptainer 1.4.5 (+
# singularity), the extra CPython interpreters of the tests (3.13, 3.14), and the SIF the tests
# run, all under $GH_RUN_TOOLS (default /opt/gh-run). Each step is
# idempotent and says what it did, where, and how long it took; the two installers share one
# private apt folder (one `apt-get update`), removed at the end. `make demo` needs none of this.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
t0=$SECONDS
GH_RUN_APT_DIR="$(mktemp -d "${TMPDIR:-/tmp}/gh-run-apt.XXXXXX")"
export GH_RUN_APT_DIR
trap 'rm -rf "$GH_RUN_APT_DIR"' EXIT
bash "$REPO/scripts/install-nsys.sh"
bash "$REPO/scripts/install-apptainer.sh"
bash "$REPO/scripts/install-python.sh"
bash "$REPO/scripts/build-test-image.sh"
prefix="${GH_RUN_TOOLS:-/opt/gh-run}"
echo "[install-tools] nsys, apptainer and the test image are in $prefix ($(du -sm "$prefix" | cut -f1) MB) after $((SECONDS - t0)) s" >&2
