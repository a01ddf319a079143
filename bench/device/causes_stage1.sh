#!/usr/bin/env bash
# Device calls before the last for bench/gpu_causes.sh (issue 35 item 7): the checkout that
# travels leaves too little of the 64 MiB a call carries for the trimmed nsys 2024.2 (~24 MiB) and
# gh-run's wheels at once (48 MiB of it in one session, 53 MiB in the next). Each such call leaves
# its part(s) of the nsys archive in /root/ghc (the machine stays warm for the next call) and says
# what the machine has.
#   carry: .gpu-cause (nsys.part-a?, this script); run: bash .gpu-cause/causes_stage1.sh
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /root/ghc
cp "$here"/nsys.part-* /root/ghc/
sha256sum /root/ghc/nsys.part-*
echo "== machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
df -h /root /tmp | tail -n 2
python3 -c 'import sys, torch, numpy; print(sys.version.split()[0], torch.__version__, torch.version.cuda, numpy.__version__, torch.cuda.get_device_name(0))'
python3 -c 'import transformers, typer, jinja2, yaml, rich, annotated_doc, cloudpickle; print("transformers", transformers.__version__, "typer", typer.__version__)' 2>&1 | tail -n 1
command -v gcc xz || true
# the trimmed nsys leaves OpenSSL to the system (libssh needs only OPENSSL_3.0.0 symbols)
ldconfig -p | grep -E "libcrypto.so.3|libgssapi_krb5.so.2|libkrb5.so.3" || echo "MISSING system libs"
