"""Which NVTX ranges are a library's, not the workload's (issue 28 item 4).

Libraries annotate their own work: CUB/CCCL (`cub::DeviceRadixSort`), NCCL, cuDNN, cuBLAS, MPI
wrappers, and nsys itself (its Python-sampling marks live in the `Python Backtrace` domain).
None of them is a step or a phase of the training loop, so the readers keep them out of the
workload's ranges (`timeline.LIBRARY_ANNOTATION`): they never count as steps, phases, data
waits or "what changed".

Rules (evidence: the domains the committed exports create, `NVTX_EVENTS` eventType 75 rows:
`cuBLAS`, `CCCL`, `NCCL`, `MPI`, `Python Backtrace`; the names CUB pushes):
- a range in any NVTX domain other than the default one (domain id 0) is not the workload's:
  PyTorch (`torch.cuda.nvtx.range`, `emit_nvtx`), NeMo, Megatron, Lightning and HF Trainer all
  annotate in the default domain, and the libraries above each create their own;
- a range of the default domain whose name starts like a library's (`LIBRARY_PREFIXES`: older
  CUB and NCCL builds push into the default domain).
"""

from __future__ import annotations

import re

# names a library's ranges begin with (case-insensitive); `CCCL:` is CUB's domain-qualified
# spelling as nsys shows it
LIBRARY_PREFIXES = re.compile(
    r"(?i)^\s*(?:cccl:|cub::|thrust::|nccl|cudnn|cublas|cublaslt|cufft|cusparse|cusolver|"
    r"curand|nvshmem|mpi_|ucx|ucp_)"
)


def is_library_name(name: str) -> bool:
    """True for a range named like a library's own (see the module docstring)."""
    return LIBRARY_PREFIXES.match(name) is not None


def is_library_range(domain: int | None, name: str) -> bool:
    """True when a range (its NVTX domain id, None or 0 for the default domain) is a library's."""
    return bool(domain) or is_library_name(name)
