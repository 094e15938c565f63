"""The same Transformer LM built from PyTorch's own building blocks: the yardstick the
reference is measured against in benchmarks/run.py.

Same architecture and the same state-dict names as minilm.TransformerLM (so the reference's
weights load into it and both compute the same logits), but nn.Linear, nn.Embedding,
F.rms_norm, F.silu and F.scaled_dot_product_attention do the work. RoPE has no PyTorch op, so
it is the same few elementwise ops in both models (real arithmetic: torch.compile cannot fuse
complex numbers).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.output_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(4))

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.num_heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, heads, t, d_k)
        return self.output_proj(out.transpose(1, 2).reshape(b, t, d))


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE on adjacent pairs (x[2i], x[2i+1]), each rotated by its position's angle."""
    even, odd = x.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.ln1, self.attn = RMSNorm(d_model), Attention(d_model, num_heads)
        self.ln2, self.ffn = RMSNorm(d_model), FeedForward(d_model, d_ff)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x), cos, sin)
        return x + self.ffn(self.ln2(x))


class BuiltinsLM(nn.Module):
    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                 d_ff: int, rope_theta: float = 10000.0):
        super().__init__()
        self.vocab_size, self.context_length = vocab_size, context_length
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(Block(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        d_k = d_model // num_heads
        inv_freq = rope_theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        angles = torch.outer(torch.arange(context_length, dtype=torch.float64), inv_freq)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, token_ids: Tensor) -> Tensor:
        x = self.token_embeddings(token_ids)
        seq = token_ids.shape[-1]
        for layer in self.layers:
            x = layer(x, self.cos[:seq], self.sin[:seq])
        return self.lm_head(self.ln_final(x))
