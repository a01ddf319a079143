"""Held-out workload (recorded under torch.profiler): a Transformer encoder classifier (torch.nn's
layers, bf16 autocast, AdamW) on synthetic token batches made on the GPU, whose loop logs metrics
the way training scripts often do: each step reads the accuracy (`.item()`), picks the non-padded
positions by a boolean mask (a nonzero that waits for the GPU), checks the loss for NaN with
`bool()`, reads each layer's gradient norm (`.item()` per layer) and clips with
`error_if_nonfinite=True`. Each read waits for the GPU to drain, and the GPU then idles while the
host queues the next work. The cause planted is those synchronisations; written after gh-run's
sync rules and projections and not fitted to them.

Phases outside the profiler (`--outside` steps each), the truth (C is profiled too, into its
own folder):
  A  as captured: the reads in the step
  C  the same step without them: the same metrics kept on the GPU (masked by weights, not
     picked), clipping without the finiteness check; the loss still read once a step

    python3 metric_syncs.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import torch
from kineto_phases import parser, run
from torch import nn


class Classifier(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, classes: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x)))


def main() -> int:
    p = parser(__doc__, outside=40)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--classes", type=int, default=16)
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    model = Classifier(a.vocab, a.width, a.layers, a.heads, a.classes).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device=dev).manual_seed(0)
    log: list[object] = []

    def step(reads: bool) -> None:
        x = torch.randint(1, a.vocab, (a.batch, a.seq), device=dev, generator=g)
        lengths = torch.randint(a.seq // 2, a.seq + 1, (a.batch, 1), device=dev, generator=g)
        keep = torch.arange(a.seq, device=dev)[None, :] < lengths
        y = torch.randint(0, a.classes, (a.batch, a.seq), device=dev, generator=g)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(x).float()
        if reads:
            picked, target = logits[keep], y[keep]  # boolean mask: waits for the count
            loss = nn.functional.cross_entropy(picked, target)
            log.append((picked.argmax(-1) == target).float().mean().item())
            if bool(torch.isnan(loss)):
                raise FloatingPointError("loss is NaN")
        else:  # the same metrics kept on the GPU (read every N steps, not in these steps)
            w = keep.float()
            per = nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")
            loss = (per * w).sum() / w.sum()
            log.append(((logits.argmax(-1) == y).float() * w).sum() / w.sum())
            log.append(torch.isnan(loss))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for layer in model.enc.layers:
            norms = [q.grad.norm() for q in layer.parameters() if q.grad is not None]
            norm = torch.stack(norms).norm()
            log.append(norm.item() if reads else norm)  # one read a layer, or none
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=reads)
        opt.step()
        log.append(loss.item())  # the loss logged each step
        del log[:-100]

    run(
        "metric_syncs",
        lambda: step(True),
        {"A_reads": (lambda: step(True), 2), "C_no_reads": (lambda: step(False), 2)},
        also={"C_no_reads": lambda: step(False)},
        args=a,
        cuda=cuda,
        config={
            "precision": "bf16",
            "reads_a_step": 3 + a.layers + 1,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
