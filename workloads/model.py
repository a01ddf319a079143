"""A Llama-style decoder in plain PyTorch: RMSNorm, rotary attention, SwiGLU MLP.

Random weights, no downloads. `Decoder.activation_checkpointing` recomputes each block in the
backward pass (non-reentrant `torch.utils.checkpoint`), so only block inputs are kept.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, computed in fp32 and cast back to the input's dtype."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * self.weight).type_as(x)


def rotary_tables(
    seq_len: int, head_dim: int, base: float = 10000.0, device: torch.device | None = None
) -> tuple[Tensor, Tensor]:
    """cos and sin tables of shape (seq_len, head_dim) for the half-rotation form of RoPE."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x of shape (batch, heads, seq, head_dim) by the position's angles."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    seq = x.shape[-2]
    return x * cos[:seq].to(x.dtype) + rotated * sin[:seq].to(x.dtype)


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary position embeddings (q/k/v/o projections)."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
        self.heads = heads
        self.head_dim = hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, s, h = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, h))  # type: ignore[no-any-return]


def ffn_dim(hidden: int, multiple_of: int = 64) -> int:
    """Llama's SwiGLU width: 8/3 of hidden, rounded up to a multiple."""
    raw = int(8 * hidden / 3)
    return multiple_of * ((raw + multiple_of - 1) // multiple_of)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        inner = ffn_dim(hidden)
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # type: ignore[no-any-return]


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.mlp_norm = RMSNorm(hidden)
        self.mlp = SwiGLU(hidden)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))  # type: ignore[no-any-return]


class Decoder(nn.Module):
    """Token embedding, `layers` blocks, final norm, untied LM head."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, max_seq_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.activation_checkpointing = False
        cos, sin = rotary_tables(max_seq_len, hidden // heads, device=self.embed.weight.device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(_init_weights)

    def forward(self, input_ids: Tensor) -> Tensor:
        cos, sin = self.get_buffer("cos"), self.get_buffer("sin")
        x = self.embed(input_ids)
        for layer in self.layers:
            if self.activation_checkpointing and torch.is_grad_enabled():
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))  # type: ignore[no-any-return]


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Next-token cross entropy in fp32; label -100 (prompt and padding) is ignored."""
    return F.cross_entropy(
        logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100
    )
