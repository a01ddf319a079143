#!/usr/bin/env bash
# Build the two folders bench/device/causes_stage{1,2}.sh carry to a lent GPU machine for
# bench/gpu_causes.sh (issue 35 item 7), when the checkout that travels leaves too little of the
# 64 MiB a call carries for nsys and gh-run's wheels together (it did: 48 MiB of tracked files).
#
#   bash bench/device/causes_bundle.sh OUT        # OUT/stage1-1/, ..., OUT/stage2/
#
# nsys 2024.2.3 from $GH_RUN_TOOLS/nsys (scripts/install-nsys.sh), cut to what `nsys profile` of
# CUDA, OS-runtime and NVTX traces with CPU sampling, and the import of its .qdstrm into a report,
# use (left out: GPU metrics, Python sampling and annotation, MPI/UCX/SHMEM, cuDNN/cuBLAS
# injections, Vulkan, stats and rules scripts, and libcrypto.so.3: the image's OpenSSL 3 serves,
# libssh needs only OPENSSL_3.0.0 symbols; stage 1 checks the image has it), compressed with xz's
# x86 filter (~23.7 MiB, ~15 min of one core; NSYS_XZ names one made before) and split in parts
# of PART_BYTES: each but the last travels in a call of its own (OUT/stage1-K, in order), the last
# with the wheels and this branch's tree in the last call (OUT/stage2). PART_BYTES is what a call
# may carry beside the checkout that travels (64 MiB less its tracked and untracked files), with a
# margin. Knobs: GH_RUN_TOOLS (/opt/gh-run), NSYS_XZ, PART_BYTES (10000000), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:?usage: causes_bundle.sh OUT}")
SRC=${GH_RUN_TOOLS:-/opt/gh-run}/nsys/2024.2.3
PART_BYTES=${PART_BYTES:-10000000}
NSYS_XZ=${NSYS_XZ:-}
PYTHON=${PYTHON:-python3}
LEAVE_OUT=(
  target-linux-x64/libnvperf_grfx_host.so target-linux-x64/GpuMetrics target-linux-x64/nvgpucs
  target-linux-x64/libToolsInjectionCuDNN64_7.so target-linux-x64/libToolsInjectionCuDNN64_8.so
  target-linux-x64/libToolsInjectionCuBLAS64_10.so target-linux-x64/libToolsInjectionCuBLAS64_11.so
  target-linux-x64/libToolsInjectionMPICH64.so target-linux-x64/libToolsInjectionOpenMPI64.so
  target-linux-x64/libToolsInjectionOpenSHMEM64.so target-linux-x64/libToolsInjectionUCP64.so
  target-linux-x64/vulkan-layers target-linux-x64/python target-linux-x64/rules
  target-linux-x64/reports target-linux-x64/libToolsInjectionPythonNvtxAnnotations64.so
  target-linux-x64/libToolsInjectionPythonGilTracing64.so
  target-linux-x64/libToolsInjectionPythonBacktrace64.so target-linux-x64/NvTraceFormat
  target-linux-x64/PythonFunctionsTrace host-linux-x64/python host-linux-x64/reports
  host-linux-x64/rules host-linux-x64/libcrypto.so.3
)
[[ -x $SRC/target-linux-x64/nsys ]] || { echo "no nsys 2024.2.3 in $SRC" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT/stage2/wheels"
if [[ -n $NSYS_XZ ]]; then
  cp "$NSYS_XZ" "$OUT/nsys.tar.xz"
else
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  cp -a "$SRC/target-linux-x64" "$SRC/host-linux-x64" "$stage/"
  for p in "${LEAVE_OUT[@]}"; do rm -rf "${stage:?}/$p"; done
  tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -cf - host-linux-x64 \
    target-linux-x64 | xz --x86 --lzma2=preset=9e,dict=256MiB -T1 >"$OUT/nsys.tar.xz"
fi
(cd "$OUT" && sha256sum nsys.tar.xz >stage2/NSYS_SHA256)
(cd "$OUT" && split -b "$PART_BYTES" -a 2 nsys.tar.xz nsys.part-)
parts=("$OUT"/nsys.part-*)
for i in "${!parts[@]}"; do
  if ((i + 1 < ${#parts[@]})); then
    mkdir -p "$OUT/stage1-$((i + 1))"
    mv "${parts[$i]}" "$OUT/stage1-$((i + 1))/"
    cp bench/device/causes_stage1.sh "$OUT/stage1-$((i + 1))/"
  else
    mv "${parts[$i]}" "$OUT/stage2/"
  fi
done
cp bench/device/causes_stage2.sh "$OUT/stage2/"
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014; do
  platforms+=(--platform "${p}_x86_64")
done
# what `gh-run submit --executor local` imports and the image lacks (or has in other versions)
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d "$OUT/stage2/wheels" pydantic==2.14.4 \
  pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  typing-extensions==4.16.0 typer==0.28.0
git archive HEAD orchestrator templates bench clusters jobs docs/schema examples setup.py \
  pyproject.toml | xz -9 >"$OUT/stage2/src.tar.xz"
git rev-parse HEAD >"$OUT/stage2/COMMIT"
du -sb "$OUT"/stage*
