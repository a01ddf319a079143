#!/usr/bin/env bash
# Build the small real container image the tests run: Debian 12 minbase + python3 + the `nvtx`
# Python package (0.2.11: later releases are not recorded by nsys 2022.4/2023.4) + gh-run's CPU
# workload (workloads/cpu_steps.py at /opt/gh-run-test/cpu_steps.py), as a SIF.
#
#   bash scripts/build-test-image.sh          # -> $GH_RUN_TOOLS/images/gh-run-test.sif
#
# No container registry is reachable here, so the image is built from a local root file system
# (debootstrap --variant=minbase, then `apptainer build IMAGE.sif DIR/`; a def file's %post would
# need a nested build that fails as root on these machines). Cached: the SIF is rebuilt only when
# its recipe changes (the workload, the nvtx version, the suite, RECIPE below), recorded in
# gh-run-test.sif.recipe; a second run returns at once. Needs root (debootstrap), Apptainer
# (scripts/install-apptainer.sh), debootstrap and mksquashfs (scripts/system-deps.sh), and pip
# (the repo's .venv, or python3 -m pip) to fetch the nvtx wheel.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAPT_WHO="build-test-image"
# shellcheck source=scripts/lib/private-apt.sh
source "$REPO/scripts/lib/private-apt.sh"

IMAGES="$PREFIX/images"
SIF="$IMAGES/gh-run-test.sif"
SUITE=bookworm
NVTX_VERSION=0.2.11
PY_TAG=3.11 # bookworm's python3
WORKLOAD="$REPO/workloads/cpu_steps.py"
APPTAINER="$PREFIX/bin/apptainer"

[[ -x $APPTAINER ]] || papt_die "no Apptainer at $APPTAINER; run scripts/install-apptainer.sh first"
for tool in debootstrap mksquashfs; do
    command -v "$tool" >/dev/null || papt_die "$tool is missing; run scripts/system-deps.sh (apt-get install debootstrap squashfs-tools)"
done

# What the image is made of; bump RECIPE when the build steps below change what goes in.
RECIPE=1
recipe="$( (cat "$WORKLOAD"; echo "$RECIPE $SUITE $NVTX_VERSION $PY_TAG") | sha256sum | cut -c1-16)"
mkdir -p "$IMAGES"
exec 9>"$IMAGES/.build.lock"
flock 9
if [[ -f $SIF && "$(cat "$SIF.recipe" 2>/dev/null)" == "$recipe" ]]; then
    papt_log "test image $SIF is up to date (recipe $recipe, $(du -m "$SIF" | cut -f1) MB); nothing to do"
    exit 0
fi

t0=$SECONDS
WORK="$(mktemp -d "$IMAGES/.build.XXXXXX")"
trap 'papt_remove_tree "$WORK"' EXIT
ROOT="$WORK/rootfs"
papt_system_source
papt_log "debootstrap --variant=minbase --include=python3 $SUITE from $PAPT_URI (about a minute)"
debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$PAPT_URI" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 20 "$WORK/debootstrap.log" >&2; papt_die "debootstrap failed"; }

# nvtx: its manylinux wheel for the image's python, unpacked where Debian's python3 looks.
pip=("$REPO/.venv/bin/python" -m pip)
[[ -x $REPO/.venv/bin/python ]] || pip=(python3 -m pip)
"${pip[@]}" download -q --no-deps --only-binary=:all: --python-version "$PY_TAG" \
    --implementation cp --platform manylinux2014_x86_64 -d "$WORK/wheels" "nvtx==$NVTX_VERSION" ||
    papt_die "could not download the nvtx $NVTX_VERSION wheel (pip, PyPI)"
site="$ROOT/usr/local/lib/python$PY_TAG/dist-packages"
mkdir -p "$site"
python3 -m zipfile -e "$WORK"/wheels/nvtx-*.whl "$site"

mkdir -p "$ROOT/opt/gh-run-test"
cp "$WORKLOAD" "$ROOT/opt/gh-run-test/cpu_steps.py"
# What a container never reads: package caches and lists, documentation, locales.
rm -rf "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/usr/share/doc/* \
    "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/usr/share/locale/* "$ROOT"/var/log/*
# The image proves itself before it is built: python3 imports nvtx inside the root.
chroot "$ROOT" /usr/bin/python3 -c "import importlib.metadata as m, nvtx; assert m.version('nvtx') == '$NVTX_VERSION'" ||
    papt_die "python3 in the image cannot import nvtx $NVTX_VERSION"

papt_log "apptainer build $SIF from the root file system"
"$APPTAINER" -q build --force "$WORK/image.sif" "$ROOT/" >"$WORK/build.log" 2>&1 ||
    { tail -n 20 "$WORK/build.log" >&2; papt_die "apptainer build failed"; }
"$APPTAINER" -q exec "$WORK/image.sif" python3 /opt/gh-run-test/cpu_steps.py --steps 1 --step-ms 1 >/dev/null ||
    papt_die "the built image cannot run its workload"
mv -f "$WORK/image.sif" "$SIF"
echo "$recipe" >"$SIF.recipe"
papt_log "test image $SIF built ($(du -m "$SIF" | cut -f1) MB, recipe $recipe) in $((SECONDS - t0)) s"
