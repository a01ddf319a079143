# What a lent machine is, for the first lines of a device script's log (sourced by
# bench/device/*.sh): the GPU and driver, Python, torch and its CUDA, each module named and its
# version, the cores.
#
#   machine_facts PYTHON [MODULE...]
machine_facts() {
  local py=$1
  shift
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$py" - "$@" <<'PY'
import importlib, sys
import torch
mods = [importlib.import_module(m) for m in sys.argv[1:]]
print(sys.version.split()[0], torch.__version__, torch.version.cuda,
      *(getattr(m, "__version__", "?") for m in mods))
PY
  nproc
}
