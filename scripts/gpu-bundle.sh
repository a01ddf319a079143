#!/usr/bin/env bash
# Pack what a GPU machine without network needs to run gh-run's GPU benches (bench/gpu_*.sh):
# the installed Nsight Systems CLI as one xz file, the RMM wheels for CUDA 13 (Unified Memory),
# and the wheels gh-run itself needs that a PyTorch image usually lacks.
#
#   bash scripts/gpu-bundle.sh [OUTDIR]        # default: .gpu (ignored by git)
#
# Writes, in OUTDIR (made on demand, replaced pieces only):
#   nsys-<VERSION>.tar.xz   nsys from $GH_RUN_TOOLS/nsys/<VERSION> (scripts/install-nsys.sh puts
#                           it there), cut to what `nsys profile/export/stats` of CUDA, cuDNN,
#                           cuBLAS, OS-runtime and NVTX traces, CPU and Python sampling and GPU
#                           metrics use (left out: MPI / UCX / OpenSHMEM / Vulkan tracing, the
#                           injection libraries of cuBLAS 10 and cuDNN 7, Python NVTX annotation
#                           and GIL tracing, `nsys recipe` packages; before 2024.1 also the GPU
#                           metrics parts, as this script always did). Compressed with xz's x86
#                           filter and a dictionary as large as the tree: 30.5 MiB for 2024.2.3,
#                           against 35.4 MiB for the two trees as plain `xz -9e` archives.
#   wheels/*.whl            rmm-cu13, librmm-cu13, rapids-logger (needs cuda-bindings >= 13.0.1
#                           and numpy 2 on the machine: the device image has both); pydantic,
#                           pydantic-core, annotated-types, typing-inspection, typing-extensions,
#                           submitit, orjson (CPython 3.12, manylinux x86-64)
#   setup.sh                `source OUTDIR/setup.sh` there: unpacks nsys into /tmp/gh-run-tools
#                           (or reuses what an earlier call unpacked there, when this OUTDIR
#                           carries no archive), installs the wheels into /tmp/gh-run-site, puts
#                           both on PATH / PYTHONPATH, prints `nsys --version`
#   MANIFEST                sizes and sha256 of the pieces
# Then it checks here: the archive unpacks and `nsys --version` answers from the unpacked copy,
# and the whole stays under BUDGET_MIB. The device tool carries 64 MiB in all, the checkout's
# tracked files included: the default budget is 63 MiB less what `git ls-files` holds. When the
# nsys archive and the wheels together do not fit, make two folders (SKIP_WHEELS=1 for one,
# SKIP_NSYS=1 for the other) and carry them in two calls on the same warm machine.
# Knobs (environment): GH_RUN_TOOLS (/opt/gh-run), NSYS_VERSION (2024.2.3), PYTHON (python3),
# XZ_OPT (--x86 --lzma2=preset=9e,dict=256MiB), BUDGET_MIB, SKIP_WHEELS=1 (nsys only),
# SKIP_NSYS=1 (wheels and setup.sh only), RMM=0 (leave out the RMM wheels).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${1:-.gpu}
TOOLS=${GH_RUN_TOOLS:-/opt/gh-run}
VERSION=${NSYS_VERSION:-2024.2.3}
PYTHON=${PYTHON:-python3}
SRC="$TOOLS/nsys/$VERSION"
tracked_mib=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print int(s / 1048576 + 0.999)}')
BUDGET_MIB=${BUDGET_MIB:-$((63 - tracked_mib))}

# Pinned so that a bundle made today and one made next month run the same code there.
RMM_WHEELS=(rmm-cu13==26.10.0 librmm-cu13==26.10.0 rapids-logger==0.3.0)
GH_RUN_WHEELS=(pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0
  typing-inspection==0.4.5 typing-extensions==4.16.0 submitit==1.5.4 orjson==3.13.0)
# What profiling, export and stats never load for our traces (see scripts/install-nsys.sh).
NSYS_LEAVE_OUT=(
  target-linux-x64/libToolsInjectionMPICH64.so target-linux-x64/libToolsInjectionOpenMPI64.so
  target-linux-x64/libToolsInjectionOpenSHMEM64.so target-linux-x64/libToolsInjectionUCP64.so
  target-linux-x64/vulkan-layers target-linux-x64/python/packages host-linux-x64/python/packages
  target-linux-x64/libToolsInjectionCuBLAS64_10.so target-linux-x64/libToolsInjectionCuDNN64_7.so
  target-linux-x64/libToolsInjectionPythonNvtxAnnotations64.so
  target-linux-x64/libToolsInjectionPythonGilTracing64.so
  target-linux-x64/NvTraceFormat target-linux-x64/PythonFunctionsTrace
)
case "$VERSION" in
  2022.* | 2023.*) # GPU metrics were never carried for these (their recordings have none)
    NSYS_LEAVE_OUT+=(target-linux-x64/libnvperf_grfx_host.so target-linux-x64/GpuMetrics
      target-linux-x64/nvgpucs) ;;
