# shellcheck shell=bash
# Sourced by bench/gpu_unannotated.sh and bench/gpu_nsys2024.sh: how every nsys recording of those
# benches is made. The caller sets NSYS (the nsys to run) and PYTHON before sourcing.
#
# NSYS_FLAGS: the seed's trace list (cuda,cudnn,cublas,osrt,nvtx), CPU IP sampling and thread
# scheduling of the process tree, Python sampling (nsys 2024.1+), CUDA memory usage, and the
# cudaProfilerApi window that the workloads open and close (NSYS_RANGE=none records the whole run
# instead: for a check on a machine without CUDA, where nothing opens the window). Each flag was
# checked against `nsys profile --help` of 2024.2.3. Not used: the seed's
# --event-sample=system-wide (hardware PMU events; the lent Firecracker machines have none:
# docs/seed-readings.md) and --delay/--duration (they start collection at launch with
# nsys 2023.4, same page).

# shellcheck disable=SC2054  # the commas are nsys's own list syntax
NSYS_FLAGS=(
  --trace=cuda,cudnn,cublas,osrt,nvtx
  --sample=process-tree --cpuctxsw=process-tree
  --cuda-memory-usage=true
  --show-output=true --force-overwrite=true
)
if [[ ${PYTHON_SAMPLING:-1} == 1 ]]; then
  NSYS_FLAGS+=(--python-sampling=true --python-sampling-frequency=1000)
fi
if [[ ${NSYS_RANGE:-cudaProfilerApi} == cudaProfilerApi ]]; then
  NSYS_FLAGS+=(--capture-range=cudaProfilerApi --capture-range-end=stop)
fi
# what `nsys stats` writes beside each export (CSV), for a reader without gh-run
NSYS_REPORTS=(cuda_gpu_kern_sum cuda_api_sum cuda_gpu_mem_time_sum osrt_sum nvtx_sum)

# nsys_post REPORT.nsys-rep: its SQLite export and stats CSVs beside it (errors in post.err)
nsys_post() {
  local rep=$1 base=${1%.nsys-rep} dir
  dir=$(dirname "$rep")
  [[ -f $rep ]] || { echo "no report $rep" >>"$dir/post.err"; return 1; }
  "$NSYS" export --type=sqlite --force-overwrite=true --output="$base.sqlite" "$rep" \
    >>"$dir/post.log" 2>>"$dir/post.err" || return 1
  local r args=()
  for r in "${NSYS_REPORTS[@]}"; do args+=(--report="$r"); done
  "$NSYS" stats "${args[@]}" --format=csv --force-overwrite=true --output="$base" \
    "$base.sqlite" >>"$dir/post.log" 2>>"$dir/post.err" || true
}

# nsys_env: what the recordings were made on and with (stdout). No host or user names.
nsys_env() {
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | sed -n '1,4p'
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "kernel: $(uname -r)"
  "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None, "gpus", torch.cuda.device_count())' 2>&1
  echo "gh-run commit: ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  "$NSYS" --version 2>&1
  echo "nsys flags: ${NSYS_FLAGS[*]}"
  env | grep -E '^(NCCL_NVLS_ENABLE|TORCH_SYMM_MEM_DISABLE_MULTICAST|NVSHMEM_DISABLE_NVLS|CUDA_VISIBLE_DEVICES)=' | sort
  echo "== nsys status --environment"
  "$NSYS" status --environment 2>&1
  echo "== nsys profile --gpu-metrics-device=help"
  "$NSYS" profile --gpu-metrics-device=help 2>&1 | head -n 20
  echo "== nsys profile --gpu-metrics-set=help"
  "$NSYS" profile --gpu-metrics-set=help 2>&1 | head -n 20
}

# pack_dirs ARCHIVE ROOT DIR...: DIR... (relative to ROOT) into ARCHIVE (.tar.xz), rewritten
# whole, so a run stopped midway still returns what finished. Over PACK_LIMIT (the device tool
# brings back files of up to 16 MiB) the SQLite exports are left out: the reports (.nsys-rep)
# are exported again where they land, by the same nsys version.
PACK_LIMIT=$((15 * 1024 * 1024))
pack_dirs() {
  local archive=$1 root=$2
  shift 2
  local have=() d
  for d in "$@"; do [[ -d $root/$d ]] && have+=("$d"); done
  ((${#have[@]})) || return 0
  mkdir -p "$(dirname "$archive")"
  tar -C "$root" --exclude='*.qdstrm' -cf - "${have[@]}" | xz -6 -T0 >"$archive.tmp"
  if (($(stat -c %s "$archive.tmp") > PACK_LIMIT)); then
    tar -C "$root" --exclude='*.qdstrm' --exclude='*.sqlite' -cf - "${have[@]}" |
      xz -6 -T0 >"$archive.tmp"
  fi
  mv "$archive.tmp" "$archive"
}
