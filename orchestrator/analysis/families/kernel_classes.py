"""What kind of work a GPU kernel is, from its name alone: HTA's kernel classes
(communication, memory, computation, other: `hta_kernel_type`, as Holistic Trace Analysis 0.5.0
classifies them) and the precision of a GEMM (`gemm_precision`: tensor cores or fp32 on CUDA
cores; docs/metrics.md, "GEMM precision")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

# ---- HTA kernel classification (hta/utils/utils.py, HolisticTraceAnalysis 0.5.0)
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def hta_kernel_type(name: str) -> str:
    """HTA's `get_kernel_type`: COMMUNICATION, MEMORY, COMPUTATION or OTHER."""
    if _HTA_COMM.match(name):
        return "COMMUNICATION"
    if _HTA_MEMORY.match(name):
        return "MEMORY"
    if not _HTA_NOT_COMPUTE.match(name):
        return "COMPUTATION"
    return "OTHER"


def is_compute(name: str) -> bool:
    """True when HTA counts the event as computation."""
    return hta_kernel_type(name) == "COMPUTATION"


# HTA's KernelType enum values, the codes of `hta_type_codes`
COMMUNICATION, MEMORY, COMPUTATION, OTHER = 0, 1, 2, 3
HTA_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")


def hta_type_codes(names: Sequence[str]) -> Any:
    """int8 array: the HTA kernel type code of each name (COMMUNICATION ... OTHER)."""
    return np.fromiter(
        (HTA_TYPES.index(hta_kernel_type(n)) for n in names), dtype=np.int8, count=len(names)
    )


# GEMM precision. A kernel name tells the math instruction or, failing that, the data types;
# the instruction decides, because one framework name says nothing about it: cuBLAS's
# `sm80_xmma_gemm_f32f32_..._ffma` kernels are xmma-framework GEMMs that run on CUDA-core FFMA.
_GEMM = re.compile(r"(?i)gemm|matmul|nvjet|cutlass")
# attention kernels (fmha, flash, sdpa) contain GEMMs but are not counted as GEMMs
_ATTENTION = re.compile(r"(?i)fmha|flash|sdpa|attention")
# tensor-core instructions: hmma/imma/qmma, Hopper wgmma/gmma, cutlass `tensorop`, mma shapes
# (s16816, h1688, i8816, s884, ...), and cuBLASLt's Hopper `nvjet_*` kernels, all wgmma
_TC_INSTRUCTION = re.compile(
    r"(?i)nvjet|[hiq]mma|gmma|tensorop|[hsi](?:16816|1688|8816|884)(?:gemm|_|$)"
)
# CUDA-core (SIMT) instructions: FFMA, cutlass `simt`, cuBLAS's classic `sgemm`
_CUDA_CORE_INSTRUCTION = re.compile(r"(?i)ffma|simt|sgemm")
# data types that cuBLAS/cutlass run on tensor cores
_LOW_PRECISION = re.compile(r"(?i)bf16|f16|fp16|half|hgemm|tf32|fp8|e4m3|e5m2|int8")
_FP32_TYPE = re.compile(r"(?i)gemm.*(?:f32|fp32|float)|(?:f32|fp32|float).*gemm")
# a fused attention kernel's element type: PyTorch's memory-efficient kernels name it
# (`fmha_cutlassF_f32_...`, `AttentionKernel<float, ...>`), flash and cuDNN's name the 16-bit
# one (`cutlass::bfloat16_t`, `..._sdpa_..._f16_...`)
_ATTENTION_LOW = re.compile(r"(?i)bf16|f16|fp16|half|bfloat16|float16|fp8|e4m3|e5m2|int8")
_ATTENTION_FP32 = re.compile(r"(?i)(?<![a-z])f32|fp32|<float")


def gemm_precision(name: str) -> str | None:
    """'tensor-core' or 'fp32' for GEMM kernels, None for anything else (docs/metrics.md).

    1. GEMM = gemm / matmul / nvjet / cutlass in the name, attention kernels excluded;
    2. a tensor-core instruction (hmma, imma, wgmma, gmma, tensorop, s16816-style shapes,
       nvjet) → tensor-core;
    3. a CUDA-core instruction (ffma, simt, sgemm) → fp32, unless a 16/8-bit type is named
       (a SIMT half GEMM is neither);
    4. else the types: bf16 / f16 / tf32 / fp8 / int8 → tensor-core; f32 / fp32 / float → fp32."""
    if not _GEMM.search(name) or _ATTENTION.search(name):
        return None
    if _TC_INSTRUCTION.search(name):
        return "tensor-core"
    low = _LOW_PRECISION.search(name) is not None
    if _CUDA_CORE_INSTRUCTION.search(name):
        return None if low else "fp32"
    if low:
        return "tensor-core"
    if _FP32_TYPE.search(name):
        return "fp32"
    return None


def attention_precision(name: str) -> str | None:
    """'fp32' or 'low' for fused attention kernels (fmha, flash, sdpa, attention in the name),
    None for anything else or a name that tells no type. An fp32 one runs its two GEMMs on CUDA
    cores; bf16 autocast sends SDPA to a flash kernel on the tensor cores."""
    if not _ATTENTION.search(name):
        return None
    if _ATTENTION_LOW.search(name):
        return "low"
    if _ATTENTION_FP32.search(name):
        return "fp32"
    return None
