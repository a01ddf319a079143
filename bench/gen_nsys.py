"""Write an nsys-schema SQLite file of a long training run, for bench/bench_analyze.py.

The file is a stand-in modelled on the `nsys export --type sqlite` schema (see
tests/fixtures/nsys_builder.py); defaults: 5,000,000 kernels on two streams, 1,000,000 copies of
every direction (incl. Unified-Memory migrations), 100,000 memsets, one CUDA runtime row per GPU
activity, NVTX `train_step` ranges with nested forward/backward ranges, OSRT rows on three
threads and UM page faults. `--torch-ops N` adds N PyTorch operator ranges on the main thread,
spread over the steps and nested as `torch.autograd.profiler.emit_nvtx` (nsys
`--pytorch=autograd-nvtx`) names and nests them: `aten::linear, seq = 12, op_id = 3401` around
`aten::t` and `aten::addmm`, every op id unique (bench/bench_torch_ops.py).

    .venv/bin/python bench/gen_nsys.py bench/out/long.sqlite [--kernels N] [--copies N]
        [--torch-ops N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.nsys_builder import NsysBuilder, global_pid, global_tid

KERNEL_NAMES = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
    "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    "void at::native::(anonymous namespace)::layer_norm_kernel<float>",
    "void at::native::softmax_warp_forward<float, float, float, 11, true>",
] + [f"void generated_kernel_{i}<float>(float*, int)" for i in range(30)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernels", type=int, default=5_000_000)
    ap.add_argument("--copies", type=int, default=1_000_000)
    ap.add_argument("--memsets", type=int, default=100_000)
    ap.add_argument("--osrt", type=int, default=300_000)
    ap.add_argument("--kernels-per-step", type=int, default=500)
    ap.add_argument("--torch-ops", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rnd = random.Random(args.seed)
    b = NsysBuilder(args.out, fast=True)
    b.add_gpu(0)
    main_tid, autograd_tid, loader_tid = 4242, 4243, 4250
    b.add_thread(main_tid, "pt_main_thread")
    b.add_thread(autograd_tid, "pt_autograd_0")
    b.add_thread(loader_tid, "pt_data_worker")
    name_ids = [b.sid(n) for n in KERNEL_NAMES]
    weights = [30, 2, 10, 5, 12, 12, 15, 3, 5, 5] + [1] * 30
    launch_id = b.sid("cudaLaunchKernel_v7000")
    memcpy_id = b.sid("cudaMemcpyAsync_v3020")
    sync_id = b.sid("cudaStreamSynchronize_v3020")
    gpid = global_pid(b.pid)
    gtid_main = global_tid(b.pid, main_tid)

    # Timeline: activities laid out step by step; each step is kernels (2 streams) + copies.
    n_k, n_c, n_m = args.kernels, args.copies, args.memsets
    total = n_k + n_c + n_m
    kinds = [1, 2, 8, 10, 11, 12]
    kind_w = [30, 20, 30, 5, 10, 5]

    def gpu_rows() -> Iterator[tuple[str, tuple[int, ...]]]:
        t = 1_000_000_000
        per_step = args.kernels_per_step
        k = c = m = 0
        corr = 0
        i = 0
        while i < total:
            # pick what comes next proportionally
            r = rnd.random() * total
            if (r < n_k and k < n_k) or (c >= n_c and m >= n_m):
                dur = 2_000 + int(rnd.expovariate(1 / 20_000))
                stream = 7 if k % 3 else 13
                corr += 1
                yield "k", (t, t + dur, stream, corr, rnd.choices(name_ids, weights)[0])
                k += 1
                # overlapping streams: stream 13 kernels start slightly before the next
                t += dur + (rnd.randrange(500, 3_000) if stream == 7 else -dur // 2)
                if k % per_step == 0:
                    t += rnd.randrange(100_000, 2_000_000)  # host-side step boundary gap
            elif c < n_c and (r < n_k + n_c or m >= n_m):
                kind = rnd.choices(kinds, kind_w)[0]
                nbytes = rnd.choice((4096, 65536, 1 << 20, 8 << 20))
                dur = 1_000 + nbytes // 20  # ~20 GB/s-ish
                corr += 1
                yield "c", (t, t + dur, 21, corr, kind, nbytes, 2 if kind in (11, 12) else None)
                c += 1
                t += dur + rnd.randrange(200, 2_000)
            else:
                dur = 1_500
                corr += 1
                yield "m", (t, t + dur, 7, corr)
                m += 1
                t += dur + 300
            i += 1

    k_rows: list[tuple[int, ...]] = []
    c_rows: list[tuple[int, ...]] = []
    m_rows: list[tuple[int, ...]] = []
    rt_rows: list[tuple[int, ...]] = []
    step_bounds: list[tuple[int, int]] = []
    step_start = None
    k_in_step = 0
    last_end = 0

    def flush() -> None:
        b.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,"
            " correlationId, globalPid, demangledName, shortName, registersPerThread, gridX,"
            " gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory,"
            " localMemoryPerThread, localMemoryTotal, gridId)"
            f" VALUES (?,?,0,1,?,?,{gpid},?,?,32,1,1,1,128,1,1,0,0,0,0,0)",
            ((s, e, st, co, n, n) for s, e, st, co, n in k_rows),
        )
        b.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId,"
            f" correlationId, globalPid, bytes, copyKind, migrationCause) VALUES"
            f" (?,?,0,1,?,?,{gpid},?,?,?)",
            ((s, e, st, co, nb, kd, mc) for s, e, st, co, kd, nb, mc in c_rows),
        )
        b.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId,"
            f" correlationId, globalPid, value, bytes) VALUES (?,?,0,1,?,?,{gpid},0,65536)",
            m_rows,
        )
        b.executemany(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,{gtid_main},?,?,0,NULL)",
            rt_rows,
        )
        k_rows.clear()
        c_rows.clear()
        m_rows.clear()
        rt_rows.clear()

    for kind, row in gpu_rows():
        s, e = row[0], row[1]
        if step_start is None:
            step_start = s - 50_000
        if kind == "k":
            k_rows.append(row)
            rt_rows.append((s - 8_000, s - 3_000, row[3], launch_id))
            k_in_step += 1
        elif kind == "c":
            c_rows.append(row)
            rt_rows.append((s - 8_000, s - 3_000, row[3], memcpy_id))
        else:
            m_rows.append(row)
        last_end = max(last_end, e)
        if k_in_step >= args.kernels_per_step:
            step_bounds.append((step_start, last_end + 10_000))
            rt_rows.append((last_end - 20_000, last_end + 5_000, 0, sync_id))
            step_start = None
            k_in_step = 0
        if len(k_rows) >= 200_000:
            flush()
    flush()

    # NVTX: train_step ranges with nested forward/backward; OSRT on three threads.
    nvtx: list[tuple[int, int, int, str, int]] = []
    for i, (s, e) in enumerate(step_bounds):
        mid = s + (e - s) // 3
        nvtx.append((s, e, 59, f"train_step_{i}", gtid_main))
        nvtx.append((s + 1_000, mid, 59, "forward", gtid_main))
        nvtx.append((mid, e - 1_000, 59, "backward", gtid_main))
        nvtx.append((s - 40_000, s, 59, "dataloader_next", gtid_main))
    b.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,?,?,?)",
        nvtx,
    )
    if args.torch_ops and step_bounds:
        b.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,?,?,?)",
            torch_ops(args.torch_ops, step_bounds, gtid_main, rnd),
        )
    funcs = [b.sid(f) for f in ("pthread_cond_wait", "poll", "read", "ioctl", "sem_timedwait")]
    tids = [global_tid(b.pid, t) for t in (main_tid, autograd_tid, loader_tid)]
    span = max(last_end, 2_000_000_000)

    def osrt() -> Iterator[tuple[int, int, int, int]]:
        for _ in range(args.osrt):
            s = rnd.randrange(1_000_000_000, span)
            yield (s, s + rnd.randrange(1_000, 2_000_000), rnd.choice(tids), rnd.choice(funcs))

    b.executemany("INSERT INTO OSRT_API VALUES (?,?,27,?,?,0,0,0)", osrt())
    b.executemany(
        f"INSERT INTO CUDA_UM_GPU_PAGE_FAULT_EVENTS VALUES (?,?,{gpid},0,0,?,1)",
        (
            (s, s + 5_000, rnd.randrange(1, 16))
            for s in (rnd.randrange(1_000_000_000, span) for _ in range(50_000))
        ),
    )
    cpu_fault_fn = b.sid("memcpy")
    cpu_fault_mod = b.sid("libc.so.6")
    b.executemany(
        f"INSERT INTO CUDA_UM_CPU_PAGE_FAULT_EVENTS VALUES (?,{gpid},0,0,"
        f"{cpu_fault_fn},{cpu_fault_mod},0)",
        ((rnd.randrange(1_000_000_000, span),) for _ in range(20_000)),
    )
    path = b.close()
    size = path.stat().st_size
    print(
        f"wrote {path}: {n_k} kernels, {n_c} copies, {n_m} memsets, {len(step_bounds)} steps,"
        f" {size / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )
    return 0


# operator groups as emit_nvtx nests them: an operator and the operators it calls
TORCH_GROUPS = [
    ("aten::linear", ["aten::t", "aten::addmm"]),
    ("aten::matmul", ["aten::mm"]),
    ("aten::to", ["aten::_to_copy", "aten::empty_strided", "aten::copy_"]),
    ("aten::layer_norm", ["aten::native_layer_norm"]),
    ("aten::mul", []),
    ("aten::add", []),
    ("aten::view", []),
    ("aten::gelu", []),
    ("aten::softmax", ["aten::_softmax"]),
    ("autograd::engine::evaluate_function: AddmmBackward0", ["AddmmBackward0", "aten::mm"]),
    ("Optimizer.step#AdamW.step", ["aten::_foreach_add_", "aten::_foreach_mul_"]),
]


def torch_ops(
    n: int, steps: list[tuple[int, int]], gtid: int, rnd: random.Random
) -> Iterator[tuple[int, int, int, str, int]]:
    """n operator ranges (push/pop, default domain, names as emit_nvtx writes them), spread
    evenly over the steps, each group's children nested inside its parent."""
    per_step = max(n // len(steps), 1)
    op_id = seq = 0
    made = 0
    for s, e in steps:
        if made >= n:
            return
        want = min(per_step, n - made)
        slot = max((e - s - 4_000) // max(want, 1), 4)
        t = s + 2_000
        done = 0
        while done < want:
            parent, kids = rnd.choice(TORCH_GROUPS)
            kids = kids[: max(want - done - 1, 0)]
            width = slot * (1 + len(kids))
            seq += 1
            op_id += 1
            yield (t, t + width - 1, 59, f"{parent}, seq = {seq}, op_id = {op_id}", gtid)
            for k, kid in enumerate(kids):
                op_id += 1
                ks = t + slot * (k + 1) // 2 + 1
                sizes = ", sizes = [[8, 1024], [1024]]" if k % 2 else ""
                yield (ks, ks + slot // 2, 59, f"{kid}, op_id = {op_id}{sizes}", gtid)
            done += 1 + len(kids)
            t += width
        made += done


if __name__ == "__main__":
    raise SystemExit(main())
