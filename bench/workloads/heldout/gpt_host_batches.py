"""Held-out workload (recorded under torch.profiler): a GPT-2 from Hugging Face transformers,
randomly initialised from a small config, trained by a plain loop (bf16 autocast, fused AdamW)
on batches a pure-Python tokeniser builds on the main thread each step: no DataLoader, no torch
op while it runs. The cause planted is host compute in the step (the GPU waits while Python
tokenises); written after gh-run's rules and projections and not fitted to them.

Phases outside the profiler (`--outside` steps each), the truth (B is profiled too, into its
own folder):
  A  as captured: the batch tokenised in the step
  B  the same batches tokenised before the loop and cycled: the host work removed
  W  the tokeniser in a DataLoader of `--workers` workers (an IterableDataset): the usual knob

    python3 gpt_host_batches.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import torch
from kineto_phases import parser, run
from torch.utils.data import DataLoader, IterableDataset


class Tokeniser:
    """A greedy longest-match subword tokeniser over a made-up vocabulary, in plain Python: the
    host work a text pipeline does per sample."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        pieces: set[str] = set(letters)
        while len(pieces) < vocab - 2:
            pieces.add("".join(rng.choice(letters) for _ in range(rng.randint(2, 6))))
        self.ids = {p: i + 2 for i, p in enumerate(sorted(pieces))}
        self.longest = max(map(len, self.ids))
        self.words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(20000)
        ]

    def sample(self, rng: random.Random, words: int, seq: int) -> list[int]:
        text = " ".join(rng.choice(self.words) for _ in range(words)).lower()
        out = [1]
        for word in text.split():
            i = 0
            while i < len(word):
                for n in range(min(self.longest, len(word) - i), 0, -1):
                    piece = self.ids.get(word[i : i + n])
                    if piece is not None:
                        out.append(piece)
                        i += n
                        break
        # a window of the document, as packed pre-training samples take
        start = rng.randrange(max(1, len(out) - seq))
        return (out[start:] + [0] * seq)[:seq]

    def batch(self, rng: random.Random, batch: int, words: int, seq: int) -> torch.Tensor:
        return torch.tensor([self.sample(rng, words, seq) for _ in range(batch)])


class Stream(IterableDataset[torch.Tensor]):
    def __init__(self, tok: Tokeniser, batch: int, words: int, seq: int) -> None:
        self.tok, self.batch, self.words, self.seq = tok, batch, words, seq

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = torch.utils.data.get_worker_info()
        rng = random.Random(1000 + (info.id if info else 0))
        while True:
            yield self.tok.batch(rng, self.batch, self.words, self.seq)


def main() -> int:
    p = parser(__doc__, outside=30)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=16000)
    p.add_argument(
        "--words", type=int, default=300, help="words of the document a sample is cut from"
    )
    p.add_argument("--workers", type=int, default=4)
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
    tok = Tokeniser(a.vocab)
    rng = random.Random(0)

    def train(ids: torch.Tensor) -> None:
        ids = ids.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loss logged each step

    def inline() -> None:
        train(tok.batch(rng, a.batch, a.words, a.seq))

    pool = [tok.batch(rng, a.batch, a.words, a.seq) for _ in range(8)]
    cycled = itertools.cycle(pool)
    loader = iter(
        DataLoader(Stream(tok, a.batch, a.words, a.seq), batch_size=None, num_workers=a.workers)
    )

    def prebuilt() -> None:
        train(next(cycled))

    run(
        "gpt_host_batches",
        inline,
        {
            "A_inline": (inline, 2),
            "B_prebuilt": (prebuilt, 2),
            # the workers' first batches were made while nothing ran: settle past them
            "W_workers": (lambda: train(next(loader)), 3 * a.workers),
        },
        args=a,
        cuda=cuda,
        config={
            "num_workers": 0,
            "precision": "bf16",
        },
        also={"B_prebuilt": prebuilt},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
