"""Held-out workload (recorded under torch.profiler): a small Transformer language model
(torch.nn's encoder layers with a causal mask, fp32, AdamW) trained on token batches already on
the GPU, so small (batch 16 x 64 tokens, width 256) that the GPU runs each of its ~1,000
kernels a step faster than Python launches them. The cause planted is a launch-bound step;
written after gh-run's CUDA-graph projection (`critical_path`'s launch-bound lever) and not
fitted to it: its first recording is the check.

Phases outside the profiler (`--outside` steps each), the truth (G is profiled too, into its
own folder):
  A  as captured: eager
  G  the whole step (forward, backward, AdamW's step) captured once as a CUDA graph and
     replayed, PyTorch's recipe for whole-network capture (static inputs, warm-up on a side
     stream, `capturable=True` for the optimizer); the loss read once a step in both

    python3 transformer_graphs.py --output DIR [--device cpu: a dry run, eager only]
"""

from __future__ import annotations

import torch
from kineto_phases import parser, run
from torch import nn


class LM(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x) + self.pos
        return self.head(self.enc(h, mask=self.mask, is_causal=True))


def main() -> int:
    p = parser(__doc__, outside=40)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    model = LM(a.vocab, a.width, a.layers, a.heads, a.seq).to(dev)
    g = torch.Generator(device=dev).manual_seed(0)
    batches = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev, generator=g)
               for _ in range(4)]  # fmt: skip
    at = [0]

    def loss_of(tokens: torch.Tensor) -> torch.Tensor:
        logits = model(tokens[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))

    eager_opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def eager() -> None:
        tokens = batches[at[0] % len(batches)]
        at[0] += 1
        loss = loss_of(tokens)
        eager_opt.zero_grad(set_to_none=True)
        loss.backward()
        eager_opt.step()
        loss.item()  # the loss logged each step

    phases = {"A_eager": (eager, 2)}
    also = {}
    if cuda:
        graph_opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True)
        static = batches[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm up on a side stream, as the recipe says
                graph_opt.zero_grad(set_to_none=True)
                loss_of(static).backward()
                graph_opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        graph_opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = loss_of(static)
            static_loss.backward()
            graph_opt.step()

        def graphed() -> None:
            static.copy_(batches[at[0] % len(batches)])
            at[0] += 1
            graph.replay()
            static_loss.item()  # the loss logged each step

        phases["G_graph"] = (graphed, 2)
        also = {"G_graph": graphed}

    run(
        "transformer_graphs",
        eager,
        phases,
        args=a,
        cuda=cuda,
        config={"precision": "fp32", "cuda_graphs": False},
        also=also,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
