"""Held-out workload (recorded under torch.profiler): an MLP classifier over 1,000 classes
(bf16 autocast, AdamW) on feature batches already on the GPU, whose loop computes its metrics
on the host each step the way evaluation code often does: the softmax scores copied to the host
(`.cpu().numpy()`), then top-5 accuracy by `np.argpartition`, a confusion matrix by
`np.add.at` and per-class precision and recall in numpy, while the GPU, its step done, waits for
the next launches. The cause planted is host computation in the step; written after gh-run's
host-compute rule and projection and not fitted to them: its first recording is the check.

Phases outside the profiler (`--outside` steps each), the truth (N is profiled too, into its
own folder):
  A  as captured: the metrics computed on the host each step
  N  the same step without them (the knob: the host work moved off the step; the loss still
     read once a step)

    python3 metric_numpy.py --output DIR [--device cpu: a dry run]
"""

from __future__ import annotations

import numpy as np
import torch
from kineto_phases import parser, run
from torch import nn


def host_metrics(scores: np.ndarray, labels: np.ndarray, classes: int) -> dict[str, float]:
    """Top-1 and top-5 accuracy, and macro precision and recall from a confusion matrix."""
    top5 = np.argpartition(-scores, 5, axis=1)[:, :5]
    pred = scores.argmax(axis=1)
    confusion = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(confusion, (labels, pred), 1)
    tp = np.diag(confusion).astype(np.float64)
    precision = tp / np.maximum(confusion.sum(axis=0), 1)
    recall = tp / np.maximum(confusion.sum(axis=1), 1)
    return {
        "top1": float((pred == labels).mean()),
        "top5": float((top5 == labels[:, None]).any(axis=1).mean()),
        "precision": float(precision.mean()),
        "recall": float(recall.mean()),
    }


def main() -> int:
    p = parser(__doc__, outside=30)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--features", type=int, default=1024)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--classes", type=int, default=1000)
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(a.features, a.width), nn.GELU(), nn.Linear(a.width, a.width), nn.GELU(),
        nn.Linear(a.width, a.classes),
    ).to(dev)  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    g = torch.Generator(device=dev).manual_seed(0)
    xs = [torch.randn(a.batch, a.features, device=dev, generator=g) for _ in range(3)]
    ys = [torch.randint(0, a.classes, (a.batch,), device=dev, generator=g) for _ in range(3)]
    at = [0]
    kept: list[dict[str, float]] = []

    def step(metrics: bool) -> None:
        i = at[0] % len(xs)
        at[0] += 1
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(xs[i])
        loss = nn.functional.cross_entropy(logits.float(), ys[i])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loss logged each step
        if metrics:
            scores = logits.detach().float().softmax(dim=1).cpu().numpy()
            kept.append(host_metrics(scores, ys[i].cpu().numpy(), a.classes))

    def without() -> None:
        step(False)

    run(
        "metric_numpy",
        lambda: step(True),
        {"A_metrics": (lambda: step(True), 2), "N_no_metrics": (without, 2)},
        args=a,
        cuda=cuda,
        config={"host_metrics": True},
        also={"N_no_metrics": without},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
