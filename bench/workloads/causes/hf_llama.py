"""A model nobody here wrote: Hugging Face transformers' Llama, built from a config (no weights,
no download), trained by a plain loop, fed by a Dataset that turns text into token ids in Python
(issue 35 item 7; issue 41's pairs: workers 0 and N, fp32 and bf16).

`LlamaForCausalLM(LlamaConfig(...))` with SDPA attention, fused AdamW, `loss.item()` every step.
The Dataset makes each sample from words: a sentence generator and a word-level tokenizer in
pure Python (a dict from words to ids, unknown words split into characters), run until the
sample holds `--seq-len` ids. What it costs per item is whatever that Python costs on the
machine: nothing sleeps. Measured: the loop's wait in `next()` (`data`), every step.

    python bench/workloads/causes/hf_llama.py --help
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

WORDS = [
    "the",
    "a",
    "model",
    "trains",
    "on",
    "tokens",
    "while",
    "each",
    "layer",
    "computes",
    "attention",
    "over",
    "the",
    "sequence",
    "and",
    "the",
    "optimizer",
    "updates",
    "every",
    "weight",
    "after",
    "the",
    "loss",
    "is",
    "reduced",
    "across",
    "the",
    "batch",
    "so",
    "that",
    "gradients",
    "flow",
    "back",
    "through",
    "residual",
    "paths",
    "into",
    "embeddings",
    "of",
    "rare",
    "and",
    "common",
    "words",
    "alike",
]


class Sentences(Dataset[Tensor]):
    """Token ids made from generated sentences by a word-level tokenizer in Python."""

    def __init__(self, n: int, seq_len: int, vocab: int, repeat: int, seed: int) -> None:
        self.n, self.seq_len, self.vocab, self.repeat, self.seed = n, seq_len, vocab, repeat, seed
        self.table = {w: i + 256 for i, w in enumerate(WORDS)}

    def __len__(self) -> int:
        return self.n

    def _encode(self, text: str) -> list[int]:
        out: list[int] = []
        for word in text.split():
            tok = self.table.get(word)
            if tok is None:
                out.extend(ord(c) % 256 for c in word)
            else:
                out.append(tok)
        return out

    def __getitem__(self, i: int) -> Tensor:
        rng = random.Random(self.seed * 1_000_003 + i)
        ids: list[int] = []
        for _ in range(self.repeat):  # the "tokenizer" runs over the document `repeat` times
            ids = []
            while len(ids) < self.seq_len:
                n = rng.randint(5, 25)
                words = [rng.choice(WORDS) if rng.random() < 0.9 else f"w{rng.randint(0, 99999)}"
                         for _ in range(n)]  # fmt: skip
                ids.extend(self._encode(" ".join(words).lower() + " ."))
        return torch.tensor([t % self.vocab for t in ids[: self.seq_len]], dtype=torch.long)


def main(argv: list[str] | None = None) -> int:
    from transformers import LlamaConfig, LlamaForCausalLM

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    harness.common_args(p, steps=14, win="6:12")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    p.add_argument("--tokenize-passes", type=int, default=4,
                   help="times the Python tokenizer runs over each sample (its cost)")  # fmt: skip
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    cfg = LlamaConfig(
        vocab_size=a.vocab,
        hidden_size=a.hidden,
        intermediate_size=a.hidden * 11 // 4,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.heads,
        max_position_embeddings=a.seq_len,
    )
    model = LlamaForCausalLM(cfg).to(dev)
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    data = Sentences(a.batch_size * (a.steps + 4), a.seq_len, a.vocab, a.tokenize_passes, a.seed)
    loader = DataLoader(
        data,
        batch_size=a.batch_size,
        num_workers=a.num_workers,
        pin_memory=cuda,
        persistent_workers=a.num_workers > 0,
        prefetch_factor=4 if a.num_workers > 0 else None,
        drop_last=True,
    )
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    clock = harness.Clock(dev, a.cuda_profiler_window)
    it = iter(loader)
    for step in range(a.steps):
        clock.begin(step)
        with clock.host("data", step):
            ids = next(it)
        ids = ids.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        clock.end(step)
    conf = {k: v for k, v in vars(a).items() if k not in ("output", "device")}
    planted = {"input": "data"} if a.num_workers == 0 else {}
    if a.precision == "fp32":
        planted["fp32-kernels"] = "none measured"
    harness.write(clock, a.output, "hf_llama", conf, planted)
    print(f"median step {1e3 * sorted(clock.walls)[len(clock.walls) // 2]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
