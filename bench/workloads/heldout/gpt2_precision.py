"""Held-out workload (recorded under torch.profiler): a GPT-2 from Hugging Face transformers
(LayerNorm, GELU, learned positions, PyTorch's SDPA attention), randomly initialised, trained by a
plain loop in fp32 (fused AdamW) on token batches made on the GPU: the GPU bounds the step. The
cause planted is fp32 training (matrix multiplies on CUDA cores: PyTorch leaves TF32 off for
them); written after gh-run's per-class bf16 projection (fp32 GEMMs, fp32 fused attention, the
rest) and not fitted to it: a model family none of the pairs it was measured on belongs to.

Phases outside the profiler (`--outside` steps each), the truth (P is profiled too, into its
own folder, so the classes' own speed-ups can be read):
  A  as captured: fp32
  P  bf16 autocast (the knob)

    python3 gpt2_precision.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import torch
from kineto_phases import parser, run, trained


def main() -> int:
    p = parser(__doc__, outside=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32768)
    a = p.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=a.vocab, n_positions=a.seq, n_embd=a.width, n_layer=a.layers, n_head=a.heads
    )
    model = GPT2LMHeadModel(cfg).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)

    step = trained(lambda: model(input_ids=ids, labels=ids).loss, opt, dev)

    def bf16() -> None:
        step(True)

    run(
        "gpt2_precision",
        lambda: step(False),
        {"A_fp32": (lambda: step(False), 2), "P_bf16": (bf16, 3)},
        args=a,
        cuda=cuda,
        config={
            "precision": "fp32",
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "attn_implementation": getattr(model.config, "_attn_implementation", None),
        },
        also={"P_bf16": bf16},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
