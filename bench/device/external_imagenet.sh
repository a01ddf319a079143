#!/usr/bin/env bash
# Record a training script nobody here wrote on one lent GPU: PyTorch's ImageNet example
# (pytorch/examples imagenet/main.py at 77f55b9, BSD-3; not committed: fetched into
# bench/workloads/external/imagenet_main.py, see that folder's README) on its own synthetic
# data (`--dummy`: torchvision's FakeData, each image made and converted on the host),
# ResNet-18, batch 256, one GPU, run unchanged under bench/workloads/external/kineto_wrap.py
# (torch.profiler over steps 6-11, every step's wall, ended after STEPS optimizer steps). The
# knob is its own `-j` (DataLoader workers): 0, then 4 (what gh-run's data-loader knob asks for
# from none), then 8, in turn, ROUNDS times.
# OUT/j<N>/ holds round 1's trace and metrics.json for each; OUT/rounds.tar every round's
# metrics.json; OUT/log.txt what the machine was and each run's log (8 files come back at most).
# JOBS="0 4 8" by default: the -j values of a round; ARCH (resnet18) and BATCH (256) the model
# (any torchvision model the example's `-a` takes) and its batch; the environment passes through
# (OMP_NUM_THREADS=1 runs the main thread's tensor ops on one thread, as a DataLoader worker's).
#
#   bash bench/device/external_imagenet.sh OUT [ROUNDS] [STEPS]
set -uo pipefail
# shellcheck source=bench/device/machine.sh
source "$(dirname "$0")/machine.sh"
here=$(cd "$(dirname "$0")/../workloads/external" && pwd)
IMAGENET_MAIN_URL=https://raw.githubusercontent.com/pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/imagenet/main.py
IMAGENET_MAIN_SHA256=f67ca2cd730bf91afe0504694abf07b88cbd03ac8c8a0426023620d29175c158
main_py=$here/imagenet_main.py
if [[ ! -f $main_py ]]; then
  if ! curl -fsSL --max-time 60 -o "$main_py.part" "$IMAGENET_MAIN_URL"; then
    rm -f "$main_py.part"
    echo "external_imagenet.sh: $main_py is missing and could not be fetched from $IMAGENET_MAIN_URL;" \
      "fetch it on a machine with network and carry it here with the checkout" >&2
    exit 2
  fi
  mv "$main_py.part" "$main_py"
fi
if ! echo "$IMAGENET_MAIN_SHA256  $main_py" | sha256sum -c --status; then
  echo "external_imagenet.sh: $main_py is not pytorch/examples' imagenet/main.py at 77f55b9" \
    "(SHA-256 differs); delete it and fetch it again" >&2
  exit 2
fi
OUT=$(realpath -m "${1:?usage: external_imagenet.sh OUT [ROUNDS] [STEPS]}")
ROUNDS=${2:-3}
STEPS=${3:-60}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" /tmp/ext
machine_facts "$PYTHON" torchvision >"$OUT/log.txt" 2>&1
rc=0
for r in $(seq 1 "$ROUNDS"); do
  for j in ${JOBS:-0 4 8}; do
    dir=/tmp/ext/r$r/j$j
    mkdir -p "/tmp/ext/r$r"
    t0=$SECONDS
    "$PYTHON" "$here/kineto_wrap.py" --name "imagenet_j$j" --output "$dir" --steps "$STEPS" -- \
      "$main_py" --dummy --gpu 0 -a "${ARCH:-resnet18}" -b "${BATCH:-256}" -j "$j" --epochs 1 \
      --print-freq 1000 >"$dir.log" 2>&1
    code=$?
    ((code == 0)) || rc=1
    echo "round $r -j $j: exit $code after $((SECONDS - t0)) s"
    { echo "== round $r -j $j (exit $code)"; tail -20 "$dir.log"; } >>"$OUT/log.txt"
    if ((r == 1)); then
      mkdir -p "$OUT/j$j" && cp "$dir"/* "$OUT/j$j/"
    fi
  done
done
(cd /tmp/ext && tar cf "$OUT/rounds.tar" r*/j*/metrics.json)
exit $rc