esac

die() { echo "gpu-bundle: $*" >&2; exit 1; }

mkdir -p "$OUT"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# --- nsys ---------------------------------------------------------------------------------------
if [[ ${SKIP_NSYS:-0} != 1 ]]; then
  [[ -x $SRC/target-linux-x64/nsys && -d $SRC/host-linux-x64 ]] ||
    die "no nsys $VERSION under $TOOLS/nsys (run: bash scripts/install-nsys.sh $VERSION)"
  echo "== nsys $VERSION from $SRC"
  mkdir -p "$stage/nsys"
  cp -a "$SRC/target-linux-x64" "$SRC/host-linux-x64" "$stage/nsys/"
  for path in "${NSYS_LEAVE_OUT[@]}"; do rm -rf "${stage:?}/nsys/$path"; done
  archive="$OUT/nsys-$VERSION.tar.xz"
  tar -C "$stage/nsys" --owner=0 --group=0 --numeric-owner --sort=name \
    -cf - host-linux-x64 target-linux-x64 |
    XZ_OPT="${XZ_OPT:---x86 --lzma2=preset=9e,dict=256MiB}" xz -T1 >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  echo "   unpacked $(du -sm "$stage/nsys" | cut -f1) MiB -> $(du -m "$archive" | cut -f1) MiB xz"

  echo "== check: unpack and ask the unpacked nsys its version"
  mkdir -p "$stage/check"
  tar -C "$stage/check" -xJf "$archive"
  "$stage/check/target-linux-x64/nsys" --version
fi

# --- wheels -------------------------------------------------------------------------------------
if [[ ${SKIP_WHEELS:-0} != 1 ]]; then
  echo "== wheels (CPython 3.12, manylinux x86-64)"
  rm -rf "$OUT/wheels"
  mkdir -p "$OUT/wheels"
  platforms=()
  for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
  done
  wheels=("${GH_RUN_WHEELS[@]}")
  [[ ${RMM:-1} == 1 ]] && wheels+=("${RMM_WHEELS[@]}")
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$OUT/wheels" "${wheels[@]}"
  ls -1 "$OUT/wheels"
fi

# --- setup.sh (runs there) ----------------------------------------------------------------------
cat >"$OUT/setup.sh" <<EOF
# Made by scripts/gpu-bundle.sh. On the GPU machine: source $OUT/setup.sh (from the repo root).
_gh_bundle="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
_gh_nsys=/tmp/gh-run-tools/nsys-$VERSION
if [[ -f \$_gh_bundle/nsys-$VERSION.tar.xz ]]; then
  rm -rf "\$_gh_nsys" && mkdir -p "\$_gh_nsys"
  if command -v xz >/dev/null; then
    tar -C "\$_gh_nsys" -xJf "\$_gh_bundle/nsys-$VERSION.tar.xz"
  else # no xz program: Python's lzma reads the same file (its x86 filter included)
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \\
      "\$_gh_bundle/nsys-$VERSION.tar.xz" "\$_gh_nsys"
  fi
elif [[ -x \$_gh_nsys/target-linux-x64/nsys ]]; then
  echo "gpu-bundle: reusing nsys $VERSION unpacked by an earlier call in \$_gh_nsys"
else
  echo "gpu-bundle: no nsys $VERSION here or in \$_gh_nsys (carry a folder that has it)" >&2
fi
export PATH="\$_gh_nsys/target-linux-x64:\$PATH"
if compgen -G "\$_gh_bundle/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
    --target /tmp/gh-run-site "\$_gh_bundle"/wheels/*.whl
  export PYTHONPATH="/tmp/gh-run-site\${PYTHONPATH:+:\$PYTHONPATH}"
fi
nsys --version
EOF

# --- manifest and budget ------------------------------------------------------------------------
(
  cd "$OUT"
  find . -type f ! -name MANIFEST -printf '%P\n' | sort | while read -r f; do
    printf '%10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$f"
  done
) >"$OUT/MANIFEST"
total=$(du -sm --apparent-size "$OUT" | cut -f1)
echo "== $OUT: $total MiB in all (budget $BUDGET_MIB MiB: the checkout's tracked files take $tracked_mib)"
cat "$OUT/MANIFEST"
((total <= BUDGET_MIB)) || die "$OUT is $total MiB, over the $BUDGET_MIB MiB budget"
