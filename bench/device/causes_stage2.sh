#!/usr/bin/env bash
# The last device call for bench/gpu_causes.sh (issue 35 item 7): the last part of the nsys
# archive (nsys's own libcrypto left out: the system's OpenSSL 3 serves), gh-run's wheels (those
# `gh-run submit --executor local` imports and the image lacks) and this branch's tree travel
# here; the parts before wait in /root/ghc (causes_stage1.sh). nsys unpacked, gh-run installed
# from this branch's tree, then every variant recorded through `gh-run submit --executor local`,
# its pair's archive rewritten in $OUT after each.
#   carry: .gpu-cause (the last nsys.part-a?, wheels/, src.tar.xz, NSYS_SHA256, this script)
#   run: bash .gpu-cause/causes_stage2.sh
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(pwd)
t0=$(date +%s)
cd /root/ghc || { echo "no /root/ghc: the machine is not the one the calls before left their parts on"; exit 3; }
cp "$here"/nsys.part-* . && cat nsys.part-* >nsys.tar.xz # the parts sort by name
sha256sum -c "$here"/NSYS_SHA256 || exit 3
mkdir -p nsys && tar -C nsys -xJf nsys.tar.xz || exit 3
export PATH=/root/ghc/nsys/target-linux-x64:$PATH
nsys --version || exit 3
ldconfig -p | grep -q "libcrypto.so.3" || { echo "no system libcrypto.so.3: the trimmed nsys cannot import"; exit 3; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/ghc/site "$here"/wheels/*.whl || exit 3
# this branch's tree on its own (the checkout that travels is main's: laid under it, a module
# moved since would shadow its new folder), with the example traces setup.py ships from main's
mkdir -p src && tar -C src -xJf "$here"/src.tar.xz &&
  mkdir -p src/tests/data/traces && cp -a "$repo"/tests/data/traces/baseline \
    "$repo"/tests/data/traces/offload src/tests/data/traces/ && cp "$repo"/README.md src/ || exit 3
export PYTHONPATH=/root/ghc/site
# `python3 -m orchestrator` run inside the tree would import its source folder, which has no
# orchestrator.templates (setup.py maps templates/ into the installed package): never the CWD
export PYTHONSAFEPATH=1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /root/ghc/site ./src >pip.log 2>&1 || { tail pip.log; exit 3; }
echo "setup: $(($(date +%s) - t0)) s"
cd src && python3 -m orchestrator --version
GH_RUN_COMMIT=$(cat "$here"/COMMIT) PACK_DIR=$OUT BUDGET_S=${BUDGET_S:-390} RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-110} \
  bash bench/gpu_causes.sh /root/ghc/out 2>&1 | tee "$OUT/log.txt"
echo "all: $(($(date +%s) - t0)) s"
